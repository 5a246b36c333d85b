"""What learners type into their notebooks: the exercise functions in several styles, the
lesson's own code cells, and the course stubs. Every exercise version here is correct unless
its name starts with WRONG_. Helper names differ between styles, so that two styles in one
notebook never overwrite each other's helpers.
"""

# --- exercise 1 ---------------------------------------------------------------------------

PICK_LESSON = '''\
def pick_device():
    # Thứ tự ưu tiên giống trong bài: cuda -> mps -> cpu
    if torch.cuda.is_available():
        device = torch.device("cuda")
    elif torch.backends.mps.is_available():
        device = torch.device("mps")
    else:
        device = torch.device("cpu")
    return device
'''

DESCRIBE_LESSON = '''\
def describe_device(device):
    # giá trị mặc định cho cpu / mps, nếu là cuda thì ghi đè
    info = {
        "type": device.type,
        "name": "CPU",
        "count": 1,
        "capability": None,
        "total_memory_bytes": None,
    }
    if device.type == "cuda":
        info["name"] = torch.cuda.get_device_name(device)
        info["count"] = torch.cuda.device_count()
        info["capability"] = torch.cuda.get_device_capability(device)
        info["total_memory_bytes"] = torch.cuda.get_device_properties(device).total_memory
    elif device.type == "mps":
        info["name"] = "Apple Silicon GPU (MPS)"
    return info
'''

PICK_RETURNS = '''\
def pick_device() -> torch.device:
    """Chọn device: cuda nếu có, không thì mps (Mac), cuối cùng là cpu."""
    if torch.cuda.is_available():
        return torch.device("cuda")
    if torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")
'''

DESCRIBE_PROPS = '''\
import platform


def describe_device(device: torch.device) -> dict:
    """5 khóa: type, name, count, capability, total_memory_bytes."""
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        return {
            "type": device.type,
            "name": props.name,
            "count": torch.cuda.device_count(),
            "capability": (props.major, props.minor),
            "total_memory_bytes": props.total_memory,   # byte, KHÔNG đổi sang GB
        }
    if device.type == "mps":
        ten = "Apple Silicon GPU"
    else:
        ten = platform.processor() or platform.machine() or "CPU"
    return {"type": device.type, "name": ten, "count": 1, "capability": None, "total_memory_bytes": None}
'''

PICK_TERNARY = '''\
def pick_device():
    # viết gọn 1 dòng: cuda > mps > cpu, trả về torch.device chứ không phải str
    ten = "cuda" if torch.cuda.is_available() else ("mps" if torch.backends.mps.is_available() else "cpu")
    return torch.device(ten)
'''

DESCRIBE_DICT = '''\
def describe_device(device):
    if device.type == "cuda":
        major, minor = torch.cuda.get_device_capability(device)
        return dict(
            type=device.type,
            name=torch.cuda.get_device_name(device),
            count=torch.cuda.device_count(),
            capability=(major, minor),
            total_memory_bytes=int(torch.cuda.get_device_properties(device).total_memory),
        )
    # cpu hoặc mps: chỉ có 1 "thiết bị", không có compute capability
    return dict(
        type=device.type,
        name="Apple M-series GPU" if device.type == "mps" else "CPU",
        count=1,
        capability=None,
        total_memory_bytes=None,
    )
'''

EX1_ACCELERATOR = '''\
import platform


def _loai_accelerator():
    """Loại accelerator của máy ("cuda", "mps", ...) hoặc None. torch >= 2.6 có torch.accelerator."""
    acc = getattr(torch, "accelerator", None)
    if acc is not None:
        if not acc.is_available():
            return None
        return acc.current_accelerator().type
    if torch.cuda.is_available():
        return "cuda"
    if torch.backends.mps.is_available():
        return "mps"
    return None


def pick_device():
    loai = _loai_accelerator()
    # khóa học chỉ dùng cuda / mps, accelerator khác (xpu...) thì về cpu
    return torch.device(loai if loai in ("cuda", "mps") else "cpu")


def describe_device(device):
    if device.type == "cuda":
        p = torch.cuda.get_device_properties(device)
        return {"type": "cuda", "name": p.name, "count": torch.cuda.device_count(),
                "capability": (p.major, p.minor), "total_memory_bytes": p.total_memory}
    ten = {"mps": "Apple Silicon GPU (MPS)", "cpu": platform.machine() or "CPU"}.get(device.type, device.type)
    return {"type": device.type, "name": ten, "count": 1, "capability": None, "total_memory_bytes": None}
'''

