"""Regenerate the catalog of realistic learner notebooks: `python tests/notebooks/make_catalog.py`.

Writes, next to this file, ten notebooks saved the way Google Colab, Kaggle (editor download
and "Save Version" output) and a learner's own JupyterLab save them, three `.py` exports of
three of them (nbconvert `--to script`, VS Code's `# %%` export, Colab's "Download .py"), and
catalog.py, which says for each file which exercises must lose points and which cells the
grader must stop (and why) on a CPU-only grading machine.

The saved outputs are those of the learner's own session (a T4 on Colab / Kaggle, a laptop for
the local notebook): the cuda demos succeeded there, the deliberate errors show tracebacks.
Needs nbformat and nbconvert (both in the project's test extras); run with the project's venv.
"""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

# ruff: noqa: E402
import _snippets as S
from _nbkit import (
    Notebook,
    colab_py,
    display,
    err,
    exit_err,
    figure,
    percent_py,
    result,
    stderr,
    stdout,
    syntax_err,
    write_notebook,
)

# --- saved outputs that several notebooks share ------------------------------------------

PIP_GRADER = (
    "  Installing build dependencies ... \x1b[?25l\x1b[?25hdone\n"
    "  Getting requirements to build wheel ... \x1b[?25l\x1b[?25hdone\n"
    "  Preparing metadata (pyproject.toml) ... \x1b[?25l\x1b[?25hdone\n"
    "  Building wheel for pytorch-gpu-lesson-grader (pyproject.toml) ... \x1b[?25l\x1b[?25hdone\n"
)

T4_PROPS = ("_CudaDeviceProperties(name='Tesla T4', major=7, minor=5, total_memory=15095MB, "
            "multi_processor_count=40, uuid=3c9f1a8e-77d2-5b1e-0c4a-9e2b7f3d6a15, L2_cache_size=4MB)")
T4_DICT = ("{'type': 'cuda', 'name': 'Tesla T4', 'count': 1, 'capability': (7, 5), "
           "'total_memory_bytes': 15828320256}")
T4X2_DICT = T4_DICT.replace("'count': 1", "'count': 2")

NUMPY_TYPEERROR = ("can't convert cuda:0 device type tensor to numpy. Use Tensor.cpu() to copy the tensor "
                   "to host memory first.")
OOM_MESSAGE = ("CUDA out of memory. Tried to allocate 382.00 MiB. GPU 0 has a total capacity of 14.74 GiB "
               "of which 238.06 MiB is free. Process 4127 has 14.50 GiB memory in use. Of the allocated "
               "memory 14.16 GiB is allocated by PyTorch, and 214.00 KiB is reserved by PyTorch but "
               "unallocated. If reserved but unallocated memory is large try setting "
               "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation "
               "for Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)")
NO_CUDA_FRAMES = (
    ("~/miniconda3/envs/dl/lib/python3.11/site-packages/torch/cuda/__init__.py", 493, "get_device_name",
     "return get_device_properties(device).name"),
    ("~/miniconda3/envs/dl/lib/python3.11/site-packages/torch/cuda/__init__.py", 310, "_lazy_init",
     'raise AssertionError("Torch not compiled with CUDA enabled")'),
)
SYSTEM_EXIT_WARNING = ("/usr/local/lib/python3.11/dist-packages/IPython/core/interactiveshell.py:3561: "
                       "UserWarning: To exit: use 'exit', 'quit', or Ctrl-D.\n"
                       "  warn(\"To exit: use 'exit', 'quit', or Ctrl-D.\", stacklevel=1)\n")


def nvidia_smi(gpus: int, when: str, used: str = "0MiB") -> str:
    rows = ""
    for i in range(gpus):
        rows += (f"|   {i}  Tesla T4                       Off |   00000000:00:0{4 + i}.0 Off |"
                 "                    0 |\n"
                 f"| N/A   {41 + 3 * i}C    P8              9W /   70W |  {used:>7} /  15360MiB |"
                 "      0%      Default |\n"
                 "|                                         |                        |                  N/A |\n")
    rule = "+-----------------------------------------+------------------------+----------------------+\n"
    return (
        f"{when}       \n"
        "+-----------------------------------------------------------------------------------------+\n"
        "| NVIDIA-SMI 550.54.15              Driver Version: 550.54.15      CUDA Version: 12.4     |\n"
        "|-----------------------------------------+------------------------+----------------------+\n"
        "| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |\n"
        "| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |\n"
        "|                                         |                        |               MIG M. |\n"
        "|=========================================+========================+======================|\n"
        + rows + rule +
        "                                                                                         \n"
        "+-----------------------------------------------------------------------------------------+\n"
        "| Processes:                                                                              |\n"
        "|  GPU   GI   CI        PID   Type   Process name                              GPU Memory |\n"
        "|        ID   ID                                                               Usage      |\n"
        "|=========================================================================================|\n"
        "|  No running processes found                                                             |\n"
        "+-----------------------------------------------------------------------------------------+\n"
    )


def check_table(rows: list[tuple[str, str, float, float]]) -> list:
    """What grader.check() showed in the learner's notebook: an HTML table, then Out[n]."""
    body = "".join(f"<tr><td>{ex}</td><td>{status}</td><td>{got:g} / {top:g}</td></tr>"
                   for ex, status, got, top in rows)
    got, top = sum(r[2] for r in rows), sum(r[3] for r in rows)
    html = (f"<div><b>Tự kiểm tra (check công khai)</b><table><tr><th>Bài</th><th>Trạng thái</th>"
            f"<th>Điểm</th></tr>{body}</table><p>Tổng: {got:g} / {top:g}</p></div>")
    return [display("<IPython.core.display.HTML object>", html), result(f"<grader.check: {got:g} / {top:g}>")]


ALL_PASSED = [("ex1", "✓ passed", 20, 20), ("ex2", "✓ passed", 20, 20), ("ex3", "✓ passed", 20, 20),
              ("ex4", "✓ passed", 20, 20), ("ex5", "✓ passed", 20, 20)]

MLP_TINY = "nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 3))"


# --- 1. Colab: the lesson, cell by cell ----------------------------------------------------


