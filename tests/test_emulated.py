"""``grader.emulated()``: the stand-in GPU for learners' and course authors' own code, as docs/learners.md
shows it ("Try your CUDA code on your laptop")."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from time import perf_counter

import pytest
import torch

import grader
from tests.conftest import ROOT


def test_importing_grader_stays_cheap() -> None:
    code = "import sys, grader; assert callable(grader.emulated); print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "False"


def test_the_documented_example_raises_pytorchs_own_error() -> None:
    with grader.emulated("cuda") as gpu:
        assert torch.cuda.is_available() and gpu.device.type == "cuda"
        model = torch.nn.Linear(8, 2).to("cuda")
        assert next(model.parameters()).device == torch.device("cuda", 0)
        with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
            model(torch.randn(4, 8))
        assert model(torch.randn(4, 8, device="cuda")).device.type == "cuda"
    assert not torch.cuda.is_available()  # as this CPU build says, once the block ends


def test_a_timing_without_synchronize_is_wrong_as_on_a_gpu() -> None:
    """perf_counter was bound by this module's own import: it reads the virtual clock too."""
    with grader.emulated("cuda", virtual_clock=True) as gpu:
        a = torch.randn(512, 512, device="cuda")
        a @ a  # warm-up
        torch.cuda.synchronize()
        start = perf_counter()
        a @ a
        unsynced = perf_counter() - start
        start = perf_counter()
        a @ a
        torch.cuda.synchronize()
        synced = perf_counter() - start
    expected = 2 * 512**3 / 1e12  # one product at the stand-in's FLOP rate
    assert unsynced < expected / 10 < synced
    assert any(e.kind == "matmul" for e in gpu.events) and any(e.kind == "sync" for e in gpu.events)


def test_memory_and_out_of_memory() -> None:
    with grader.emulated("cuda", memory_bytes=10 * 2**20) as gpu:
        kept = [torch.empty(2**20, device="cuda") for _ in range(2)]  # 2 x 4 MiB
        assert torch.cuda.memory_allocated() == gpu.memory_allocated() == 8 * 2**20
        with pytest.raises(torch.OutOfMemoryError):
            kept.append(torch.empty(2**20, device="cuda"))
        del kept
        assert torch.cuda.memory_allocated() == 0 and gpu.max_memory_allocated() == 8 * 2**20


def test_an_apple_gpu() -> None:
    with grader.emulated("mps") as gpu:
        assert torch.backends.mps.is_available() and not torch.cuda.is_available()
        assert torch.ones(2, device="mps").device == torch.device("mps", 0) == torch.device(gpu.device.type, 0)
        with pytest.raises(TypeError, match="float64"):
            torch.ones(2, dtype=torch.float64, device="mps")


def test_a_wrong_kind_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="'cuda' or 'mps'"), grader.emulated("tpu"):
        pass


def test_threads_the_code_starts_see_the_device_as_on_a_gpu() -> None:
    """A GPU is the whole process's: a thread pool's workers and a DataLoader's pin-memory thread
    use it as the thread that opened it does, while what PyTorch keeps per thread (autocast, the
    default device) starts afresh there, as on a GPU. PyTorch keeps modes per thread, so without
    grader/emulation/standin.py ``_every_thread`` a thread saw this CPU build's "no CUDA" instead."""
    from concurrent.futures import ThreadPoolExecutor

    from torch.utils.data import DataLoader, TensorDataset

    def in_a_thread(x: torch.Tensor) -> tuple[str, bool, bool, bool]:
        y = x.to("cuda") @ x.to("cuda")
        return str(y.device), y.is_cuda, torch.is_autocast_enabled("cuda"), torch.randn(2).is_cuda

    with grader.emulated("cuda") as gpu:
        torch.set_default_device("cuda")
        with torch.autocast("cuda", dtype=torch.float16), ThreadPoolExecutor(2) as pool:
            seen = list(pool.map(in_a_thread, [torch.ones(4, 4, device="cpu")] * 3))
        assert torch.randn(2).is_cuda  # this thread's default device: kept
        torch.set_default_device(None)
        assert seen == [("cuda:0", True, False, False)] * 3
        assert gpu.memory_allocated() == 0  # what the threads made there was counted, and freed
        assert gpu.max_memory_allocated() > 0
        loader = DataLoader(TensorDataset(torch.arange(8.0)), batch_size=4, pin_memory=True)
        batches = [batch.to("cuda", non_blocking=True) for (batch,) in loader]
        assert [b.is_cuda for b in batches] == [True, True] and torch.cat(batches).sum().item() == 28.0
    with ThreadPoolExecutor(1) as pool:  # once the block ends, threads see this CPU build again
        assert not pool.submit(torch.cuda.is_available).result()


# PyTorch's own: torch.compile imports inductor, whose torch.utils.mkldnn still uses torch.jit.script_method.
@pytest.mark.filterwarnings("ignore:`torch.jit.script_method` is deprecated:DeprecationWarning")
def test_a_compiled_model_runs_on_each_stand_in_in_turn(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``torch.compile`` in the learner's code (nanochat, timm's --torchcompile) under one stand-in, then
    another: Dynamo leaves a frame alone while a dispatch mode is on the stack, but a mode is off it
    while its own ``__torch_dispatch__`` runs, and there Dynamo compiled the stand-in itself, then
    replayed the first session's device in the second ("cuda doesn't match the current accelerator
    mps"). grader/reference/meter.py ``never_compiled`` keeps the grader's modes out of Dynamo."""
    # Inductor writes its cache where this names, else sets it in os.environ for good: every grading
    # this test process starts later would carry it, and the session's fork servers, keyed by their
    # environment, would be started again for them.
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
    torch.manual_seed(0)
    plain = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
    model = torch.compile(plain)
    x = torch.randn(4, 8)
    expected = plain(x).detach()
    for kind in ("cuda", "mps", "cuda"):
        with grader.emulated(kind) as gpu:
            model.to(kind)
            out = model(x.to(kind))
            assert out.device.type == kind and gpu.max_memory_allocated() > 0
            torch.testing.assert_close(out.cpu(), expected)
        model.to("cpu")


def test_data_parallel_on_one_stand_in_gpu_runs_as_on_one_gpu() -> None:
    """``nn.DataParallel(model)`` unguarded by ``device_count() > 1`` (older tutorials): on one GPU its
    forward scatters the batch with torch.cuda.comm, whose C layer a CPU build lacks ("module 'torch._C'
    has no attribute '_scatter'"); the stand-in's is copies between its devices, as any ``.to()``."""
    import torch.cuda.comm

    torch.manual_seed(0)
    plain = torch.nn.Linear(8, 2)
    x = torch.randn(6, 8)
    expected = plain(x).detach()
    with grader.emulated("cuda") as gpu:
        model = torch.nn.DataParallel(plain.to("cuda"))
        out = model(x.to("cuda"))
        out.sum().backward()
        assert out.device == torch.device("cuda", 0) and plain.weight.grad is not None and plain.weight.grad.is_cuda
        torch.testing.assert_close(out.cpu(), expected)
        parts = torch.cuda.comm.scatter(x, devices=[0], dim=0)
        assert [p.device for p in parts] == [torch.device("cuda", 0)] and gpu.max_memory_allocated() > 0
        assert torch.cuda.comm.gather([x.to("cuda")], dim=0, destination="cpu").device.type == "cpu"
        assert [t.device for t in torch.cuda.comm.broadcast(x, devices=[0])] == [torch.device("cuda", 0)]
    plain.to("cpu")