WRONG_PICK_HARDCODED = '''\
def pick_device():
    # Colab đã bật GPU T4 rồi nên cứ trả về cuda cho nhanh
    return torch.device("cuda")
'''

# --- exercise 2 ---------------------------------------------------------------------------

EX2_LESSON = '''\
import time


def time_matmul(n, device, repeats=5):
    a = torch.randn(n, n, device=device)
    b = torch.randn(n, n, device=device)

    # Warm-up — lần matmul đầu tiên tốn extra do cuBLAS load + autotune
    _ = a @ b
    if device.type == "cuda":
        torch.cuda.synchronize()
    elif device.type == "mps":
        torch.mps.synchronize()

    start = time.time()
    for _ in range(repeats):
        _ = a @ b
    if device.type == "cuda":
        torch.cuda.synchronize()   # chờ GPU chạy xong rồi mới bấm giờ
    elif device.type == "mps":
        torch.mps.synchronize()
    return (time.time() - start) / repeats


def speedup(n, device, repeats=3):
    cpu_t = time_matmul(n, torch.device("cpu"), repeats)
    gpu_t = time_matmul(n, device, repeats)
    return cpu_t / gpu_t
'''

SMALL_N_B = '''\
# Câu hỏi: vì sao N = 100 thì GPU thường chậm hơn CPU?
# -> B: overhead launch kernel + copy host <-> device lớn hơn cả lượng tính toán
SMALL_N_ANSWER = "B"
'''

EX2_HELPER = '''\
import time


def dong_bo(device):
    # GPU chạy bất đồng bộ: a @ b chỉ xếp kernel vào hàng đợi -> phải chờ nó chạy xong
    if device.type == "cuda":
        torch.cuda.synchronize()
    elif device.type == "mps":
        torch.mps.synchronize()


def time_matmul(n, device, repeats=5):
    a = torch.randn(n, n, device=device)   # tạo thẳng trên device
    b = torch.randn(n, n, device=device)
    a @ b                                  # warm-up
    dong_bo(device)
    t0 = time.perf_counter()
    for _ in range(repeats):
        c = a @ b
    dong_bo(device)
    t1 = time.perf_counter()
    return (t1 - t0) / repeats             # trung bình MỘT lần nhân, đơn vị giây


def speedup(n, device, repeats=3):
    t_cpu = time_matmul(n, torch.device("cpu"), repeats)
    t_dev = time_matmul(n, device, repeats)
    return t_cpu / t_dev
'''

EX2_TIMER = '''\
from torch.utils import benchmark


def _cho_device(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elif device.type == "mps":
        torch.mps.synchronize()


def time_matmul(n, device, repeats=5):
    # torch.utils.benchmark.Timer lo warm-up / synchronize / lặp, như bài gợi ý
    a = torch.randn(n, n, device=device)
    b = torch.randn(n, n, device=device)
    torch.mm(a, b)   # warm-up
    _cho_device(device)
    timer = benchmark.Timer(stmt="a @ b", globals={"a": a, "b": b},
                            num_threads=torch.get_num_threads())
    return float(timer.timeit(repeats).mean)


def speedup(n, device, repeats=3):
    return time_matmul(n, torch.device("cpu"), repeats) / time_matmul(n, device, repeats)


SMALL_N_ANSWER = "b"  # overhead kernel launch + copy
'''