def colab_lesson_demos() -> Notebook:
    nb = Notebook("colab", "colab_lesson_demos.ipynb", title="Bai14_GPU_CUDA.ipynb", seed=101,
                  what="Colab T4: the lesson's cells pasted in order (GPU checks, cuda demos, the numpy "
                       "TypeError, Ví dụ tổng hợp, AMP/accumulation snippets, the OOM loop), then ex1-ex5 in "
                       "the lesson's style and grader.check()")
    nb.md("# Bài 14: GPU và CUDA — chuyển tensor giữa CPU / GPU\n\n**Họ tên:** Nguyễn Thị Mai — **Lớp:** DL-K12\n\n"
          "Runtime → Change runtime type → **T4 GPU**.")
    nb.code(S.INSTALL_GRADER, 1, stdout(PIP_GRADER))
    nb.code("!nvidia-smi", 2, stdout(nvidia_smi(1, "Sat Mar  8 09:14:02 2025")))
    nb.md("## 1. Kiểm tra GPU")
    nb.code(S.LESSON_CHECK_GPU, 3, stdout(f"2.6.0+cu124\nTrue\n1\nTesla T4\n(7, 5)\n{T4_PROPS}\n"))
    nb.md("**Bài tập 1 trong bài:** in `torch.cuda.get_device_name(0)` và `torch.cuda.get_device_properties(0)`.")
    nb.code("print(torch.cuda.get_device_name(0))", 4, stdout("Tesla T4\n"), stop="no_gpu")
    nb.code("torch.cuda.get_device_properties(0)", 5, result(T4_PROPS), stop="no_gpu")
    nb.code(S.LESSON_MPS, 6, stdout("False\nFalse\n"))
    nb.md("## 2. `torch.device` và thuộc tính `.device`\n\n"
          "`\"cuda\"` luôn map về `cuda:0` trừ khi set `CUDA_VISIBLE_DEVICES`.")
    nb.code(S.LESSON_DEVICE_ATTR, 7, stdout("cpu\ncuda:0\n"), stop="no_gpu")
    nb.code(S.LESSON_AGNOSTIC, 8, stdout("Using device: cuda\n"))
    nb.md("## 3. Ba cách chuyển tensor\n\n`tensor.to()` **không in-place** — phải gán lại!")
    nb.code(S.LESSON_THREE_WAYS, 9, stdout("cuda:0 cuda:0 cpu\n"), stop="no_gpu")
    nb.code(S.LESSON_FACTORIES, 10, stdout("cuda:0 cuda:0 cuda:0\n"), stop="no_gpu")
    nb.md("## 4. NumPy chỉ ở CPU\n\nThử đúng ví dụ lỗi trong bài:")
    nb.code(S.LESSON_NUMPY_ERROR, 11, err("TypeError", NUMPY_TYPEERROR, 3), stop="no_gpu")
    nb.code("x.cpu().numpy()          # OK — copy về CPU trước", 12,
            result("array([[ 0.4136, -1.2059,  0.6311,  0.1902],\n       [-0.7315,  1.5524, -0.0473,  0.8861],\n"
                   "       [ 1.0935, -0.3308, -1.8112,  0.2455]], dtype=float32)"))
    nb.code(S.LESSON_FROM_NUMPY, 13, result("tensor([1., 2., 3.], device='cuda:0', dtype=torch.float64)"))
    nb.md("## 5. Ví dụ tổng hợp")
    nb.code(S.LESSON_FULL_EXAMPLE, 14,
            stdout("Using device: cuda\nLoss: 2.3125569820404053\nGPU matmul 5000x5000: 38.61 ms\n"
                   "CPU matmul 5000x5000: 2871.44 ms\nSpeedup: 74.4x\nAllocated: 0.22 GB\nReserved : 0.33 GB\n"))
    nb.md("## 6. Mixed precision và gradient accumulation (copy từ bài)")
    nb.code(S.LESSON_AMP, 15, err("NameError", "name 'dataloader' is not defined", 5), stop="error")
    nb.code(S.LESSON_ACCUM, 16, err("NameError", "name 'loader' is not defined", 3), stop="error")
    nb.md("# Bài tập\n\nMỗi bài một ô, chạy xong thì test ngay bên dưới.")
    nb.md("### Bài 1 — `pick_device` / `describe_device`")
    nb.code(S.PICK_LESSON + "\n\n" + S.DESCRIBE_LESSON, 17)
    nb.code("device = pick_device()\nprint(device)\ndescribe_device(device)", 18, stdout("cuda\n"), result(T4_DICT))
    nb.md("### Bài 2 — speed test CPU vs GPU")
    nb.code(S.EX2_LESSON + "\n\n" + S.SMALL_N_B, 19)
    nb.code('for n in [100, 500, 1000]:\n    print(f"N = {n:5d}: speedup = {speedup(n, device):.2f}x")', 20,
            stdout("N =   100: speedup = 0.41x\nN =   500: speedup = 7.95x\nN =  1000: speedup = 31.62x\n"))
    nb.md("### Bài 3 — CPU → GPU → CPU")
    nb.code(S.EX3_LESSON, 21)
    nb.code('x = torch.arange(10, device="cpu")\nkq = roundtrip(x, device)\nprint(kq)\n'
            'print(torch.equal(kq, x * 2 + 1))',
            22, stdout("tensor([ 1,  3,  5,  7,  9, 11, 13, 15, 17, 19])\nTrue\n"))
    nb.md("### Bài 4 — Out of Memory\n\nĐầu tiên chạy đúng vòng lặp trong bài:")
    nb.code(S.LESSON_OOM_TRY, 23,
            stdout("Allocated trước lúc lỗi: 14.40 GB\n36 tensor 10000x10000\nSau khi dọn: 0.00 GB\n"), stop="no_gpu")
    nb.code(S.EX4_LESSON, 24)
    nb.code("model = MLP().to(device)\nopt = torch.optim.Adam(model.parameters(), lr=1e-3)\n"
            "xb = torch.randn(64, 784, device=device)\nyb = torch.randint(0, 10, (64,), device=device)\n"
            "print(train_step_with_backoff(model, xb, yb, nn.CrossEntropyLoss(), opt))", 25,
            stdout("(2.3046875, 64)\n"))
    nb.code('if device.type == "cuda":\n    print("Số khối 64 MiB:", fill_until_oom(device))', 26,
            stdout("Allocated trước lúc lỗi: 14.65 GB\nSố khối 64 MiB: 218\n"))
    nb.md("### Bài 5 — mixed precision\n\nSo sánh peak memory FP32 và FP16 (T4 không có BF16).")
    nb.code(S.EX5_LESSON, 27)
    nb.code("xs = torch.randn(256, 784)\nys = torch.randint(0, 10, (256,))\nfor dt in [None, torch.float16]:\n"
            '    if device.type == "cuda":\n        torch.cuda.reset_peak_memory_stats()\n'
            "    losses = train_steps(MLP(), xs, ys, device, steps=5, amp_dtype=dt)\n"
            '    peak = torch.cuda.max_memory_allocated() / 2**20 if device.type == "cuda" else 0.0\n'
            '    print(dt, [round(l, 3) for l in losses], f"peak = {peak:.1f} MiB")', 28,
            stdout("None [2.306, 2.178, 2.061, 1.951, 1.846] peak = 24.9 MiB\n"
                   "torch.float16 [2.307, 2.18, 2.063, 1.953, 1.849] peak = 17.2 MiB\n"))
    nb.md("## Tự kiểm tra")
    nb.code("import grader\n\ngrader.check()", 29, *check_table(ALL_PASSED))
    return nb


# statement-level stops of its Colab .py export: (first line of the top-level statement, kind)
COLAB_PY_STOPS = [
    ("print(torch.cuda.get_device_name(0))", "no_gpu"),
    ("torch.cuda.get_device_properties(0)", "no_gpu"),
    ('y = x.to("cuda")', "no_gpu"),
    ("print(y.device)            # cuda:0", "error"),  # y never got made
    ('x_cuda = x.cuda()            # tương đương x.to("cuda")', "no_gpu"),
    ("print(x_gpu.device, x_cuda.device, x_back.device)", "error"),  # x_cuda never got made
    ('x = torch.zeros(3, 4, device="cuda")', "no_gpu"),
    ('x = torch.randn(3, 4, device="cuda")', "no_gpu"),  # then x.numpy() runs on the old CPU x
    ("for inputs, targets in dataloader:", "error"),
    ("for i, (x, y) in enumerate(loader):", "error"),
    ("try:", "no_gpu"),
]


# --- 2. Colab: a messy session -------------------------------------------------------------


