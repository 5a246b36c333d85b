# mistake: train_steps makes the device the default (torch.set_default_device) and feeds the batch through a shuffling DataLoader: its sampler draws the permutation on the default device with its own CPU generator, which PyTorch refuses ("Expected a 'cuda' device type for generator but found 'cpu'") on every device but the CPU
# fails: ex5.fp32_losses, ex5.fp16_uses_grad_scaler, ex5.bf16_uses_autocast, ex5.modern_amp_api, ex5.moves_model_and_data, ex5.amp_saves_memory
# message: generator_off_device
# idiom: torch.set_default_tensor_type / set_default_device with a DataLoader(shuffle=True) (pytorch/pytorch issue #58545; the same error in zhang-can/CoLA#10, tianyu0207/RTFM#47, amdegroot/ssd.pytorch#578)
# source: https://github.com/pytorch/pytorch/issues/58545
"""Bài tập 5 — đặt device mặc định rồi dùng DataLoader(shuffle=True)."""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def train_steps(model, inputs, targets, device, steps=20, amp_dtype=None, lr=1e-3):
    torch.set_default_device(device)  # "everything on the GPU from here on"
    try:
        model.to(device)
        loader = DataLoader(TensorDataset(inputs.to(device), targets.to(device)), batch_size=len(inputs), shuffle=True)
        optimizer = torch.optim.Adam(model.parameters(), lr=lr)
        loss_fn = nn.CrossEntropyLoss()
        use_amp = amp_dtype is not None
        scaler = torch.amp.GradScaler(device.type, enabled=amp_dtype == torch.float16)
        losses = []
        for _ in range(steps):
            for xb, yb in loader:
                optimizer.zero_grad(set_to_none=True)
                with torch.autocast(device_type=device.type, dtype=amp_dtype or torch.float32, enabled=use_amp):
                    loss = loss_fn(model(xb), yb)
                scaler.scale(loss).backward()
                scaler.step(optimizer)
                scaler.update()
                losses.append(loss.item())
        return losses
    finally:
        torch.set_default_device(None)