EX2_TYPED = '''\
import time


def _sync(device: torch.device) -> None:
    # cuda / mps chạy bất đồng bộ, cpu thì không cần
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elif device.type == "mps":
        torch.mps.synchronize()


def time_matmul(n: int, device: torch.device, repeats: int = 5) -> float:
    a = torch.randn(n, n, device=device, dtype=torch.float32)
    b = torch.randn(n, n, device=device, dtype=torch.float32)
    torch.matmul(a, b)          # warm-up
    _sync(device)
    t0 = time.perf_counter()
    for _ in range(repeats):
        torch.matmul(a, b)
    _sync(device)
    return (time.perf_counter() - t0) / repeats


def speedup(n: int, device: torch.device, repeats: int = 3) -> float:
    cpu = time_matmul(n, torch.device("cpu"), repeats)
    dev = time_matmul(n, device, repeats)
    return cpu / dev


SMALL_N_ANSWER = "B"
'''

# --- exercise 3 ---------------------------------------------------------------------------

EX3_LESSON = '''\
def roundtrip(x, device):
    x_gpu = x.to(device)       # .to() không in-place — phải gán lại
    x_gpu = x_gpu * 2 + 1      # phép tính chạy trên device
    x_back = x_gpu.cpu()       # quay về CPU
    return x_back.to(x.dtype)


def to_numpy(t):
    # NumPy chỉ sống trên CPU, và tensor có grad thì phải detach trước
    return t.detach().cpu().numpy()
'''

ROUNDTRIP_CHAIN = '''\
def roundtrip(x, device):
    y = x.to(device)              # tensor MỚI trên device, x giữ nguyên
    y = y * 2 + 1                 # tính ngay trên device
    return y.to("cpu", dtype=x.dtype)
'''

TO_NUMPY_PLAIN = '''\
def to_numpy(t):
    return t.detach().cpu().numpy()   # detach (bỏ grad) -> cpu -> numpy
'''

EX3_MODERN = '''\
import numpy as np


def roundtrip(x: torch.Tensor, device: torch.device) -> torch.Tensor:
    tren_device = torch.as_tensor(x, device=device)   # copy sang device (x không đổi)
    return (tren_device * 2 + 1).to(device="cpu", dtype=x.dtype)


def to_numpy(t: torch.Tensor) -> np.ndarray:
    # force=True: tự detach + copy về CPU nếu cần (torch >= 1.13)
    return t.numpy(force=True)
'''

WRONG_ROUNDTRIP_NOT_ASSIGNED = '''\
def roundtrip(x, device):
    x.to(device)              # chuyển sang GPU
    y = x * 2 + 1
    return y.cpu().to(x.dtype)
'''

# --- exercise 4 ---------------------------------------------------------------------------

EX4_LESSON = '''\
def fill_until_oom(device, chunk_mb=64):
    numel = chunk_mb * 1024 * 1024 // 4    # float32 = 4 byte
    tensors = []
    try:
        while True:
            tensors.append(torch.zeros(numel, device=device))
    except torch.cuda.OutOfMemoryError:
        if device.type == "cuda":
            allocated = torch.cuda.memory_allocated()
        else:
            allocated = sum(t.numel() * t.element_size() for t in tensors)
        print(f"Allocated trước lúc lỗi: {allocated / 1e9:.2f} GB")
    count = len(tensors)
    del tensors                            # bỏ reference TRƯỚC
    if device.type == "cuda":
        torch.cuda.empty_cache()           # rồi mới trả cache
    elif device.type == "mps":
        torch.mps.empty_cache()
    return count


def train_step_with_backoff(model, inputs, targets, loss_fn, optimizer):
    batch_size = inputs.size(0)
    micro = batch_size
    while True:
        try:
            optimizer.zero_grad()
            total_loss = 0.0
            for i in range(0, batch_size, micro):
                x = inputs[i : i + micro]
                y = targets[i : i + micro]
                # chia theo tỉ lệ để tổng gradient = gradient của cả batch
                loss = loss_fn(model(x), y) * x.size(0) / batch_size
                loss.backward()
                total_loss += loss.item()
            optimizer.step()
            return total_loss, micro
        except torch.cuda.OutOfMemoryError:
            loss = None
            optimizer.zero_grad()
            if inputs.device.type == "cuda":
                torch.cuda.empty_cache()
            micro = micro // 2             # giảm một nửa rồi thử lại
            if micro == 0:
                raise
'''