def colab_messy_session() -> Notebook:
    nb = Notebook("colab", "colab_messy_session.ipynb", title="Bài_14_GPU_Khoa.ipynb", seed=202,
                  what="Colab T4, cells run out of order: drive.mount, input(), a call before the definition, "
                       "pick_device hard-coded to cuda then fixed, roundtrip with x.to() unassigned then fixed, "
                       "an unfixed syntax error, matplotlib plot, display()")
    nb.md("# Bài 14 — GPU & CUDA\n\n**Sinh viên:** Lê Minh Khoa\n\n> Nhớ bật GPU trước khi chạy!")
    nb.code("from google.colab import drive\ndrive.mount('/content/drive')", 1, stdout("Mounted at /content/drive\n"))
    nb.code('ho_ten = input("Họ tên: ")\nprint("Xin chào", ho_ten)', 2,
            stdout("Họ tên: Lê Minh Khoa\nXin chào Lê Minh Khoa\n"), stop="input")
    nb.code("import torch\nimport torch.nn as nn\nprint(torch.__version__)", 3, stdout("2.6.0+cu124\n"))
    nb.code("# in thử thông tin GPU\nprint(describe_device(pick_device()))", 22, stdout(T4_DICT + "\n"), stop="error")
    nb.md("## Bài 1")
    nb.code(S.WRONG_PICK_HARDCODED, 5)
    nb.code(S.DESCRIBE_PROPS, 6)
    nb.code("device = pick_device()\ndisplay(describe_device(device))", 7, display(T4_DICT), stop="no_gpu")
    nb.md("Đọc lại đề: phải chạy được cả trên máy **không có GPU** và trên Mac → sửa lại `pick_device`.")
    nb.code(S.PICK_RETURNS + '\n\ndevice = pick_device()\nprint("device =", device)', 9, stdout("device = cuda\n"))
    nb.code("# thử nhanh mấy kích thước\nfor n in [100, 1000]\n    print(n, time_matmul(n, device))", 11,
            syntax_err("expected ':'", 2, 21), stop="syntax_error")
    nb.md("## Bài 2")
    nb.code(S.EX2_HELPER, 12)
    nb.code('SMALL_N_ANSWER = "b"   # overhead launch kernel + copy dữ liệu', 13)
    nb.code('sizes = [100, 200, 500, 1000]\nratios = [speedup(n, device) for n in sizes]\n'
            'for n, r in zip(sizes, ratios):\n'
            '    print(f"N={n:5d}: GPU nhanh hơn {r:6.2f} lần")', 14,
            stdout("N=  100: GPU nhanh hơn   0.52 lần\nN=  200: GPU nhanh hơn   2.87 lần\n"
                   "N=  500: GPU nhanh hơn   9.41 lần\nN= 1000: GPU nhanh hơn  33.08 lần\n"))
    nb.code("import matplotlib.pyplot as plt\n%matplotlib inline", 15, stop="missing_module")
    nb.code('plt.figure(figsize=(6, 4))\nplt.plot(sizes, ratios, marker="o")\nplt.xscale("log")\nplt.xlabel("N")\n'
            'plt.ylabel("speedup (CPU / GPU)")\nplt.title("Speedup matmul trên T4")\nplt.grid(True)\nplt.show()', 16,
            figure("<Figure size 600x400 with 1 Axes>", (0.52, 2.87, 9.41, 33.08)), stop="error")
    nb.md("## Bài 3")
    nb.code(S.WRONG_ROUNDTRIP_NOT_ASSIGNED + "\n\n" + S.TO_NUMPY_PLAIN, 17)
    nb.code("x = torch.arange(10)\nprint(roundtrip(x, device))\nprint(x)", 18,
            stdout("tensor([ 1,  3,  5,  7,  9, 11, 13, 15, 17, 19])\ntensor([0, 1, 2, 3, 4, 5, 6, 7, 8, 9])\n"))
    nb.md("Thầy nhắc: `tensor.to()` **không in-place**, dòng `x.to(device)` ở trên không làm gì cả → "
          "phép tính vẫn chạy trên CPU. Sửa:")
    nb.code(S.ROUNDTRIP_CHAIN, 20)
    nb.code("w = torch.randn(3, requires_grad=True)\ndisplay(to_numpy(w))\n"
            "display(to_numpy(torch.arange(4, device=device)))", 21,
            display("array([ 0.6614,  0.2669,  0.0617], dtype=float32)"), display("array([0, 1, 2, 3])"))
    nb.md("## Bài 4")
    nb.code(S.EX4_HELPERS, 23)
    nb.code(S.BACKOFF_HELPERS, 24)
    nb.code('if device.type == "cuda":   # trên CPU máy sẽ treo!\n    n_chunks = fill_until_oom(device)\n'
            '    print("Số khối:", n_chunks)', 25,
            stdout("OOM sau 221 khối: đang cấp phát 14144.0 MiB\nSố khối: 221\n"))
    nb.md("## Bài 5")
    nb.code(S.EX5_ENABLED, 26)
    nb.code(f"losses = train_steps({MLP_TINY}, torch.randn(128, 20), torch.randint(0, 3, (128,)),\n"
            "                     device, steps=10, amp_dtype=torch.float16)\nprint(losses[:3], losses[-1])", None)
    nb.code('print("Xong bài 14!")', 28, stdout("Xong bài 14!\n"))
    nb.code("", None)
    return nb


# --- 3. Colab: the five course notebooks merged, stubs first -------------------------------


def colab_stub_first() -> Notebook:
    nb = Notebook("colab", "colab_stub_first.ipynb", title="lesson14_all_exercises.ipynb", seed=303,
                  what="Colab T4: the course notebooks merged, every stub (raise NotImplementedError) first, "
                       "the real functions later (%%time cell with defs, %%capture, %autoreload, obj?), "
                       "grader.check() between")
    nb.md("# Bài 14: GPU và CUDA — chuyển tensor giữa CPU / GPU\n\n*Gộp 5 notebook bài tập vào một file.*")
    nb.code("%load_ext autoreload\n%autoreload 2", 1)
    nb.code(S.INSTALL_GRADER, 2, stdout(PIP_GRADER))
    nb.code("import torch\nimport numpy as np\nfrom torch import nn\nfrom collections.abc import Callable", 3)
    nb.md("## Bài tập 1 — Kiểm tra GPU, viết code device-agnostic.")
    nb.code(S.STUB_EX1[0], 4)
    nb.code(S.STUB_EX1[1], 5)
    nb.code('import grader\n\ngrader.check("ex1")', 6,
            *check_table([("ex1", "· not attempted", 0, 20)]))
    nb.md("## Bài tập 2 — Speed test matmul CPU vs GPU, đo thời gian cho đúng.")
    for i, stub in enumerate(S.STUB_EX2):
        nb.code(stub, 7 + i)
    nb.md("## Bài tập 3 — Chuyển tensor CPU → device → CPU.")
    nb.code(S.STUB_EX3[0], 10)
    nb.code(S.STUB_EX3[1], 11)
    nb.md("## Bài tập 4 — Tự gây Out of Memory (OOM), bắt lỗi và dọn dẹp.")
    nb.code(S.STUB_EX4[0], 12)
    nb.code(S.STUB_EX4[1], 13)
    nb.md("## Bài tập 5 — Mixed precision: autocast + GradScaler.")
    nb.code(S.STUB_EX5[0], 14)
    nb.md("---\n# Bài làm\n\nViết lại từng hàm ở dưới (định nghĩa sau ghi đè định nghĩa trước).")
    nb.code("torch.cuda.synchronize?", 15)
    nb.code(S.PICK_TERNARY + "\n\n" + S.DESCRIBE_DICT, 16)
    nb.code("device = pick_device()\ndevice, describe_device(device)", 17,
            result(f"(device(type='cuda'),\n {T4_DICT})"))
    nb.code('grader.check("ex1")', 18, *check_table([("ex1", "✓ passed", 20, 20)]))
    nb.code("%%time\n" + S.EX2_TYPED, 19,
            stdout("CPU times: user 12 µs, sys: 0 ns, total: 12 µs\nWall time: 15.5 µs\n"))
    nb.code("%%capture log\nfor n in (100, 1000):\n    print(n, speedup(n, device))", 20)
    nb.code("print(log.stdout)", 21, stdout("100 0.4830817379310201\n1000 29.95710413363514\n\n"))
    nb.code(S.EX3_MODERN, 22)
    nb.code(S.EX4_MODERN, 23)
    nb.code(S.EX5_MODERN, 24)
    nb.code(f"for dt in (None, torch.float16, torch.bfloat16):\n    model = {MLP_TINY}\n"
            "    losses = train_steps(model, torch.randn(128, 20), torch.randint(0, 3, (128,)), device,\n"
            "                         steps=5, amp_dtype=dt)\n    print(dt, [f'{l:.3f}' for l in losses])", 25,
            stdout("None ['1.124', '1.109', '1.095', '1.081', '1.068']\n"
                   "torch.float16 ['1.101', '1.087', '1.074', '1.061', '1.048']\n"
                   "torch.bfloat16 ['1.117', '1.102', '1.089', '1.074', '1.063']\n"))
    nb.code("grader.check()", 26, *check_table(ALL_PASSED))
    return nb


