# idiom: Hugging Face transformers — transformers/trainer.py "Trainer.compute_loss_context_manager" (ExitStack), "autocast_smart_context_manager", "compute_loss", "training_step"
# source: https://github.com/huggingface/transformers/blob/main/src/transformers/trainer.py
# shows: a Trainer-like class: amp_dtype chosen from fp16/bf16 flags, autocast entered through an ExitStack (compute_loss_context_manager), compute_loss on a dict batch, scaler in training_step: full marks
"""Bài tập 5, kiểu transformers Trainer: autocast_smart_context_manager, training_step."""

import contextlib

import torch
from torch import nn


class MiniTrainer:
    def __init__(self, model, device, fp16=False, bf16=False, learning_rate=1e-3):
        self.device = device
        self.model = model.to(device)
        self.use_amp = fp16 or bf16
        self.amp_dtype = torch.float16 if fp16 else torch.bfloat16
        self.scaler = torch.amp.GradScaler(device.type) if fp16 else None
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=learning_rate)
        self.loss_fct = nn.CrossEntropyLoss()

    def autocast_smart_context_manager(self, cache_enabled=True):
        # transformers now leaves this to accelerate; earlier releases built the autocast here
        if self.use_amp:
            return torch.autocast(device_type=self.device.type, dtype=self.amp_dtype, cache_enabled=cache_enabled)
        return contextlib.nullcontext()

    def compute_loss_context_manager(self):
        ctx_stack = contextlib.ExitStack()
        autocast_ctx = self.autocast_smart_context_manager()
        if not isinstance(autocast_ctx, contextlib.nullcontext):
            ctx_stack.enter_context(autocast_ctx)
        return ctx_stack

    def _prepare_inputs(self, inputs):
        return {k: v.to(self.device) for k, v in inputs.items()}

    def compute_loss(self, model, inputs):
        labels = inputs.pop("labels")
        logits = model(inputs["input_features"])
        return self.loss_fct(logits, labels)

    def training_step(self, model, inputs):
        model.train()
        inputs = self._prepare_inputs(inputs)
        with self.compute_loss_context_manager():
            loss = self.compute_loss(model, inputs)
        if self.scaler is not None:
            self.scaler.scale(loss).backward()
        else:
            loss.backward()
        return loss.detach()

    def optimizer_step(self):
        if self.scaler is not None:
            self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            self.optimizer.step()
        self.optimizer.zero_grad()


def train_steps(model, inputs, targets, device, steps=20, amp_dtype=None, lr=1e-3):
    trainer = MiniTrainer(model, device, fp16=amp_dtype == torch.float16, bf16=amp_dtype == torch.bfloat16,
                          learning_rate=lr)
    losses = []
    for _ in range(steps):
        batch = {"input_features": inputs, "labels": targets}
        tr_loss_step = trainer.training_step(trainer.model, batch)
        trainer.optimizer_step()
        losses.append(tr_loss_step.item())
    return losses