EX4_HELPERS = '''\
# torch >= 2.5 có torch.OutOfMemoryError, bản cũ chỉ có torch.cuda.OutOfMemoryError (cùng một lớp)
OOMError = getattr(torch, "OutOfMemoryError", torch.cuda.OutOfMemoryError)


def _bo_nho(device, chunks):
    if device.type == "cuda":
        return torch.cuda.memory_allocated(device)
    if device.type == "mps":
        return torch.mps.current_allocated_memory()
    return sum(c.nbytes for c in chunks)   # CPU không có caching allocator: tự đếm


def _don_cache(device):
    if device.type == "cuda":
        torch.cuda.empty_cache()
    elif device.type == "mps":
        torch.mps.empty_cache()


def fill_until_oom(device, chunk_mb=64):
    n = chunk_mb * 1024 * 1024 // 4
    chunks = []
    while True:
        try:
            chunks.append(torch.empty(n, dtype=torch.float32, device=device))
        except OOMError:
            break
    so_khoi = len(chunks)
    print(f"OOM sau {so_khoi} khối: đang cấp phát {_bo_nho(device, chunks) / 2**20:.1f} MiB")
    chunks.clear()       # bỏ hết reference
    del chunks
    _don_cache(device)   # giờ empty_cache mới trả được bộ nhớ
    return so_khoi
'''

BACKOFF_HELPERS = '''\
def _tich_luy_grad(model, inputs, targets, loss_fn, micro):
    """forward + backward từng micro-batch, trả loss trung bình của cả batch."""
    tong = 0.0
    for xb, yb in zip(inputs.split(micro), targets.split(micro)):
        loss = loss_fn(model(xb), yb) * (len(xb) / len(inputs))
        loss.backward()
        tong += loss.item()
    return tong


def train_step_with_backoff(model, inputs, targets, loss_fn, optimizer):
    micro = len(inputs)            # thử cả batch trước
    while True:
        optimizer.zero_grad(set_to_none=True)
        try:
            loss_tb = _tich_luy_grad(model, inputs, targets, loss_fn, micro)
            break
        except OOMError:
            if micro == 1:
                raise
        # dọn ở NGOÀI except: trong except traceback còn giữ activation của lần hỏng
        optimizer.zero_grad(set_to_none=True)
        _don_cache(inputs.device)
        micro //= 2
    optimizer.step()               # đúng 1 lần
    return loss_tb, micro
'''

EX4_MODERN = '''\
def _allocated(device, held):
    if device.type == "cpu":
        return sum(t.nbytes for t in held)
    if device.type == "mps":
        return torch.mps.current_allocated_memory()
    return torch.cuda.memory_allocated(device)


def _empty(device):
    if device.type != "cpu":
        torch.get_device_module(device).empty_cache()


def fill_until_oom(device, chunk_mb=64):
    numel = chunk_mb * 2**20 // torch.float32.itemsize
    held = []
    try:
        while True:
            held.append(torch.empty(numel, dtype=torch.float32, device=device))
    except torch.OutOfMemoryError:
        print(f"out of memory: {_allocated(device, held)} bytes allocated")
    count = len(held)
    held.clear()
    _empty(device)
    return count


def train_step_with_backoff(model, inputs, targets, loss_fn, optimizer):
    batch = inputs.shape[0]
    micro = batch
    while True:
        optimizer.zero_grad(set_to_none=True)
        chunk_losses = []
        try:
            for xb, yb in zip(inputs.split(micro), targets.split(micro)):
                loss = loss_fn(model(xb), yb) * (xb.shape[0] / batch)
                loss.backward()
                chunk_losses.append(loss.detach())
        except torch.OutOfMemoryError:
            if micro == 1:
                raise
        else:
            optimizer.step()
            return torch.stack(chunk_losses).sum().item(), micro
        # ra khỏi except rồi thì traceback (và activation nó giữ) đã được giải phóng
        loss = None
        chunk_losses.clear()
        optimizer.zero_grad(set_to_none=True)
        _empty(inputs.device)
        micro //= 2
'''