# --- 4. Colab: IPython magics everywhere ----------------------------------------------------

HELPER_PY = '''\
%%writefile helper.py
# helper: đổi số byte sang GB cho dễ đọc
def gb(nbytes):
    return f"{nbytes / 1e9:.2f} GB"'''

TORCHINFO_TABLE = """==========================================================================================
Layer (type:depth-idx)                   Output Shape              Param #
==========================================================================================
Sequential                               [32, 10]                  --
├─Linear: 1-1                            [32, 256]                 200,960
├─ReLU: 1-2                              [32, 256]                 --
├─Linear: 1-3                            [32, 10]                  2,570
==========================================================================================
Total params: 203,530
Trainable params: 203,530
Non-trainable params: 0
Total mult-adds (M): 6.51
=========================================================================================="""


def colab_magics() -> Notebook:
    nb = Notebook("colab", "colab_magics.ipynb", title="Bai14_magic_thu.ipynb", seed=404,
                  what="Colab T4 full of IPython forms: !pip, a torchinfo import, %%writefile + import, "
                       "files = !ls, %%time with defs, t = %timeit -o, obj?, %%capture, sys.exit() mid-notebook")
    nb.md("# Bài 14 — làm bài + thử các magic của Colab")
    nb.code("!pip install -q torchinfo", 1)
    nb.code("import torch\nfrom torch import nn\nfrom torchinfo import summary", 2, stop="missing_module")
    nb.code(HELPER_PY, 3, stdout("Writing helper.py\n"))
    nb.code("import helper\nprint(helper.gb(15_828_320_256), helper.gb(0))", 4, stdout("15.83 GB 0.00 GB\n"))
    nb.code("files = !ls\nprint(files)\nlen(files)", 5, stdout("['helper.py', 'sample_data']\n"), result("2"))
    nb.md("## Bài 1 (dùng `torch.accelerator`, torch >= 2.6)")
    nb.code(S.EX1_ACCELERATOR, 6)
    nb.code("device = pick_device()", 7)
    nb.code("device?", 8)
    nb.md("## Bài 2 — `%%time` cả ô định nghĩa hàm, rồi `%timeit`")
    nb.code("%%time\n" + S.EX2_TIMER, 9, stdout("CPU times: user 3 µs, sys: 1 µs, total: 4 µs\nWall time: 6.68 µs\n"))
    nb.code("t = %timeit -o -n 5 -r 3 time_matmul(256, device)", 10,
            stdout("1.03 ms ± 41.2 µs per loop (mean ± std. dev. of 3 runs, 5 loops each)\n"))
    nb.code("t.best", 11, result("0.0009812345999998"))
    nb.md("## Bài 3")
    nb.code(S.EX3_LESSON, 12)
    nb.code("%%capture cap\nout = roundtrip(torch.arange(10), device)\nprint(out)\nprint(to_numpy(out))", 13)
    nb.code("print(cap.stdout)", 14,
            stdout("tensor([ 1,  3,  5,  7,  9, 11, 13, 15, 17, 19])\n[ 1  3  5  7  9 11 13 15 17 19]\n\n"))
    nb.md("## Bài 4")
    nb.code(S.EX4_HELPERS, 15)
    nb.code(S.BACKOFF_HELPERS, 16)
    nb.md("## Bài 5")
    nb.code(S.EX5_MODERN, 17)
    nb.code("model = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 10))\n"
            "summary(model, input_size=(32, 784))", 18, result(TORCHINFO_TABLE), stop="error")
    nb.code("import sys\nsys.exit()  # dừng Run all ở đây", 19, exit_err(), stderr(SYSTEM_EXIT_WARNING), stop="exit")
    nb.md("Phần dưới chỉ để thử thêm.")
    nb.code('print(describe_device(device))\nprint(f"{speedup(500, device):.1f}x")', 20,
            stdout(T4_DICT + "\n8.3x\n"))
    return nb


# --- 5. Colab: one wrong exercise (roundtrip never assigns x.to(device)) ------------------


