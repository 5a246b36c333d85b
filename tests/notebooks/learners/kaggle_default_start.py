# %%
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
# You can also write temporary files to /kaggle/temp/, but they won't be saved outside of the current session

import torch
import torch.nn as nn
import time

# %%
!nvidia-smi

# %% [markdown]
# # Bài 14: GPU và CUDA — chuyển tensor giữa CPU / GPU
#
# Kaggle: *Settings → Accelerator → GPU T4 x2*.

# %%
for i in range(torch.cuda.device_count()):
    print(i, torch.cuda.get_device_name(i), torch.cuda.get_device_capability(i))

# %%
%matplotlib inline
import matplotlib.pyplot as plt

# %% [markdown]
# ## Bài 1 — chọn device

# %%
def pick_device():
    # viết gọn 1 dòng: cuda > mps > cpu, trả về torch.device chứ không phải str
    ten = "cuda" if torch.cuda.is_available() else ("mps" if torch.backends.mps.is_available() else "cpu")
    return torch.device(ten)


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

# %%
device = pick_device()
describe_device(device)

# %% [markdown]
# ## Bài 2 — speed test

# %%
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


# Câu hỏi: vì sao N = 100 thì GPU thường chậm hơn CPU?
# -> B: overhead launch kernel + copy host <-> device lớn hơn cả lượng tính toán
SMALL_N_ANSWER = "B"

# %%
ns = [128, 256, 512, 1024]
sp = [speedup(n, device) for n in ns]
for n, s in zip(ns, sp):
    print(f"{n:5d} -> {s:6.2f}x")

# %%
plt.plot(ns, sp, "o-")
plt.xlabel("N")
plt.ylabel("CPU / GPU")
plt.title("Speedup trên T4")
plt.show()

# %% [markdown]
# ## Bài 3 — roundtrip

# %%
def roundtrip(x, device):
    y = x.to(device)              # tensor MỚI trên device, x giữ nguyên
    y = y * 2 + 1                 # tính ngay trên device
    return y.to("cpu", dtype=x.dtype)


def to_numpy(t):
    return t.detach().cpu().numpy()   # detach (bỏ grad) -> cpu -> numpy

# %%
x = torch.arange(10, device="cpu")
print(roundtrip(x, device), x)

# %% [markdown]
# ## Bài 4 — OOM
#
# Vòng lặp trong bài (trên GPU 0):

# %%
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
print(f"Sau khi dọn: {torch.cuda.memory_allocated() / 1e9:.2f} GB")

# %%
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

# %%
if torch.cuda.is_available():
    # dùng GPU thứ hai cho khỏi đụng model ở GPU 0
    print(fill_until_oom(torch.device("cuda:1")))

# %% [markdown]
# ## Bài 5 — autocast + GradScaler

# %%
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

# %%
x = torch.randn(512, 20)
y = torch.randint(0, 3, (512,))
for dt in (None, torch.float16):
    print(dt, train_steps(nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 3)), x, y, device, steps=4, amp_dtype=dt))