# --- exercise 5 ---------------------------------------------------------------------------

EX5_LESSON = '''\
from torch.amp import autocast, GradScaler


def train_steps(model, inputs, targets, device, steps=20, amp_dtype=None, lr=1e-3):
    model = model.to(device)
    inputs = inputs.to(device)       # nhớ gán lại!
    targets = targets.to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    loss_fn = nn.CrossEntropyLoss()
    # FP16 cần GradScaler, BF16 thì không
    scaler = GradScaler(device.type) if amp_dtype == torch.float16 else None

    losses = []
    for _ in range(steps):
        optimizer.zero_grad()
        if amp_dtype is None:
            out = model(inputs)
            loss = loss_fn(out, targets)
            loss.backward()
            optimizer.step()
        else:
            with autocast(device_type=device.type, dtype=amp_dtype):
                out = model(inputs)
                loss = loss_fn(out, targets)
            if scaler is not None:
                scaler.scale(loss).backward()
                scaler.step(optimizer)
                scaler.update()
            else:
                loss.backward()
                optimizer.step()
        losses.append(loss.item())
    return losses
'''

EX5_ENABLED = '''\
def train_steps(model, inputs, targets, device, steps=20, amp_dtype=None, lr=1e-3):
    model.to(device)                 # model.to() là in-place
    inputs = inputs.to(device)       # tensor.to() thì không
    targets = targets.to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    loss_fn = nn.CrossEntropyLoss()
    dung_scaler = amp_dtype == torch.float16
    scaler = torch.amp.GradScaler(device.type, enabled=dung_scaler)
    losses = []
    for _ in range(steps):
        optimizer.zero_grad(set_to_none=True)
        with torch.amp.autocast(device_type=device.type, dtype=amp_dtype or torch.float32,
                                enabled=amp_dtype is not None):
            loss = loss_fn(model(inputs), targets)
        if dung_scaler:
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
        else:
            loss.backward()
            optimizer.step()
        losses.append(loss.item())
    return losses
'''

EX5_MODERN = '''\
import contextlib


def _autocast_ctx(device, amp_dtype):
    if amp_dtype is None:
        return contextlib.nullcontext()
    return torch.amp.autocast(device.type, dtype=amp_dtype)


def train_steps(model, inputs, targets, device, steps=20, amp_dtype=None, lr=1e-3):
    model = model.to(device)
    inputs, targets = inputs.to(device), targets.to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    loss_fn = nn.CrossEntropyLoss()
    scaler = torch.amp.GradScaler(device.type) if amp_dtype == torch.float16 else None
    losses = []
    for _ in range(steps):
        optimizer.zero_grad(set_to_none=True)
        with _autocast_ctx(device, amp_dtype):
            loss = loss_fn(model(inputs), targets)
        if scaler is None:
            loss.backward()
            optimizer.step()
        else:
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
        losses.append(loss.item())
    return losses
'''

WRONG_EX5_NO_SCALER = '''\
from torch.amp import autocast


def train_steps(model, inputs, targets, device, steps=20, amp_dtype=None, lr=1e-3):
    model = model.to(device)
    inputs = inputs.to(device)
    targets = targets.to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    loss_fn = nn.CrossEntropyLoss()

    losses = []
    for _ in range(steps):
        optimizer.zero_grad()
        # autocast là đủ rồi, FP16 hay BF16 đều giống nhau
        with autocast(device_type=device.type, dtype=amp_dtype or torch.float32,
                      enabled=amp_dtype is not None):
            out = model(inputs)
            loss = loss_fn(out, targets)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses
'''

# --- the course's stubs (exercises/*.py, docstrings shortened) -----------------------------