def colab_wrong_roundtrip() -> Notebook:
    nb = Notebook("colab", "colab_wrong_roundtrip.ipynb", title="Bai14 - Tran Van Hung.ipynb", seed=505,
                  what="Colab T4: the lesson's N = 10000 speed test and its bare OOM loop at top level; "
                       "roundtrip calls x.to(device) without assigning it, everything else correct",
                  wrong=("ex3",))
    nb.md("# Bài 14 - GPU (Trần Văn Hùng)")
    nb.code("import torch\nimport torch.nn as nn\nimport numpy as np", 1)
    nb.code('print(torch.cuda.get_device_name(0))\nprint(torch.cuda.get_device_properties(0).total_memory / 1e9, "GB")',
            2, stdout("Tesla T4\n15.828320256 GB\n"), stop="no_gpu")
    nb.code(S.PICK_TERNARY + "\n\n" + S.DESCRIBE_LESSON, 3)
    nb.code("device = pick_device()\nprint(describe_device(device))", 4, stdout(T4_DICT + "\n"))
    nb.md("## Speed test N = 10000 (code trong bài)")
    nb.code(S.LESSON_SPEED_10000, 5, stdout("CPU: 11.93487811088562 s\nGPU: 0.2091367244720459 s\n"),
            stop="timeout")
    nb.code("a = b = None   # giải phóng 800 MB RAM (a, b là 2 ma trận 10000x10000)", 6)
    nb.md("## Bài 2")
    nb.code(S.EX2_LESSON + "\n\n" + S.SMALL_N_B, 7)
    nb.code("print(speedup(1000, device))", 8, stdout("31.774802150537634\n"))
    nb.md("## Bài 3")
    nb.code(S.WRONG_ROUNDTRIP_NOT_ASSIGNED + "\n\n" + S.TO_NUMPY_PLAIN, 9)
    nb.code('x = torch.arange(10, device="cpu")\ny = roundtrip(x, device)\nprint(y, y.device)\n'
            "assert torch.equal(y, x * 2 + 1)", 10,
            stdout("tensor([ 1,  3,  5,  7,  9, 11, 13, 15, 17, 19]) cpu\n"))
    nb.md("## Bài 4 — chạy thử vòng lặp OOM trong bài")
    oom_lines = "".join(f"{i} tensor, allocated = {0.4 * i:.2f} GB\n" for i in range(1, 37))
    nb.code(S.LESSON_OOM_LOOP, 11, stdout(oom_lines), err("OutOfMemoryError", OOM_MESSAGE, 3), stop="no_gpu")
    nb.code("del tensors\ntorch.cuda.empty_cache()\nprint(torch.cuda.memory_allocated())", 12, stdout("0\n"))
    nb.code(S.EX4_LESSON, 13)
    nb.md("## Bài 5")
    nb.code(S.EX5_ENABLED, 14)
    nb.code(f"print(train_steps({MLP_TINY}, torch.randn(64, 20), torch.randint(0, 3, (64,)), device,\n"
            "                  steps=3, amp_dtype=torch.float16))", 15,
            stdout("[1.1083984375, 1.0947265625, 1.0810546875]\n"))
    return nb


# --- 6. Kaggle: editor download, starts from Kaggle's default cell -------------------------


def kaggle_default_start() -> Notebook:
    nb = Notebook("kaggle", "kaggle_default_start.ipynb", title="bai-14-gpu-cuda", seed=606,
                  what="Kaggle T4 x2 editor download: Kaggle's default first cell (pandas) with torch imported "
                       "after it, !nvidia-smi, %matplotlib + plot, the lesson's OOM loop, hidden-input cells",
                  start="2025-03-09T14:02:11")
    nb.code(S.KAGGLE_FIRST_CELL + "\n\nimport torch\nimport torch.nn as nn\nimport time", 1, stop="missing_module",
            duration=4.1)
    nb.code("!nvidia-smi", 2, stdout(nvidia_smi(2, "Sun Mar  9 14:03:40 2025")), hide=True, duration=0.9)
    nb.md("# Bài 14: GPU và CUDA — chuyển tensor giữa CPU / GPU\n\nKaggle: *Settings → Accelerator → GPU T4 x2*.")
    nb.code("for i in range(torch.cuda.device_count()):\n"
            "    print(i, torch.cuda.get_device_name(i), torch.cuda.get_device_capability(i))", 3,
            stdout("0 Tesla T4 (7, 5)\n1 Tesla T4 (7, 5)\n"))
    nb.code("%matplotlib inline\nimport matplotlib.pyplot as plt", 4, stop="missing_module", duration=0.6)
    nb.md("## Bài 1 — chọn device")
    nb.code(S.PICK_TERNARY + "\n\n" + S.DESCRIBE_LESSON, 5, hide=True)
    nb.code("device = pick_device()\ndescribe_device(device)", 6, result(T4X2_DICT))
    nb.md("## Bài 2 — speed test")
    nb.code(S.EX2_HELPER + "\n\n" + S.SMALL_N_B, 7)
    nb.code('ns = [128, 256, 512, 1024]\nsp = [speedup(n, device) for n in ns]\nfor n, s in zip(ns, sp):\n'
            '    print(f"{n:5d} -> {s:6.2f}x")', 8,
            stdout("  128 ->   0.93x\n  256 ->   3.12x\n  512 ->  11.70x\n 1024 ->  38.41x\n"), duration=3.2)
    nb.code('plt.plot(ns, sp, "o-")\nplt.xlabel("N")\nplt.ylabel("CPU / GPU")\nplt.title("Speedup trên T4")\n'
            "plt.show()", 9, figure("<Figure size 640x480 with 1 Axes>", (0.93, 3.12, 11.7, 38.41)), stop="error")
    nb.md("## Bài 3 — roundtrip")
    nb.code(S.ROUNDTRIP_CHAIN + "\n\n" + S.TO_NUMPY_PLAIN, 10)
    nb.code('x = torch.arange(10, device="cpu")\nprint(roundtrip(x, device), x)', 11,
            stdout("tensor([ 1,  3,  5,  7,  9, 11, 13, 15, 17, 19]) tensor([0, 1, 2, 3, 4, 5, 6, 7, 8, 9])\n"))
    nb.md("## Bài 4 — OOM\n\nVòng lặp trong bài (trên GPU 0):")
    nb.code(S.LESSON_OOM_TRY, 12,
            stdout("Allocated trước lúc lỗi: 14.40 GB\n36 tensor 10000x10000\nSau khi dọn: 0.00 GB\n"),
            stop="no_gpu", duration=2.7)
    nb.code(S.EX4_MODERN, 13, hide=True)
    nb.code('if torch.cuda.is_available():\n    # dùng GPU thứ hai cho khỏi đụng model ở GPU 0\n'
            '    print(fill_until_oom(torch.device("cuda:1")))', 14,
            stdout("out of memory: 15166603264 bytes allocated\n226\n"), duration=1.9)
    nb.md("## Bài 5 — autocast + GradScaler")
    nb.code(S.EX5_LESSON, 15)
    nb.code("x = torch.randn(512, 20)\ny = torch.randint(0, 3, (512,))\nfor dt in (None, torch.float16):\n"
            f"    print(dt, train_steps({MLP_TINY}, x, y, device, steps=4, amp_dtype=dt))", 16,
            stdout("None [1.1137, 1.1001, 1.0868, 1.0739]\ntorch.float16 [1.1035, 1.0908, 1.0781, 1.0654]\n"))
    return nb


# --- 7. Kaggle: a "Save Version" run (papermill) ---------------------------------------------


