# idiom: PyTorch tutorials — pytorch/tutorials recipes/recipes/amp_recipe.py "All together (\"Automatic Mixed Precision\")"
# source: https://github.com/pytorch/tutorials/blob/main/recipes_source/recipes/amp_recipe.py
# shows: one loop for every mode: autocast(enabled=use_amp) and GradScaler(enabled=...) always called (scale/step/update are no-ops when disabled), zero_grad(set_to_none=True) after the step: full marks
"""Bài tập 5, kiểu AMP recipe "All together": enabled= thay cho if/else."""

import torch


def train_steps(model, inputs, targets, device, steps=20, amp_dtype=None, lr=1e-3):
    net = model.to(device)
    data, target = inputs.to(device), targets.to(device)
    opt = torch.optim.Adam(net.parameters(), lr=lr)
    loss_fn = torch.nn.CrossEntropyLoss().to(device)

    use_amp = amp_dtype is not None
    scaler = torch.amp.GradScaler(device.type, enabled=amp_dtype == torch.float16)

    losses = []
    for _ in range(steps):
        with torch.autocast(device_type=device.type, dtype=amp_dtype, enabled=use_amp):
            output = net(data)
            loss = loss_fn(output, target)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        opt.zero_grad(set_to_none=True)  # set_to_none=True here can modestly improve performance
        losses.append(loss.item())
    return losses