STUB_EX1 = [
    '''\
def pick_device() -> torch.device:
    """Chọn device để chạy code.

    Trả về `torch.device("cuda")` nếu `torch.cuda.is_available()`; nếu không thì
    `torch.device("mps")` nếu `torch.backends.mps.is_available()`; còn lại
    `torch.device("cpu")`. Phải trả về một đối tượng `torch.device`, không phải str.

    Pick the device to run on: cuda, else mps, else cpu, as a `torch.device`.
    """
    raise NotImplementedError''',
    '''\
def describe_device(device: torch.device) -> dict:
    """Mô tả `device` bằng một dict có đúng 5 khóa: type, name, count, capability,
    total_memory_bytes.

    Describe `device` as a dict with exactly these five keys.
    """
    raise NotImplementedError''',
]

STUB_EX2 = [
    '''\
def time_matmul(n: int, device: torch.device, repeats: int = 5) -> float:
    """Thời gian trung bình (giây) của MỘT phép nhân ma trận n×n @ n×n kiểu float32.

    Mean time in seconds of ONE n×n @ n×n float32 matrix multiplication.
    """
    raise NotImplementedError''',
    '''\
def speedup(n: int, device: torch.device, repeats: int = 3) -> float:
    """Device nhanh hơn CPU bao nhiêu lần với ma trận n×n.

    How many times faster `device` is than the CPU for n×n matrices.
    """
    raise NotImplementedError''',
    '''\
# Câu hỏi: Vì sao với N = 100, GPU thường chậm hơn CPU?
#   A) mỗi core GPU chậm hơn một core CPU
#   B) overhead khởi chạy kernel (kernel launch) và truyền dữ liệu host↔device lấn át
#      khối lượng tính toán quá nhỏ như vậy
#   C) PyTorch không dùng cuBLAS cho ma trận nhỏ
#   D) GIL của Python chặn GPU
# Điền MỘT chữ cái: "A", "B", "C" hoặc "D".  Put ONE letter: "A", "B", "C" or "D".
SMALL_N_ANSWER = ""''',
]

STUB_EX3 = [
    '''\
def roundtrip(x: torch.Tensor, device: torch.device) -> torch.Tensor:
    """Chuyển `x` sang `device`, tính `x * 2 + 1` NGAY TRÊN đó, trả kết quả về CPU.

    Move `x` to `device`, compute `x * 2 + 1` THERE, return the result on the CPU.
    """
    raise NotImplementedError''',
    '''\
def to_numpy(t: torch.Tensor) -> np.ndarray:
    """Đổi tensor `t` sang `numpy.ndarray` cùng giá trị (mọi device, kể cả cần grad).

    Convert tensor `t` to a `numpy.ndarray` with the same values.
    """
    raise NotImplementedError''',
]

STUB_EX4 = [
    '''\
def fill_until_oom(device: torch.device, chunk_mb: int = 64) -> int:
    """Cấp phát liên tục các khối float32 `chunk_mb` MiB trên `device` cho tới khi OOM.

    Keep allocating `chunk_mb`-MiB float32 tensors on `device` until memory runs out.
    """
    raise NotImplementedError''',
    '''\
def train_step_with_backoff(
    model: nn.Module,
    inputs: torch.Tensor,
    targets: torch.Tensor,
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    optimizer: torch.optim.Optimizer,
) -> tuple[float, int]:
    """Một bước optimizer trên CẢ batch, tự giảm micro-batch khi hết bộ nhớ.

    One optimizer step over the WHOLE batch, shrinking the micro-batch on OOM.
    """
    raise NotImplementedError''',
]

STUB_EX5 = [
    '''\
def train_steps(
    model: nn.Module,
    inputs: torch.Tensor,
    targets: torch.Tensor,
    device: torch.device,
    steps: int = 20,
    amp_dtype: torch.dtype | None = None,
    lr: float = 1e-3,
) -> list[float]:
    """Train `model` `steps` bước trên cả batch, trả về loss của từng bước.

    Train `model` for `steps` steps on the whole batch; return each step's loss.
    """
    raise NotImplementedError''',
]

# --- the lesson's code cells --------------------------------------------------------------