def kaggle_saved_version() -> Notebook:
    nb = Notebook("kaggle_version", "kaggle_saved_version.ipynb", title="bai14-gpu", seed=707,
                  what="Kaggle \"Save Version\" output (papermill, nbformat 4.5, cell ids), run top to bottom "
                       "on T4 x2: the lesson's N = 10000 speed test, the AMP and accumulation snippets made to "
                       "run, modern-style exercises (benchmark.Timer, numpy(force=True), nullcontext)",
                  start="2025-03-10T07:41:05")
    nb.code(S.KAGGLE_FIRST_CELL, 1, stop="missing_module", hide=True, duration=3.4)
    nb.code("import torch, time\nimport torch.nn as nn\nprint(torch.__version__)\n"
            "print(torch.cuda.is_available(), torch.cuda.device_count())", 2, stdout("2.5.1+cu121\nTrue 2\n"))
    nb.code("print(torch.cuda.get_device_name(0))\nprint(torch.cuda.get_device_properties(0))", 3,
            stdout(f"Tesla T4\n{T4_PROPS}\n"), stop="no_gpu")
    nb.md("## Speed test N = 10000 (code trong bài)")
    nb.code(S.LESSON_SPEED_10000, 4, stdout("CPU: 21.843711853027344 s\nGPU: 0.25193023681640625 s\n"),
            stop="timeout", duration=24.6)
    nb.code("a = b = c = None   # giải phóng RAM", 5)
    nb.md("## Ví dụ tổng hợp, tách thành nhiều ô")
    nb.code('device = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n\n'
            "class MLP(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
            "        self.net = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 10))\n\n"
            "    def forward(self, x):\n        return self.net(x)\n\n"
            "model = MLP().to(device)\noptimizer = torch.optim.Adam(model.parameters(), lr=1e-3)\n"
            "loss_fn = nn.CrossEntropyLoss()", 6)
    nb.code("# dataloader giả: 10 batch x 64 ảnh 28x28 đã flatten\n"
            "dataloader = [(torch.randn(64, 784), torch.randint(0, 10, (64,))) for _ in range(10)]\n\n"
            + S.LESSON_AMP + '\nprint("loss cuối:", loss.item())', 7, stdout("loss cuối: 2.2421875\n"))
    nb.code("loader = dataloader\n" + S.LESSON_ACCUM + '\nprint("accumulation xong, loss =", loss.item())', 8,
            stdout("accumulation xong, loss = 0.5532836318016052\n"))
    nb.md("# Bài tập")
    nb.code(S.PICK_RETURNS + "\n\n" + S.DESCRIBE_PROPS, 9)
    nb.code("display(describe_device(pick_device()))", 10, display(T4X2_DICT))
    nb.code(S.EX2_TIMER, 11)
    nb.code("for n in (100, 1000):\n    print(n, round(speedup(n, device), 2))", 12,
            stdout("100 0.61\n1000 35.2\n"), duration=1.3)
    nb.code(S.EX3_MODERN, 13)
    nb.code("x = torch.arange(10)\nprint(roundtrip(x, device))\n"
            "print(to_numpy(torch.ones(2, 2, device=device, requires_grad=True)))", 14,
            stdout("tensor([ 1,  3,  5,  7,  9, 11, 13, 15, 17, 19])\n[[1. 1.]\n [1. 1.]]\n"))
    nb.code(S.EX4_HELPERS + "\n\n" + S.BACKOFF_HELPERS, 15)
    nb.code('if device.type == "cuda":\n    print("fit:", fill_until_oom(device, chunk_mb=256), "khối 256 MiB")', 16,
            stdout("OOM sau 55 khối: đang cấp phát 14080.0 MiB\nfit: 55 khối 256 MiB\n"), duration=1.1)
    nb.code("xb, yb = dataloader[0]\nprint(train_step_with_backoff(model, xb.to(device), yb.to(device), loss_fn, "
            "optimizer))", 17, stdout("(0.4816402196884155, 64)\n"))
    nb.code(S.EX5_MODERN, 18)
    nb.code("xs = torch.randn(256, 784)\nys = torch.randint(0, 10, (256,))\nfor dt in (None, torch.float16):\n"
            '    if device.type == "cuda":\n        torch.cuda.reset_peak_memory_stats()\n'
            "    train_steps(MLP(), xs, ys, device, steps=5, amp_dtype=dt)\n"
            '    if device.type == "cuda":\n        print(dt, torch.cuda.max_memory_allocated() // 2**20, "MiB")', 19,
            stdout("None 31 MiB\ntorch.float16 23 MiB\n"))
    return nb


# --- 8. Kaggle: one wrong exercise (FP16 without GradScaler) ------------------------------


def kaggle_wrong_amp() -> Notebook:
    nb = Notebook("kaggle", "kaggle_wrong_amp.ipynb", title="lesson-14-amp", seed=808,
                  what="Kaggle T4 x2 editor download: the numpy TypeError demo, a %%time call, input() "
                       "before submitting; train_steps runs FP16 autocast without a GradScaler, the rest correct",
                  wrong=("ex5",), start="2025-03-11T20:15:40")
    nb.code(S.KAGGLE_FIRST_CELL, 1, stop="missing_module", duration=3.9)
    nb.code("import torch\nimport torch.nn as nn\nfrom collections.abc import Callable", 2, duration=2.2)
    nb.md("## Bài 1")
    nb.code(S.PICK_RETURNS + "\n\n" + S.DESCRIBE_PROPS, 3)
    nb.code("device = pick_device(); print(device)", 4, stdout("cuda\n"))
    nb.md("NumPy chỉ ở CPU:")
    nb.code('x = torch.randn(3, 4, device="cuda")\nprint(x.cpu().numpy())\nprint(x.numpy())', 5,
            stdout("[[-0.3121  1.0416 -0.5526  0.7712]\n [ 0.0845 -1.3279  0.9033 -0.2178]\n"
                   " [ 1.6621 -0.0911  0.4407 -0.8890]]\n"),
            err("TypeError", NUMPY_TYPEERROR, 3), stop="no_gpu")
    nb.md("## Bài 2")
    nb.code(S.EX2_LESSON + "\n\n" + S.SMALL_N_B, 6)
    nb.code("%%time\nprint(time_matmul(1000, device))", 7,
            stdout("0.0003214836120605469\nCPU times: user 41.7 ms, sys: 12.1 ms, total: 53.8 ms\n"
                   "Wall time: 58.3 ms\n"))
    nb.md("## Bài 3")
    nb.code(S.EX3_LESSON, 8)
    nb.code("print(roundtrip(torch.arange(10), device))", 9,
            stdout("tensor([ 1,  3,  5,  7,  9, 11, 13, 15, 17, 19])\n"))
    nb.md("## Bài 4")
    nb.code(S.EX4_HELPERS, 10, hide=True)
    nb.code(S.BACKOFF_HELPERS, 11, hide=True)
    nb.code(f"m = {MLP_TINY}.to(device)\nopt = torch.optim.SGD(m.parameters(), lr=0.1)\n"
            "xb, yb = torch.randn(32, 20, device=device), torch.randint(0, 3, (32,), device=device)\n"
            "train_step_with_backoff(m, xb, yb, nn.CrossEntropyLoss(), opt)", 12, result("(1.0986123085021973, 32)"))
    nb.md("## Bài 5 — mixed precision")
    nb.code(S.WRONG_EX5_NO_SCALER, 13)
    nb.code(f"losses = train_steps({MLP_TINY}, torch.randn(256, 20), torch.randint(0, 3, (256,)), device,\n"
            "                     steps=5, amp_dtype=torch.float16)\nlosses", 14,
            result("[1.1025390625, 1.0888671875, 1.0751953125, 1.0625, 1.0498046875]"))
    nb.code("!ls /kaggle/working", 15, stdout("__notebook__.ipynb\n"))
    nb.code('mssv = input("Mã sinh viên: ")\nprint("Nộp bài:", mssv)', 16,
            stdout("Mã sinh viên: 21520417\nNộp bài: 21520417\n"), stop="input")
    return nb


# --- 9. JupyterLab on a laptop without a GPU -------------------------------------------------


