# mistake: builds Adam with a hard-coded lr=1e-3 (the default) instead of the lr it was handed
# fails: ex5.fp32_losses
# message: ex5.fp32_mismatch
"""Bài tập 5 — Mixed precision: autocast + GradScaler.

Bài học: mục "autocast + GradScaler" (mixed precision, FP16 vs BF16).
Như bước 5 của phần "Bài tập": viết một training loop ngắn cho MLP trên dữ liệu giả,
chạy được ở ba chế độ: FP32 thường, FP16 (autocast + GradScaler) và BF16 (chỉ autocast,
không cần GradScaler). Grader tự đo bộ nhớ đỉnh của từng chế độ để so sánh.

Lưu ý: GPU T4 trên Colab chỉ hỗ trợ FP16, không hỗ trợ BF16.

Exercise 5 — Mixed precision: autocast + GradScaler.

Lesson section: "autocast + GradScaler" (mixed precision, FP16 vs BF16).
Like step 5 of the exercises: write a short training loop for an MLP on fake data
that runs in three modes: plain FP32, FP16 (autocast + GradScaler) and BF16 (autocast
only, no GradScaler needed). The grader measures each mode's peak memory itself.

Note: Colab's T4 GPU supports FP16 but not BF16.
"""

import torch
from torch import nn


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

    - Chuyển model, `inputs` và `targets` sang `device` (nhớ gán lại tensor).
    - Dùng `torch.optim.Adam(model.parameters(), lr=lr)` và `nn.CrossEntropyLoss()`;
      mỗi bước dùng toàn bộ batch.
    - `amp_dtype=None`: FP32 thường, không autocast.
    - `amp_dtype=torch.float16`: forward (model + loss) trong
      `torch.autocast(device_type=device.type, dtype=torch.float16)`, backward và
      step qua `torch.amp.GradScaler`.
    - `amp_dtype=torch.bfloat16`: autocast với bfloat16, KHÔNG dùng GradScaler.
    - Trả về list gồm `steps` số float của Python (dùng `loss.item()`).

    Train `model` for `steps` steps on the whole batch; return each step's loss.

    - Move the model, `inputs` and `targets` to `device` (assign the tensors back).
    - Use `torch.optim.Adam(model.parameters(), lr=lr)` and `nn.CrossEntropyLoss()`;
      every step uses the whole batch.
    - `amp_dtype=None`: plain FP32, no autocast.
    - `amp_dtype=torch.float16`: forward (model + loss) inside
      `torch.autocast(device_type=device.type, dtype=torch.float16)`, backward and
      step through a `torch.amp.GradScaler`.
    - `amp_dtype=torch.bfloat16`: autocast with bfloat16, NO GradScaler.
    - Return a list of `steps` Python floats (use `loss.item()`).
    """
    model.to(device)  # in-place for modules
    inputs = inputs.to(device)  # not in-place for tensors
    targets = targets.to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()
    # FP16 has a narrow range, so small gradients underflow unless the loss is
    # scaled up first; BF16 has FP32's range and needs no scaler.
    use_scaler = amp_dtype == torch.float16
    scaler = torch.amp.GradScaler(device.type, enabled=use_scaler)
    losses: list[float] = []
    for _ in range(steps):
        optimizer.zero_grad(set_to_none=True)
        with torch.amp.autocast(
            device_type=device.type,
            dtype=amp_dtype or torch.float32,
            enabled=amp_dtype is not None,
        ):
            out = model(inputs)
            loss = loss_fn(out, targets)
        if use_scaler:
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
        else:
            loss.backward()
            optimizer.step()
        losses.append(loss.item())
    return losses
