#!/usr/bin/env python
# coding: utf-8

# In[1]:


get_ipython().system('nvidia-smi')


# In[2]:


import torch
import torch.nn as nn
import numpy as np
import time
print(torch.__version__, torch.cuda.is_available())


# In[3]:


print(torch.cuda.get_device_name(0))


# In[4]:


import matplotlib.pyplot as plt
get_ipython().run_line_magic('matplotlib', 'inline')


# # Bài 14 — làm trên laptop (không có GPU NVIDIA)
# 
# Máy mình không có GPU nên `device` sẽ là `cpu`; code vẫn phải chạy được.

# In[5]:


def pick_device():
    # Thứ tự ưu tiên giống trong bài: cuda -> mps -> cpu
    if torch.cuda.is_available():
        device = torch.device("cuda")
    elif torch.backends.mps.is_available():
        device = torch.device("mps")
    else:
        device = torch.device("cpu")
    return device


# In[6]:


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


# In[7]:


device = pick_device()
print(describe_device(device))


# In[8]:


print(describe_device(device)


# ## Bài 2

# In[9]:


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


# In[10]:


x = torch.randn(3, 4, device="cuda")
x.numpy()


# ## Bài 3, 4, 5

# In[11]:


def roundtrip(x, device):
    x_gpu = x.to(device)       # .to() không in-place — phải gán lại
    x_gpu = x_gpu * 2 + 1      # phép tính chạy trên device
    x_back = x_gpu.cpu()       # quay về CPU
    return x_back.to(x.dtype)


def to_numpy(t):
    # NumPy chỉ sống trên CPU, và tensor có grad thì phải detach trước
    return t.detach().cpu().numpy()


# In[12]:


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


# In[13]:


# KHÔNG chạy fill_until_oom trên CPU: máy sẽ hết RAM thật
if device.type == "cuda":
    fill_until_oom(device)


# In[14]:


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


# In[15]:


xs, ys = torch.randn(64, 20), torch.randint(0, 3, (64,))
for dt in (None, torch.float16, torch.bfloat16):
    print(dt, train_steps(nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 3)), xs, ys, device, steps=3, amp_dtype=dt))


# In[16]:


ns = [64, 128, 256, 512]
ts = [time_matmul(n, device) * 1e3 for n in ns]
plt.plot(ns, ts, "o-")
plt.ylabel("ms / matmul (CPU)")
plt.show()