def jupyter_local_cpu() -> Notebook:
    nb = Notebook("jupyter", "jupyter_local_cpu.ipynb", title="bai14", seed=909,
                  what="JupyterLab on a CPU-only laptop (nbformat 4.5, its saved errors are 'Torch not compiled "
                       "with CUDA enabled'): !nvidia-smi not found, matplotlib present locally, an unclosed "
                       "parenthesis never fixed, fill_until_oom guarded")
    nb.code("!nvidia-smi", 1, stdout("/bin/bash: line 1: nvidia-smi: command not found\n"))
    nb.code("import torch\nimport torch.nn as nn\nimport numpy as np\nimport time\n"
            "print(torch.__version__, torch.cuda.is_available())", 2, stdout("2.5.1+cpu False\n"))
    nb.code("print(torch.cuda.get_device_name(0))", 3,
            err("AssertionError", "Torch not compiled with CUDA enabled", 1, *NO_CUDA_FRAMES), stop="no_gpu")
    nb.code("import matplotlib.pyplot as plt\n%matplotlib inline", 4, stop="missing_module")
    nb.md("# Bài 14 — làm trên laptop (không có GPU NVIDIA)\n\n"
          "Máy mình không có GPU nên `device` sẽ là `cpu`; code vẫn phải chạy được.")
    nb.code(S.PICK_LESSON, 5)
    nb.code(S.DESCRIBE_DICT, 6)
    nb.code("device = pick_device()\nprint(describe_device(device))", 7,
            stdout("{'type': 'cpu', 'name': 'CPU', 'count': 1, 'capability': None, 'total_memory_bytes': None}\n"))
    nb.code("print(describe_device(device)", 8, syntax_err("'(' was never closed", 1, 6), stop="syntax_error")
    nb.md("## Bài 2")
    nb.code(S.EX2_HELPER + "\n\n" + S.SMALL_N_B, 9)
    nb.code('x = torch.randn(3, 4, device="cuda")\nx.numpy()', 10,
            err("AssertionError", "Torch not compiled with CUDA enabled", 1,
                ("~/miniconda3/envs/dl/lib/python3.11/site-packages/torch/cuda/__init__.py", 310, "_lazy_init",
                 'raise AssertionError("Torch not compiled with CUDA enabled")')), stop="no_gpu")
    nb.md("## Bài 3, 4, 5")
    nb.code(S.EX3_LESSON, 11)
    nb.code(S.EX4_LESSON, 12)
    nb.code("# KHÔNG chạy fill_until_oom trên CPU: máy sẽ hết RAM thật\n"
            'if device.type == "cuda":\n    fill_until_oom(device)', 13)
    nb.code(S.EX5_ENABLED, 14)
    nb.code("xs, ys = torch.randn(64, 20), torch.randint(0, 3, (64,))\n"
            "for dt in (None, torch.float16, torch.bfloat16):\n"
            f"    print(dt, train_steps({MLP_TINY}, xs, ys, device, steps=3, amp_dtype=dt))", 15,
            stdout("None [1.0995, 1.0912, 1.0831]\ntorch.float16 [1.1006, 1.0923, 1.0840]\n"
                   "torch.bfloat16 [1.1016, 1.0938, 1.0859]\n"))
    nb.code('ns = [64, 128, 256, 512]\nts = [time_matmul(n, device) * 1e3 for n in ns]\nplt.plot(ns, ts, "o-")\n'
            'plt.ylabel("ms / matmul (CPU)")\nplt.show()', 16, figure(points=(0.02, 0.09, 0.61, 4.1)), stop="error")
    return nb


# --- 10. Colab: keep-alive loop, OOM, a call before its definition ---------------------------


def colab_keepalive_oom() -> Notebook:
    nb = Notebook("colab", "colab_keepalive_oom.ipynb", title="bai14_oom.ipynb", seed=1010,
                  what="Colab T4: input() for name and id, a keep-alive while-True sleep loop (interrupted), "
                       "the lesson's bare OOM loop, a helper called one cell before it is defined")
    nb.md("# Bài 14 — OOM, mixed precision\n\nChạy từ trên xuống (Runtime → Run all).")
    nb.code('ho_ten = input("Họ tên: ")\nmssv = input("MSSV: ")', 1, stdout("Họ tên: Phạm Thu Trang\nMSSV: 20211234\n"),
            stop="input")
    nb.code("import torch, time\nfrom torch import nn", 2)
    nb.code("torch.cuda.get_device_properties(0).total_memory / 1e9", 3, result("15.828320256"), stop="no_gpu")
    nb.code(S.EX1_ACCELERATOR, 4)
    nb.code("device = pick_device()\ndevice", 5, result("device(type='cuda')"))
    nb.code("# giữ cho Colab không ngắt kết nối lúc đi ăn trưa :)\nwhile True:\n    time.sleep(60)\n"
            '    print(".", end="")', 6, stdout("........................................"),
            err("KeyboardInterrupt", "", 3), stop="timeout")
    nb.code(S.EX2_LESSON + "\n\n" + S.SMALL_N_B, 7)
    nb.md("## Bài 4: vòng lặp OOM trong bài")
    oom_lines = "".join(f"{i} tensor, allocated = {0.4 * i:.2f} GB\n" for i in range(1, 37))
    nb.code(S.LESSON_OOM_LOOP, 8, stdout(oom_lines), err("OutOfMemoryError", OOM_MESSAGE, 3), stop="no_gpu")
    nb.code('print(len(tensors))\ndel tensors\ntorch.cuda.empty_cache()\n'
            'print(torch.cuda.memory_allocated() / 1e9, "GB")',
            9, stdout("36\n0.0 GB\n"))
    nb.code(S.EX4_MODERN, 10)
    nb.code(S.ROUNDTRIP_CHAIN + "\n\n" + S.TO_NUMPY_PLAIN, 11)
    nb.code(f"m = {MLP_TINY}.to(device)\n"
            "print(train_step_with_backoff(m, torch.randn(16, 20, device=device), torch.randint(0, 3, (16,), "
            "device=device),\n                             nn.CrossEntropyLoss(), torch.optim.Adam(m.parameters())))",
            12, stdout("(1.1210675239562988, 16)\n"))
    nb.md("## Bài 5")
    nb.code(S.EX5_LESSON, 13)
    nb.code("so_sanh_bo_nho()", 14, err("NameError", "name 'so_sanh_bo_nho' is not defined", 1), stop="error")
    nb.code("def so_sanh_bo_nho():\n    x, y = torch.randn(512, 20), torch.randint(0, 3, (512,))\n"
            "    for dt in (None, torch.float16):\n"
            f"        losses = train_steps({MLP_TINY}, x, y, device, steps=3, amp_dtype=dt)\n"
            '        print(dt, f"loss cuối = {losses[-1]:.4f}")', 15)
    nb.code("so_sanh_bo_nho()", 16, stdout("None loss cuối = 1.0805\ntorch.float16 loss cuối = 1.0786\n"))
    return nb


NOTEBOOKS = [colab_lesson_demos, colab_messy_session, colab_stub_first, colab_magics, colab_wrong_roundtrip,
             kaggle_default_start, kaggle_saved_version, kaggle_wrong_amp, jupyter_local_cpu, colab_keepalive_oom]


# --- .py exports and the catalog -----------------------------------------------------------


def nbconvert_script(text: str) -> str:
    """`jupyter nbconvert --to script`, done by nbconvert itself."""
    import nbformat
    from nbconvert.exporters import ScriptExporter

    body, _ = ScriptExporter().from_notebook_node(nbformat.reads(text, as_version=4))
    return body