LESSON_CHECK_GPU = '''\
import torch

print(torch.__version__)              # vd: 2.4.0+cu121
print(torch.cuda.is_available())      # True nếu có GPU NVIDIA + CUDA driver
print(torch.cuda.device_count())      # số GPU thấy được
if torch.cuda.is_available():
    print(torch.cuda.get_device_name(0))         # vd: NVIDIA GeForce RTX 4090
    print(torch.cuda.get_device_capability(0))   # vd: (8, 9) — compute capability
    print(torch.cuda.get_device_properties(0))   # name, total_memory, multi_processor_count, ...'''

LESSON_MPS = '''\
print(torch.backends.mps.is_available())  # True trên M1/M2/M3/M4 với macOS 12.3+
print(torch.backends.mps.is_built())      # True nếu PyTorch build có MPS'''

LESSON_DEVICE_ATTR = '''\
x = torch.tensor([1.0, 2.0, 3.0])
print(x.device)            # cpu

y = x.to("cuda")
print(y.device)            # cuda:0'''

LESSON_AGNOSTIC = '''\
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
print("Using device:", device)'''

LESSON_THREE_WAYS = '''\
x = torch.randn(3, 4)        # CPU tensor

# 1) .to(device) — recommended, flexible (CPU/CUDA/MPS đều dùng được)
x_gpu = x.to(device)

# 2) .cuda() — shortcut, CHỈ work với CUDA
x_cuda = x.cuda()            # tương đương x.to("cuda")

# 3) .cpu() — quay về CPU
x_back = x_gpu.cpu()
print(x_gpu.device, x_cuda.device, x_back.device)'''

LESSON_FACTORIES = '''\
x = torch.zeros(3, 4, device="cuda")
y = torch.randn(3, 4, device=device)
z = torch.arange(10, device=device)
print(x.device, y.device, z.device)'''

LESSON_NUMPY_ERROR = '''\
x = torch.randn(3, 4, device="cuda")

x.numpy()                # TypeError: can't convert cuda:0 device type tensor to numpy'''

LESSON_FROM_NUMPY = '''\
import numpy as np
arr = np.array([1.0, 2.0, 3.0])
t   = torch.from_numpy(arr).to(device)
t'''

LESSON_AMP = '''\
from torch.amp import autocast, GradScaler

scaler = GradScaler("cuda")     # PyTorch 2.0+ API

for inputs, targets in dataloader:
    inputs  = inputs.to(device)
    targets = targets.to(device)
    optimizer.zero_grad()

    # autocast: ops chạy FP16/BF16 khi an toàn, FP32 cho ops cần precision
    with autocast(device_type="cuda", dtype=torch.float16):
        out  = model(inputs)
        loss = loss_fn(out, targets)

    # GradScaler: scale loss để gradient FP16 không bị underflow
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()'''

LESSON_ACCUM = '''\
accum_steps = 4
optimizer.zero_grad()
for i, (x, y) in enumerate(loader):
    x, y = x.to(device), y.to(device)
    loss = loss_fn(model(x), y) / accum_steps
    loss.backward()
    if (i + 1) % accum_steps == 0:
        optimizer.step()
        optimizer.zero_grad()'''

LESSON_SPEED_10000 = '''\
import time
import torch

N = 10000
a = torch.randn(N, N)
b = torch.randn(N, N)

# CPU
start = time.time()
c = a @ b
print("CPU:", time.time() - start, "s")

# GPU
a = a.cuda()
b = b.cuda()

# Warm-up — lần matmul đầu tiên tốn extra do cuBLAS load + autotune
_ = a @ b
torch.cuda.synchronize()

start = time.time()
c = a @ b
torch.cuda.synchronize()
print("GPU:", time.time() - start, "s")'''

LESSON_OOM_LOOP = '''\
tensors = []
while True:
    tensors.append(torch.randn(10000, 10000, device="cuda"))
    print(f"{len(tensors)} tensor, allocated = {torch.cuda.memory_allocated() / 1e9:.2f} GB")'''

