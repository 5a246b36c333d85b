"""The stand-ins' declared misses: for each suite and kind, each case where the stand-in differs from
the real device, and why. tests/conformance/test_conformance.py fails on any miss not listed here;
benchmarks/standin_conformance.py prints them all with their reasons.
"""

from __future__ import annotations

KNOWN: dict[tuple[str, str], dict[str, str]] = {
    ("api", "cuda"): {
        "torch.cuda.GreenContext": "green contexts partition a GPU's streaming multiprocessors in the CUDA driver; "
                                   "its C++ class needs a CUDA build (the stand-in has none to partition)",
        "torch.accelerator.Graph": "its C++ class (torch._C._acceleratorGraph) asks the C++ runtime for an "
                                   "accelerator, which a CPU build lacks; torch.cuda.CUDAGraph and torch.cuda.graph "
                                   "work on the stand-in (capture records the ops, replay reruns them)",
    },
    ("api", "mps"): {
        "torch.accelerator.Graph": "its C++ class (torch._C._acceleratorGraph) asks the C++ runtime for an "
                                   "accelerator, which a CPU build lacks",
        "torch.mps.compile_shader": "it compiles Metal shading language with Apple's Metal compiler, which a "
                                    "machine without macOS does not have",
        "torch.mps.load_metallib": "it loads a compiled Metal library into the Metal runtime, which a machine "
                                   "without macOS does not have",
    },
    ("autocast", "mps"): {
        "torch_fp32.norm#3": "torch.norm's own Python picks aten::norm for an MPS tensor and linalg_vector_norm "
                             "(float32 under MPS autocast) for a CPU one; Python inside a torch function runs with "
                             "the stand-in's mode popped, as PyTorch runs every mode, and sees the CPU",
        "torch_fp32.norm#4": "the same as norm#3, with a dim",
    },
}
