"""The stand-in measured against PyTorch's own definitions (op_db, module_db, the autocast lists,
the FLOP counter, the torch.cuda / torch.mps / torch.accelerator API, the standard library's clocks)."""