def statement_stops(text: str, wanted: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """`line N` labels of the top-level statements whose first line is one of `wanted`."""
    import ast

    lines = text.split("\n")
    # `!cmd` lines are not Python: blank them (keeping the line count) to find the statements.
    parsable = "\n".join("" if line.lstrip().startswith("!") else line for line in lines)
    starts = {}
    for node in ast.parse(parsable).body:
        starts.setdefault(lines[node.lineno - 1], node.lineno)
    out = []
    for first_line, kind in wanted:
        if first_line not in starts:
            raise SystemExit(f"no top-level statement starts with {first_line!r}")
        out.append((f"line {starts[first_line]}", kind))
    return sorted(out, key=lambda item: int(item[0].split()[1]))


def percent_stops(nb: Notebook) -> list[tuple[str, str]]:
    return [(f"cell {k}", c.stop) for k, c in enumerate(nb.code_cells(), 1) if c.stop]


def compile_exports(texts: dict[str, str], stopped: dict[str, list[tuple[str, str]]]) -> None:
    """Each cell of a .py export compiles once its magic / shell lines are blanked, but the syntax errors."""
    import re

    for name, text in texts.items():
        if not name.endswith(".py"):
            continue
        marker = r"^# In\[[ \d]*\]:$" if "# In[" in text else r"^# %%" if text.startswith("# %%") else None
        lines = [("" if line.lstrip().startswith(("!", "%")) or "get_ipython()" in line else line)
                 for line in text.split("\n")]
        if marker is None:
            chunks = [("file", "\n".join(lines))]
        else:
            chunks, label, buf, k = [], None, [], 0
            sentinel = "# In[ ]:" if "In[" in marker else "# %%"
            for line, _raw in zip([*lines, sentinel], [*text.split("\n"), ""], strict=True):
                if re.match(marker, line):
                    if label is not None:
                        chunks.append((label, "\n".join(buf)))
                    k += 1
                    found = re.match(r"^# In\[ *(\d+) *\]:$", line)
                    label = f"In [{found[1]}]" if found else f"cell {k}"
                    buf = []
                    if "[markdown]" in line:
                        k -= 1
                        label = None
                else:
                    buf.append(line)
        expected = {label for label, kind in stopped[name] if kind == "syntax_error"}
        for label, chunk in chunks:
            try:
                compile(chunk, f"{name}:{label}", "exec")
                ok = True
            except SyntaxError:
                ok = False
            if ok == (label in expected):
                raise SystemExit(f"{name} {label}: compiles={ok}, catalog syntax_error={label in expected}")


CATALOG_HEADER = '''\
"""The learner notebooks of this folder, and what the grader must make of each one.

Generated by make_catalog.py (do not edit by hand; change make_catalog.py and rerun it).

Every file holds a whole learner's work for all five exercises, correct unless listed in
`wrong`, among the things learners leave in notebooks. `stopped` lists, in order, each cell
the grader must stop when it runs the file like "Run all" on a CPU-only machine (no CUDA,
no matplotlib / pandas / torchinfo, no network, stdin closed, 10 s a cell):

- label: `In [n]` for a cell saved with execution_count n (and `# In[n]:` in an nbconvert
  script), `cell k` for the k-th code cell otherwise (and in a `# %%` script), `line N` for
  the top-level statement starting on line N of a plain / Colab `.py`;
- kind: syntax_error, no_gpu, missing_module, input, timeout, exit, error, ipython.

Cells not listed must run to their end. The saved outputs are those of the learner's own
session (a T4 on Colab / Kaggle): they are not what the grader sees.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
LEARNERS = HERE / "learners"  # the learners' files: fixtures, never edited by hand
KINDS = ("syntax_error", "no_gpu", "missing_module", "input", "timeout", "exit", "error", "ipython")


@dataclass(frozen=True)
class NotebookCase:
    file: str  # "colab_lesson_demos.ipynb"
    what: str  # one line: what it shows
    wrong: tuple[str, ...] = ()  # exercises that must lose points ("ex3",); () = must get 100/100
    stopped: tuple[tuple[str, str], ...] = ()  # (cell label, kind) for each cell the grader must stop

    @property
    def path(self) -> Path:
        return LEARNERS / self.file


'''


def render_catalog(cases: list[tuple[str, str, tuple[str, ...], list[tuple[str, str]]]]) -> str:
    out = [CATALOG_HEADER, "CASES: tuple[NotebookCase, ...] = (\n"]
    for file, what, wrong, stopped in cases:
        out.append("    NotebookCase(\n")
        out.append(f"        file={file!r},\n")
        pieces = textwrap.wrap(what, 96, drop_whitespace=False)
        if len(pieces) == 1:
            out.append(f"        what={what!r},\n")
        else:
            out.append("        what=(\n" + "".join(f"            {p!r}\n" for p in pieces) + "        ),\n")
        if wrong:
            out.append(f"        wrong={wrong!r},\n")
        if stopped:
            out.append("        stopped=(\n")
            out.extend(f"            ({label!r}, {kind!r}),\n" for label, kind in stopped)
            out.append("        ),\n")
        out.append("    ),\n")
    out.append(")\n\nBY_FILE = {case.file: case for case in CASES}\n")
    return "".join(out)


def main() -> int:
    import nbformat

    cases = []
    texts: dict[str, str] = {}
    built: dict[str, Notebook] = {}
    for make in NOTEBOOKS:
        nb = make()
        text = write_notebook(nb)
        nbformat.validate(nbformat.reads(text, as_version=nbformat.NO_CONVERT))
        texts[nb.file] = text
        built[nb.file] = nb
        cases.append((nb.file, nb.what, nb.wrong, nb.stopped()))

    # 1) nbconvert --to script of the laptop notebook
    local = built["jupyter_local_cpu.ipynb"]
    texts["jupyter_local_cpu.py"] = nbconvert_script(texts[local.file])
    cases.append(("jupyter_local_cpu.py", "jupyter nbconvert --to script of jupyter_local_cpu.ipynb: "
                  "# In[n]: markers, get_ipython() for magics and !, markdown as comments",
                  local.wrong, local.stopped()))
    # 2) VS Code's export of the Kaggle notebook: `# %%` cells, magics kept as typed
    kag = built["kaggle_default_start.ipynb"]
    texts["kaggle_default_start.py"] = percent_py(kag)
    cases.append(("kaggle_default_start.py", "VS Code 'Export as Python Script' of kaggle_default_start.ipynb: "
                  "# %% / # %% [markdown] cells, !nvidia-smi and %matplotlib kept as typed",
                  kag.wrong, percent_stops(kag)))
    # 3) Colab's File → Download → Download .py of the lesson notebook
    lesson = built["colab_lesson_demos.ipynb"]
    text = colab_py(lesson, "1pQ7vZk3mW9xR2tL0aHcE5uYbN8sJd4Fo")
    texts["colab_lesson_demos.py"] = text
    cases.append(("colab_lesson_demos.py", "Colab 'Download .py' of colab_lesson_demos.ipynb: docstring header, "
                  "markdown as strings, %pip commented out, !nvidia-smi kept; every top-level statement on its own",
                  lesson.wrong, statement_stops(text, COLAB_PY_STOPS)))

    compile_exports(texts, {file: stopped for file, _, _, stopped in cases})
    for name, body in texts.items():
        (HERE / "learners" / name).write_text(body, encoding="utf-8")
        size = len(body.encode("utf-8"))
        if size > 60_000:
            print(f"warning: {name} is {size} bytes", file=sys.stderr)
    (HERE / "catalog.py").write_text(render_catalog(cases), encoding="utf-8")
    for name in sorted(texts):
        print(f"{len(texts[name].encode('utf-8')):7d}  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