LESSON_OOM_TRY = '''\
# Bài tập 4: tự gây OOM rồi dọn
tensors = []
try:
    while True:
        tensors.append(torch.randn(10000, 10000, device="cuda"))
except torch.cuda.OutOfMemoryError:
    print(f"Allocated trước lúc lỗi: {torch.cuda.memory_allocated() / 1e9:.2f} GB")
print(len(tensors), "tensor 10000x10000")
del tensors
torch.cuda.empty_cache()
print(f"Sau khi dọn: {torch.cuda.memory_allocated() / 1e9:.2f} GB")'''

LESSON_FULL_EXAMPLE = '''\
import time
import torch
import torch.nn as nn

# 1) Chọn device
if torch.cuda.is_available():
    device = torch.device("cuda")
elif torch.backends.mps.is_available():
    device = torch.device("mps")
else:
    device = torch.device("cpu")
print("Using device:", device)

# 2) Tạo tensor trực tiếp trên device
x = torch.randn(1024, 784, device=device)
y = torch.randint(0, 10, (1024,), device=device)

# 3) Model trên device
class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(784, 256), nn.ReLU(),
            nn.Linear(256, 10),
        )
    def forward(self, x):
        return self.net(x)

model = MLP().to(device)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
loss_fn   = nn.CrossEntropyLoss()

# 4) Một bước train ngắn
out  = model(x)
loss = loss_fn(out, y)
loss.backward()
optimizer.step()
print("Loss:", loss.item())

# 5) Speed test matmul (chỉ chạy nếu CUDA)
if device.type == "cuda":
    N = 5000
    a = torch.randn(N, N, device=device)
    b = torch.randn(N, N, device=device)

    # warm-up
    _ = a @ b
    torch.cuda.synchronize()

    start = time.time()
    for _ in range(5):
        _ = a @ b
    torch.cuda.synchronize()
    gpu_t = (time.time() - start) / 5
    print(f"GPU matmul {N}x{N}: {gpu_t*1000:.2f} ms")

    a_cpu, b_cpu = a.cpu(), b.cpu()
    start = time.time()
    _ = a_cpu @ b_cpu
    cpu_t = time.time() - start
    print(f"CPU matmul {N}x{N}: {cpu_t*1000:.2f} ms")
    print(f"Speedup: {cpu_t / gpu_t:.1f}x")

# 6) Memory snapshot (chỉ CUDA)
if device.type == "cuda":
    print(f"Allocated: {torch.cuda.memory_allocated()/1e9:.2f} GB")
    print(f"Reserved : {torch.cuda.memory_reserved()/1e9:.2f} GB")

# 7) Demo OOM-safe pattern: try/except, dọn rồi giảm batch
def train_step(batch):
    try:
        out  = model(batch.to(device))
        loss = loss_fn(out, torch.zeros(batch.size(0), dtype=torch.long, device=device))
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        return loss.item()
    except torch.cuda.OutOfMemoryError:
        optimizer.zero_grad()
        torch.cuda.empty_cache()
        raise   # caller giảm batch và retry'''

KAGGLE_FIRST_CELL = '''\
# This Python 3 environment comes with many helpful analytics libraries installed
# It is defined by the kaggle/python Docker image: https://github.com/kaggle/docker-python
# For example, here's several helpful packages to load

import numpy as np # linear algebra
import pandas as pd # data processing, CSV file I/O (e.g. pd.read_csv)

# Input data files are available in the read-only "../input/" directory
# For example, running this (by clicking run or pressing Shift+Enter) will list all files under the input directory

import os
for dirname, _, filenames in os.walk('/kaggle/input'):
    for filename in filenames:
        print(os.path.join(dirname, filename))

# You can write up to 20GB to the current directory (/kaggle/working/) that gets preserved as output when you create a version using "Save & Run All" 
# You can also write temporary files to /kaggle/temp/, but they won't be saved outside of the current session'''

INSTALL_GRADER = '''\
# Cài grader; giữ nguyên torch có sẵn (đừng thêm -U).
# Installs the grader; keeps the preinstalled torch (do not add -U).
%pip install -q "git+https://github.com/COURSE-ORG/lesson14-gpu-cuda.git"'''
