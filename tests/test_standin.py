"""The stand-in accelerators answer every form real code uses, as the real device would.

CUDA's and MPS's stand-ins on this CPU machine: keyword and positional ``.to()``, ``.cuda()``,
``non_blocking`` copies, the ``torch.cuda`` / ``torch.mps`` / ``torch.accelerator`` APIs, the
default device; and what differs on an Apple GPU (no float64, its own out-of-memory error,
``torch.cuda`` as a Mac has it). Each behaviour is written as learner code would write it.
"""

from __future__ import annotations

import ast
import importlib.util
import inspect
import io
import sys
import textwrap
import warnings
from pathlib import Path

import pytest
import torch
from torch import nn

from grader.checks.ex2_timing.common import SMALLER, measured_interval
from grader.emulation import autocast, surface
from grader.emulation.patching import LearnerCode
from grader.emulation.standin import StandIn
from grader.reference.device import MPS_FLOAT64, NO_CUDA, CostModel
from tests.conftest import ROOT


@pytest.mark.parametrize("kind", ["cuda", "mps"])
def test_every_way_of_moving_a_model_or_a_tensor(kind: str) -> None:
    with StandIn(kind) as s:  # type: ignore[arg-type]
        device = s.device
        forms = {
            "positional": nn.Linear(3, 2).to(device),
            "keyword": nn.Linear(3, 2).to(device=device),  # timm's idiom
            "string": nn.Linear(3, 2).to(kind),
            "keyword dtype": nn.Linear(3, 2).to(device=device, dtype=torch.float32),
        }
        for form, model in forms.items():
            assert next(model.parameters()).device.type == kind, form
        x = torch.ones(3)
        assert x.to(device, non_blocking=True).device.type == kind
        assert x.to(device=device).device.type == kind and x.to(kind).is_cpu is False
        assert torch.zeros(2, device=device).device.type == kind
        assert torch.zeros(2, device=device).cpu().device.type == "cpu"
        assert torch.zeros(2, device=device).to("cpu").device.type == "cpu"
        assert getattr(torch.zeros(2, device=device), f"is_{kind}")


def test_cuda_call_forms_on_the_cuda_stand_in() -> None:
    with StandIn("cuda", virtual_clock=True) as s:
        assert torch.ones(2).cuda().device == torch.device("cuda", 0)
        assert torch.cuda.current_device() == 0 and torch.cuda.device_count() == 1
        torch.cuda.set_device(0)
        props = torch.cuda.get_device_properties(0)
        assert props.total_memory > 0 and (props.major, props.minor) == torch.cuda.get_device_capability()
        free, total = torch.cuda.mem_get_info()
        assert 0 < free <= total
        big = torch.zeros(1024, 1024, device="cuda")
        assert torch.cuda.memory_allocated() >= big.numel() * 4
        assert torch.cuda.max_memory_allocated() >= torch.cuda.memory_allocated()
        assert torch.cuda.memory_reserved() >= torch.cuda.memory_allocated()
        del big
        torch.cuda.reset_peak_memory_stats()
        assert torch.cuda.max_memory_allocated() == torch.cuda.memory_allocated()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a = torch.randn(256, 256, device="cuda")
        start.record()
        a @ a
        end.record()
        end.synchronize()
        assert start.elapsed_time(end) > 0
        assert torch.accelerator.current_accelerator() == torch.device("cuda")
        torch.accelerator.synchronize()
        torch.cuda.current_stream().synchronize()
        assert not torch.backends.mps.is_available()
        assert [e.kind for e in s.events].count("sync") >= 3


def test_the_legacy_tensor_types_build_and_recognise_the_device_s_tensors() -> None:
    """``torch.cuda.FloatTensor`` and its kind (old tutorials: ``x.type(torch.cuda.FloatTensor)``,
    ``isinstance(x, torch.cuda.FloatTensor)``): made on the device, recognised there by dtype. The types are
    the process's, as a CUDA build's are: one held from an outer session answers for the device open now,
    and for none once the last session closed."""
    cpu_float = torch.cuda.FloatTensor  # the CPU build's own
    with StandIn("cuda") as outer:
        held = torch.cuda.FloatTensor
        x = torch.cuda.FloatTensor(2, 3)
        assert x.shape == (2, 3) and x.dtype == torch.float32 and x.is_cuda and outer.on_device(x)
        assert torch.cuda.HalfTensor([1.0, 2.0]).dtype == torch.float16
        assert torch.cuda.LongTensor(torch.Size([4])).shape == (4,)
        assert isinstance(x, torch.cuda.FloatTensor) and not isinstance(x, torch.cuda.HalfTensor)
        assert not isinstance(torch.zeros(2), torch.cuda.FloatTensor)  # a CPU tensor
        assert repr(torch.cuda.FloatTensor) == "<class 'torch.cuda.FloatTensor'>"
        with StandIn("cuda") as inner:
            y = torch.cuda.FloatTensor(1)
            assert inner.on_device(y) and isinstance(y, held) and not isinstance(x, held)  # the device open now
        assert isinstance(x, held) and not isinstance(y, held)  # the outer's again
    assert torch.cuda.FloatTensor is cpu_float and not isinstance(x, held)


def test_the_memory_api_asked_about_a_gpu_the_machine_lacks_raises_as_cuda_does() -> None:
    """One GPU: ``torch.cuda.memory_allocated(1)`` is CUDA's caching allocator's "Invalid device
    argument 1", ``mem_get_info(1)`` the runtime's invalid ordinal (the stand-in answered device 0's)."""
    with StandIn("cuda") as s:
        for asked in (0, "cuda:0", s.device, None):
            assert torch.cuda.memory_allocated(asked) == 0
            torch.cuda.reset_peak_memory_stats(asked)
        for wrong in (1, "cuda:1"):
            for api in (torch.cuda.memory_allocated, torch.cuda.max_memory_allocated, torch.cuda.memory_stats,
                        torch.cuda.reset_peak_memory_stats):
                with pytest.raises(RuntimeError, match="Invalid device argument 1"):
                    api(wrong)
            with pytest.raises(RuntimeError, match="invalid device ordinal"):
                torch.cuda.mem_get_info(wrong)


def test_the_mps_stand_in_is_an_apple_gpu() -> None:
    with StandIn("mps", budget_bytes=8 * 2**20) as s:
        assert torch.backends.mps.is_available() and not torch.cuda.is_available()
        assert torch.accelerator.current_accelerator() == torch.device("mps")
        x = torch.arange(4.0, device="mps")
        assert x.device == torch.device("mps", 0) and x.is_mps
        torch.mps.synchronize()
        torch.mps.empty_cache()
        assert torch.mps.current_allocated_memory() >= 16
        # What a Mac's PyTorch says, to code that reaches for CUDA or float64:
        for call in (torch.cuda.synchronize, torch.cuda.get_device_name, lambda: torch.ones(2).cuda()):
            with pytest.raises(AssertionError, match=NO_CUDA):
                call()
        with pytest.raises(TypeError, match="float64"):
            torch.zeros(2, dtype=torch.float64).to("mps")
        with pytest.raises(TypeError, match="float64"):
            torch.zeros(2, device="mps", dtype=torch.float64)
        assert MPS_FLOAT64.startswith("Cannot convert a MPS Tensor to float64")
        # Out of memory on MPS is a plain RuntimeError, not torch.OutOfMemoryError.
        with pytest.raises(RuntimeError, match="MPS backend out of memory") as raised:
            [torch.empty(2**20, device="mps") for _ in range(10)]
        assert not isinstance(raised.value, torch.OutOfMemoryError)
        assert [e.kind for e in s.events].count("sync") == 1


def test_a_non_blocking_copy_to_the_host_lands_at_the_next_synchronize() -> None:
    with StandIn("cuda"):
        y = torch.arange(1.0, 5.0, device="cuda") * 2
        early = y.to("cpu", non_blocking=True)
        assert early.tolist() == [0.0, 0.0, 0.0, 0.0]  # read before the copy arrived
        torch.cuda.synchronize()
        assert early.tolist() == [2.0, 4.0, 6.0, 8.0]
        assert y.to("cpu").tolist() == [2.0, 4.0, 6.0, 8.0]  # a blocking copy is there at once
        assert y.cpu().tolist() == [2.0, 4.0, 6.0, 8.0]


def test_pinned_memory_and_non_blocking_uploads() -> None:
    """The tutorial's idiom: pin the host tensor, copy it up without blocking."""
    with StandIn("cuda"):
        x = torch.arange(4.0)
        pinned = x.pin_memory()
        assert pinned.is_pinned() and not x.is_pinned()
        assert torch.zeros(2, pin_memory=True).is_pinned()
        up = pinned.to("cuda", non_blocking=True)
        assert up.is_cuda and (up * 2).cpu().tolist() == [0.0, 2.0, 4.0, 6.0]


@pytest.mark.parametrize("kind", ["cuda", "mps"])
def test_checkpoints_save_and_load_across_devices_as_on_the_device(kind: str, tmp_path: Path) -> None:
    """The lesson's checkpoint section and PyTorch's "Saving and loading models across devices"
    tutorial, on each stand-in. Before grader/emulation/storages.py, every ``map_location`` onto the
    device raised "Storage device not recognized", and a device tensor saved and loaded back came back
    on the CPU (``torch.save`` tagged its storage "cpu")."""
    with StandIn(kind) as s:  # type: ignore[arg-type]
        device = s.device
        model = nn.Linear(3, 2).to(device)
        torch.save(model.state_dict(), tmp_path / "on_device.pt")  # save on GPU
        torch.save(nn.Linear(3, 2).state_dict(), tmp_path / "on_cpu.pt")  # save on CPU
        loaded = {
            "save on GPU, load on GPU": torch.load(tmp_path / "on_device.pt"),
            "save on CPU, load on GPU (string)": torch.load(tmp_path / "on_cpu.pt", map_location=f"{kind}:0"),
            "save on CPU, load on GPU (device)": torch.load(tmp_path / "on_cpu.pt", map_location=device),
            "weights_only, mmap": torch.load(tmp_path / "on_cpu.pt", map_location=kind, weights_only=True, mmap=True),
        }
        for how, state in loaded.items():
            assert state["weight"].device == torch.device(kind, 0), how
            copy = nn.Linear(3, 2).to(device)
            copy.load_state_dict(state)
            assert copy(torch.ones(1, 3, device=device)).device.type == kind, how  # no mixing error
        back = torch.load(tmp_path / "on_device.pt")["weight"]
        assert torch.equal(back.cpu(), model.weight.detach().cpu())
        on_cpu = torch.load(tmp_path / "on_device.pt", map_location="cpu")["weight"]  # the lesson's portable load
        assert on_cpu.device.type == "cpu" and on_cpu.untyped_storage().device.type == "cpu"
        # a checkpoint in memory (a back-off's snapshot of its model); Lightning's restore keeps the CPU's
        buffer = io.BytesIO()
        torch.save({"w": torch.arange(4.0, device=device)}, buffer)
        for where, expected in ((None, kind), (device, kind), (lambda storage, location: storage, "cpu")):
            buffer.seek(0)
            assert torch.load(buffer, map_location=where)["w"].device.type == expected, where
        # the storage layer itself
        storage = torch.ones(2, device=device).untyped_storage()
        assert storage.device == torch.device(kind, 0) and storage.is_cuda == (kind == "cuda")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "TypedStorage is deprecated", once a process
            assert torch.ones(2, device=device).storage().device.type == kind
        assert torch.ones(2).untyped_storage().device.type == "cpu"
        assert torch.UntypedStorage(8, device=kind).device.type == kind
        assert storage.cpu().device.type == "cpu" and storage.clone().device.type == kind
        assert getattr(torch.ones(2).untyped_storage(), kind)().device.type == kind
        assert torch.UntypedStorage(8, device="meta").device.type == "meta"
    assert torch.ones(2).untyped_storage().device.type == "cpu"  # put back when the session ends
    with pytest.raises(RuntimeError, match="not recognized"):
        torch.UntypedStorage(8, device=kind)


@pytest.mark.parametrize("kind", ["cuda", "mps"])
def test_a_generator_belongs_to_a_device_as_pytorch_checks_it(kind: str) -> None:
    """``torch.Generator(device="cuda")`` (diffusers' seeded sampling) is refused by a CPU build, and
    PyTorch's C++ checks a generator's device against the op's: the error public projects meet
    ("Expected a 'cuda' device type for generator but found 'cpu'": a DataLoader's shuffle under
    ``torch.set_default_device("cuda")``, pytorch/pytorch#58545; ``random_split`` given a GPU
    generator, hcnoh/knowledge-tracing-collection-pytorch#1). Both held on each stand-in (before:
    the first raised, the second passed silently: the stand-in's device ops are CPU ops)."""
    with StandIn(kind) as s:  # type: ignore[arg-type]
        device = s.device
        seeded = torch.Generator(device=device).manual_seed(7)
        assert isinstance(seeded, torch.Generator) and seeded.device == torch.device(kind, 0)
        assert torch.Generator.initial_seed(seeded) == 7  # the class's unbound methods are PyTorch's
        first = torch.randn(2, 3, generator=seeded, device=device)
        again = torch.randn(2, 3, generator=torch.Generator(device=kind).manual_seed(7), device=device)
        assert first.device.type == kind and torch.equal(first.cpu(), again.cpu())
        assert torch.empty(4, device=device).uniform_(generator=seeded).device.type == kind
        assert torch.Generator().device.type == "cpu" and torch.randperm(4, generator=torch.Generator()).is_cpu
        with pytest.raises(RuntimeError, match=f"Expected a '{kind}' device type for generator but found 'cpu'"):
            torch.randn(3, generator=torch.Generator(), device=device)
        with pytest.raises(RuntimeError, match=f"Expected a 'cpu' device type for generator but found '{kind}'"):
            torch.randperm(5, generator=seeded)
        with pytest.raises(RuntimeError, match=f"Expected a 'cpu' device type for generator but found '{kind}'"):
            torch.utils.data.random_split(range(10), [5, 5], generator=seeded)
        torch.set_default_device(device)
        try:
            loader = torch.utils.data.DataLoader(torch.arange(8.0), batch_size=4, shuffle=True)
            with pytest.raises(RuntimeError, match=f"Expected a '{kind}' device type for generator but found 'cpu'"):
                next(iter(loader))
        finally:
            torch.set_default_device(None)
        if kind == "cuda":  # the default generator is the device's, as torch.cuda.manual_seed seeds it
            assert torch.cuda.default_generators[0].device == torch.device("cuda", 0)
            assert torch.rand(2, device=device, generator=torch.cuda.default_generators[0]).is_cuda
    assert torch.Generator is torch._C.Generator  # put back when the session ends


@pytest.mark.parametrize("budget", [None, 64 * 1024 * 1024])
@pytest.mark.parametrize("kind", ["cuda", "mps"])
def test_an_allocation_the_host_cannot_make_is_the_devices_out_of_memory(kind: str, budget: int | None) -> None:
    """One device allocation larger than this machine's memory (4 TB): the CPU allocator refused it
    in its own words ("DefaultCPUAllocator: can't allocate memory"), a RuntimeError that
    ``except torch.OutOfMemoryError`` does not catch, before the stand-in's budget was ever asked.
    A GPU says it is out of memory; so does its stand-in now, whatever its budget."""
    with StandIn(kind, budget_bytes=budget) as s:  # type: ignore[arg-type]
        expected = torch.OutOfMemoryError if kind == "cuda" else RuntimeError
        with pytest.raises(expected, match="out of memory") as caught:
            torch.empty(10**12, device=s.device)
        assert "can't allocate memory" not in str(caught.value)
        if kind == "cuda":
            assert isinstance(caught.value, torch.cuda.OutOfMemoryError)
        assert s.ooms == 1
        assert torch.ones(4, device=s.device).sum().item() == 4.0  # and the device goes on
    with pytest.raises(RuntimeError, match="can't allocate memory"):  # the CPU's own words off the device
        torch.empty(10**12)


@pytest.mark.parametrize("kind", ["cuda", "mps"])
def test_more_than_the_devices_memory_is_out_of_memory_without_a_budget(kind: str) -> None:
    """The stand-in says it has 16 GiB (``get_device_properties().total_memory``). With no check's budget
    (a notebook's demo cell, a self-check on a laptop, where no limit of the grader's makes the host
    refuse first) a 17 GiB allocation, which this host maps lazily, was made: a GPU of 16 GiB raises."""
    seventeen_gib = 17 * 1024**3
    with StandIn(kind) as s:  # type: ignore[arg-type]
        kept = torch.empty(1024**3, dtype=torch.uint8, device=s.device)  # 1 GiB fits
        expected = torch.OutOfMemoryError if kind == "cuda" else RuntimeError
        with pytest.raises(expected, match="out of memory") as caught:
            torch.empty(seventeen_gib, dtype=torch.uint8, device=s.device)
        assert "16384.00 M" in str(caught.value)  # the capacity it reports, in its own unit
        assert s.ooms == 1 and s.live_bytes() == kept.nbytes  # the refused one holds nothing
        del kept
        assert torch.ones(4, device=s.device).sum().item() == 4.0  # and the device goes on


@pytest.mark.parametrize(("kind", "lifts"), [("cuda", 1.0), ("mps", 0.0)])
def test_a_memory_fraction_the_learner_sets_caps_the_device(kind: str, lifts: float) -> None:
    """``set_per_process_memory_fraction`` (a smaller GPU simulated on a big one, a process sharing a
    GPU: real projects' idiom) caps what PyTorch's allocator gives: past it, out of memory. The
    stand-in kept the fraction and allocated past it. CUDA's cap is a fraction of the whole memory and
    1.0 lifts it; MPS's of the recommended working set, 0 lifts it."""
    module = getattr(torch, kind)
    with StandIn(kind) as s:  # type: ignore[arg-type]
        module.set_per_process_memory_fraction(0.25)  # 4 GiB of 16
        kept = torch.empty(3 * 1024**3, dtype=torch.uint8, device=s.device)
        expected = torch.OutOfMemoryError if kind == "cuda" else RuntimeError
        with pytest.raises(expected, match="out of memory") as caught:
            torch.empty(2 * 1024**3, dtype=torch.uint8, device=s.device)
        assert ("4096.00 MiB allowed" if kind == "cuda" else "max allowed: 4096.00 MB") in str(caught.value)
        module.set_per_process_memory_fraction(lifts)
        more = torch.empty(2 * 1024**3, dtype=torch.uint8, device=s.device)
        assert s.live_bytes() == kept.nbytes + more.nbytes and s.ooms == 1


def test_a_prefetchers_side_stream_copy_records_its_stream() -> None:
    """NVIDIA Apex's data_prefetcher (and timm's, DALI's loaders): the next batch is copied on a side
    stream and ``record_stream`` tells the caching allocator the main stream uses it. PyTorch's
    argument parser took only its C ``torch.Stream``: "unknown parameter type" on the stand-in."""
    with StandIn("cuda"):
        host = torch.arange(12.0).reshape(3, 4).pin_memory()
        side = torch.cuda.Stream()
        with torch.cuda.stream(side):
            batch = host.cuda(non_blocking=True).float()
        torch.cuda.current_stream().wait_stream(side)
        batch.record_stream(torch.cuda.current_stream())
        assert torch.equal(batch.cpu(), host.clone())
        with pytest.raises(NotImplementedError, match="'CPU' backend"):  # a CUDA kernel only, as in ATen
            host.record_stream(torch.cuda.current_stream())
    assert "record_stream" not in vars(torch.Tensor)  # the session put back what torch.Tensor inherits


@pytest.mark.parametrize("kind", ["cuda", "mps"])
def test_the_device_generic_event_and_stream_are_the_devices(kind: str) -> None:
    """``torch.Event(enable_timing=True)`` after ``torch.accelerator.synchronize()`` (device-generic
    timing, torch 2.6+): this CPU build's C class makes events for no device ("cpu backend doesn't
    support events") and raised for every timing written so (the correct style
    tests/submissions/idioms/correct/torch_accelerator_events lost 14 of ex2's 20 points)."""
    with StandIn(kind) as s:  # type: ignore[arg-type]
        a, b = torch.Event(enable_timing=True), torch.Event(kind, enable_timing=True)
        assert a.device == b.device == torch.device(kind, 0) and isinstance(a, torch.Event)
        a.record()
        torch.ones(256, 256, device=s.device) @ torch.ones(256, 256, device=s.device)
        b.record()
        torch.accelerator.synchronize()
        assert a.elapsed_time(b) > 0  # milliseconds of the device's timeline
        with pytest.raises(RuntimeError, match="cpu backend doesn't support events"):
            torch.Event("cpu")
        # every stream of the device is a torch.Stream, as in a GPU build
        assert isinstance(torch.accelerator.current_stream(), torch.Stream)
        made = torch.Stream(kind)
        assert isinstance(made, torch.Stream) and made.device == torch.device(kind, 0)
        made.synchronize()
        if kind == "cuda":
            assert isinstance(made, torch.cuda.Stream) and isinstance(torch.cuda.current_stream(), torch.Stream)
    assert torch.Event is torch._C.Event and torch.Stream is torch._C.Stream  # put back


def test_cudnn_is_there_on_the_cuda_stand_in() -> None:
    """``torch.backends.cudnn.version()`` (in many "check your GPU" cells) read the module's own
    ``_init``, which the stand-in had set on the wrapper module around it: None on the stand-in GPU."""
    with StandIn("cuda"):
        assert isinstance(torch.backends.cudnn.version(), int) and torch.backends.cudnn.is_available()
    assert torch.backends.cudnn.version() is None  # this CPU build's, once the session ends


def test_a_session_ends_cleanly_when_the_learners_code_took_the_storage_patches_away() -> None:
    """The learner's code runs in the same process: deleting what the session set on
    torch.UntypedStorage must not make the session's end raise (the grader's error, not the learner's)."""
    with StandIn("cuda"):
        del torch.UntypedStorage.device
        del torch.UntypedStorage.__new__
    assert torch.ones(2).untyped_storage().device.type == "cpu"
    assert "device" not in torch.UntypedStorage.__dict__ and "__new__" not in torch.UntypedStorage.__dict__


def test_a_load_onto_the_device_is_an_upload_that_counts_toward_its_memory() -> None:
    """What torch.load puts on the device is an allocation there (the budget's out-of-memory
    included) and a copy from the host, as on a GPU."""
    buffer = io.BytesIO()
    torch.save(torch.zeros(256, 1024), buffer)  # 1 MiB
    with StandIn("cuda", budget_bytes=3 * 1024 * 1024) as s:
        before = torch.cuda.memory_allocated()
        buffer.seek(0)
        held = [torch.load(buffer, map_location="cuda")]
        assert torch.cuda.memory_allocated() - before == 1024 * 1024
        assert "h2d" in [e.kind for e in s.events]
        with pytest.raises(torch.OutOfMemoryError):
            for _ in range(4):
                buffer.seek(0)
                held.append(torch.load(buffer, map_location="cuda"))
        del held


@pytest.mark.parametrize("kind", ["cuda", "mps"])
def test_pinning_a_tensor_already_on_the_device_raises_as_aten_does(kind: str) -> None:
    """"cannot pin 'torch.cuda.FloatTensor' only dense CPU tensors can be pinned": a dataset already
    on the GPU behind ``DataLoader(pin_memory=True)`` (unit8co/darts#436, DavidWBressler/GCNN#2). The
    stand-in pinned a copy and went on: the mistake passed silently."""
    with StandIn(kind) as s:  # type: ignore[arg-type]
        with pytest.raises(RuntimeError, match=f"cannot pin 'torch.{kind}.FloatTensor' only dense CPU tensors"):
            torch.ones(2, device=s.device).pin_memory()
        if kind == "cuda":  # (a Mac's DataLoader does not pin: it warns and goes on)
            loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.ones(8, 3, device=s.device)),
                                                 batch_size=4, pin_memory=True)
            with pytest.raises(RuntimeError, match="only dense CPU tensors can be pinned"):
                next(iter(loader))
        assert torch.ones(2).pin_memory().is_pinned()  # the CPU's own tensors still pin


@pytest.mark.parametrize("kind", ["cuda", "mps"])
def test_the_meta_device_and_deferred_initialization(kind: str) -> None:
    """Every build has the meta device (shapes, no data): a model built there and materialized on the
    GPU with ``to_empty`` (PyTorch's deferred-initialization recipe). The stand-in refused it ("PyTorch
    is not linked with support for meta devices") and sent ``.to("meta")`` to the CPU."""
    with StandIn(kind) as s:  # type: ignore[arg-type]
        model = nn.Linear(3, 2, device="meta")
        assert model.weight.is_meta and torch.empty(3, device="meta").is_meta
        assert torch.tensor([1.0, 2.0], device="meta").is_meta
        model.to_empty(device=s.device)
        nn.init.ones_(model.weight)
        nn.init.zeros_(model.bias)
        assert model.weight.device.type == kind
        assert model(torch.ones(1, 3, device=s.device)).cpu().tolist() == [[3.0, 3.0]]
        events = len(s.events)
        shapes = torch.ones(2, 4, device=s.device).to("meta")
        assert shapes.is_meta and shapes.shape == (2, 4) and len(s.events) == events  # no copy, no wait


@pytest.mark.parametrize("kind", ["cuda", "mps"])
def test_a_view_is_where_its_tensor_is_and_allocates_nothing(kind: str) -> None:
    """Views (detach, t, view, split, a sparse tensor's values: ``StandIn._view``, a quarter of a training's
    ops) are on the device exactly when their tensor is, count no memory and launch nothing; a view as
    float64 is refused on MPS as a float64 tensor is."""
    with StandIn(kind) as s:  # type: ignore[arg-type]
        x = torch.ones(4, 2, device=s.device)
        live, events, drains = s.live_bytes(), len(s.events), s.timeline.device_free
        views = [x.detach(), x.t(), x.view(8), x[1:], *x.split(2), x.unsqueeze(0), x.expand(3, 4, 2)]
        assert all(v.device.type == kind for v in views)
        assert (s.live_bytes(), len(s.events), s.timeline.device_free) == (live, events, drains)
        assert torch.ones(3).view(3, 1).device.type == "cpu" and torch.ones(3).detach().is_cpu
        sparse = torch.ones(2, 2).to_sparse().to(s.device).coalesce()
        live = s.live_bytes()
        assert sparse.values().device.type == kind  # (its indices read "cpu": held by its values alone)
        assert s.live_bytes() == live
        if kind == "mps":
            with pytest.raises(TypeError, match="MPS"):
                x.view(torch.float64)
        else:
            assert x.view(torch.float64).device.type == "cuda"


@pytest.mark.parametrize("kind", ["cuda", "mps"])
def test_a_model_moved_inside_inference_mode(kind: str) -> None:
    """``nn.Module.to`` asks ``torch._has_compatible_shallow_copy_type(param, moved)``; in inference
    mode the question reaches the dispatcher, where the stand-in took it for mixing devices. Dense CPU
    and GPU tensors are compatible: the parameters are updated in place, as on a GPU."""
    with StandIn(kind) as s, torch.inference_mode():  # type: ignore[arg-type]
        model = nn.Linear(3, 2)
        weight = model.weight
        model.to(s.device)
        assert model.weight is weight and weight.device.type == kind
        assert model(torch.ones(1, 3, device=s.device)).device.type == kind
        assert torch.is_same_size(torch.ones(2), torch.ones(2, device=s.device))


def test_the_default_device() -> None:
    with StandIn("cuda"):
        torch.set_default_device("cuda")
        assert torch.get_default_device() == torch.device("cuda", 0)
        assert torch.zeros(2).device.type == "cuda" and torch.randn(2, 2).is_cuda
        torch.set_default_device(None)
        assert torch.zeros(2).device.type == "cpu"
    assert torch.get_default_device() == torch.device("cpu")


def _default_device_context_is_on_the_stack() -> bool:
    """What torch's ``set_default_device`` relies on: the context its record names is the mode at the bottom."""
    from torch.overrides import _get_current_function_mode_stack  # noqa: PLC0415 - torch's private helpers
    from torch.utils._device import DeviceContext  # noqa: PLC0415

    recorded = getattr(torch._GLOBAL_DEVICE_CONTEXT, "device_context", None)
    stack = _get_current_function_mode_stack()
    if recorded is None:
        return not any(isinstance(mode, DeviceContext) for mode in stack)
    return bool(stack) and stack[0] is recorded


def test_a_default_device_set_in_every_run_and_never_unset() -> None:
    """``torch.set_default_device(device)`` at the top of a function, never unset (a script's "everything on
    the GPU from here on", yashbelhe/ASD python/utils/device.py), run on the CPU and then on each stand-in,
    as a check runs it: each call replaces the default before it, as on a GPU. The session put back torch's
    record of the CPU run's default without its context, which the next call exits: the second session's call
    raised "Expected a DeviceContext at the bottom of the mode stack" (tests/submissions/idioms/correct/
    pytorch_set_default_device lost 12 points of ex5)."""
    try:
        torch.set_default_device(torch.device("cpu"))  # the CPU run
        for kind in ("cuda", "mps", "cuda"):
            with StandIn(kind) as s:  # type: ignore[arg-type]
                torch.set_default_device(s.device)
                assert torch.zeros(2).device.type == kind and torch.get_default_device().type == kind
                assert _default_device_context_is_on_the_stack()
            assert torch.get_default_device() == torch.device("cpu")  # the CPU run's, as before the session
            assert _default_device_context_is_on_the_stack()
            assert torch.zeros(2).device.type == "cpu"
        torch.set_default_device(torch.device("cpu"))  # and the CPU run's next call
        assert _default_device_context_is_on_the_stack()
    finally:
        torch.set_default_device(None)
    assert torch.get_default_device() == torch.device("cpu") and _default_device_context_is_on_the_stack()


@pytest.mark.filterwarnings("ignore:torch.set_default_tensor_type\\(\\) is deprecated")
def test_the_legacy_default_tensor_type() -> None:
    """``torch.set_default_tensor_type("torch.cuda.FloatTensor")`` (deprecated since PyTorch 2.1, in old scripts
    and tutorials): on a GPU its factories build there, in its dtype; this CPU build refused the type ("invalid
    type object"). A CPU type brings them back; an integer type is PyTorch's own TypeError; the session ends
    with it, as with ``torch.set_default_device``; a Mac's build refuses CUDA's types as this one does."""
    try:
        with StandIn("cuda"):
            torch.set_default_tensor_type("torch.cuda.DoubleTensor")
            made = torch.zeros(2)
            assert made.is_cuda and made.dtype == torch.float64
            assert torch.get_default_device() == torch.device("cuda", 0)
            torch.set_default_tensor_type(torch.cuda.FloatTensor)
            assert torch.ones(1).type() == "torch.cuda.FloatTensor"
            with pytest.raises(TypeError, match="only floating-point types"):
                torch.set_default_tensor_type(torch.cuda.LongTensor)
            torch.set_default_tensor_type(torch.FloatTensor)
            assert torch.zeros(2).device.type == "cpu" and _default_device_context_is_on_the_stack()
            torch.set_default_tensor_type("torch.cuda.FloatTensor")  # and left so
        assert torch.zeros(2).device.type == "cpu" and _default_device_context_is_on_the_stack()
        with StandIn("mps"), pytest.raises(TypeError):
            torch.set_default_tensor_type("torch.cuda.FloatTensor")
    finally:
        torch.set_default_tensor_type(torch.FloatTensor)
    assert torch.get_default_dtype() == torch.float32


@pytest.mark.parametrize("kind", ["cuda", "mps"])
def test_mixing_devices_raises_pytorchs_own_error(kind: str) -> None:
    with StandIn(kind) as s, pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):  # type: ignore[arg-type]
        torch.ones(3, device=s.device) + torch.ones(3)


def test_the_interval_a_returned_time_measured() -> None:
    """timm's loop: each iteration timed, the warm-up iterations thrown away; the number is the
    mean of the rest, and its interval starts after the warm-up."""
    n, warmup, repeats = 256, 2, 5
    with StandIn("cuda", virtual_clock=True) as s:
        import time

        a = torch.randn(n, n, device="cuda")
        times = []
        for _ in range(warmup + repeats):
            t0 = time.perf_counter()
            a @ a
            torch.cuda.synchronize()
            times.append(time.perf_counter() - t0)
        seconds = sum(times[warmup:]) / repeats
    interval = measured_interval(s.events, seconds, repeats, real=False)
    assert interval is not None and interval.found and interval.unit == 1.0
    matmuls = [i for i, e in enumerate(s.events) if e.kind == "matmul"]
    # After the first matmul every iteration takes the same virtual time, so the measured five are
    # some five after it: the interval never holds the first (slow) one, the warm-up.
    assert matmuls[0] < interval.start
    assert sum(1 for i in matmuls if interval.start < i < interval.stop) == repeats
    # The same number in milliseconds is recognised as such.
    ms = measured_interval(s.events, seconds * 1000, repeats, real=False)
    assert ms is not None and ms.unit == 1e3


def test_a_function_held_anywhere_reaches_the_stand_in() -> None:
    """transformers' dispatch tables hold torch.cuda.synchronize in a dict; a partial or a default
    argument holds it too: each must call the stand-in's, and the real one once it is gone."""
    import functools

    table = {"cuda": torch.cuda.synchronize}
    later = functools.partial(torch.cuda.synchronize)

    def sync(fn=torch.cuda.synchronize) -> None:  # type: ignore[no-untyped-def]
        fn()

    with StandIn("cuda") as s:
        table["cuda"]()
        later()
        sync()
        assert [e.kind for e in s.events] == ["sync", "sync", "sync"]
    with pytest.raises(AssertionError, match=NO_CUDA):  # this CPU build's own, put back
        table["cuda"]()


@pytest.mark.parametrize("kind", ["cuda", "mps"])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_16_bit_products_are_computed_as_a_gpu_computes_them(kind: str, dtype: torch.dtype) -> None:
    """Under autocast, a product on a stand-in is the float32 product of the (exactly widened) 16-bit
    operands, rounded once: what cuBLAS's float32 accumulation gives, within one 16-bit rounding of
    this CPU's own (30 times slower) 16-bit kernels; forward and backward, every product form."""
    gen = torch.Generator().manual_seed(3)
    a, b, bias = torch.randn(64, 48, generator=gen), torch.randn(48, 32, generator=gen), torch.randn(32, generator=gen)
    batched = torch.randn(4, 16, 8, generator=gen)
    with StandIn(kind) as s:  # type: ignore[arg-type]
        x, w, c = a.to(s.device).requires_grad_(), b.to(s.device), bias.to(s.device)
        with torch.autocast(kind, dtype=dtype):
            products = {"mm": x @ w, "addmm": torch.addmm(c, x, w), "bmm": torch.bmm(batched.to(s.device),
                                                                                    batched.to(s.device).mT)}
        products["mm"].float().sum().backward()
        got = {name: p.cpu() for name, p in products.items()}
        grad = x.grad.cpu()  # type: ignore[union-attr]
    wide = {"mm": a.to(dtype).float() @ b.to(dtype).float(),
            "addmm": torch.addmm(bias.to(dtype).float(), a.to(dtype).float(), b.to(dtype).float()),
            "bmm": torch.bmm(batched.to(dtype).float(), batched.to(dtype).float().mT)}
    native = {"mm": a.to(dtype) @ b.to(dtype), "addmm": torch.addmm(bias.to(dtype), a.to(dtype), b.to(dtype)),
              "bmm": torch.bmm(batched.to(dtype), batched.to(dtype).mT)}
    for name, product in got.items():
        assert product.dtype == dtype, name
        assert torch.equal(product, wide[name].to(dtype)), name
        ulp = torch.finfo(dtype).eps * product.float().abs().clamp(min=1.0)
        assert ((product.float() - native[name].float()).abs() <= ulp).all(), name
    assert grad.dtype == torch.float32 and torch.allclose(grad, torch.ones(64, 32) @ b.T, rtol=1e-2, atol=1e-2)


def test_autocast_kernels_are_registered_once_a_process_and_reached_only_from_a_stand_in_s_autocast() -> None:
    """The stand-ins' autocast kernels sit on a spare autocast key, registered once (grader/emulation/autocast.py
    ``kernels``): no session registers or removes a kernel, the key is in a thread's dispatch keys only while a
    stand-in's autocast is on, and the CPU's own autocast, on its own key, keeps the CPU's policy before,
    beside and after — softmax, which CUDA's autocast runs in float32 and the CPU's leaves in the low precision."""
    registered = autocast.kernels()
    key = registered.name
    own = set(torch._C._dispatch_get_registrations_for_dispatch_key(key))
    cpu_key = set(torch._C._dispatch_get_registrations_for_dispatch_key("AutocastCPU"))
    assert key in autocast.SPARE_KEYS and "aten::softmax.int" in own and len(own) > 150

    def included() -> bool:
        return bool(torch._C._dispatch_tls_is_dispatch_key_included(registered.key))

    def softmax_of_a_product(device: torch.device, kind: str, *, key_in: bool) -> torch.dtype:
        a = torch.randn(4, 4, device=device)
        with torch.autocast(kind, dtype=torch.bfloat16):
            product = a @ a
            assert product.dtype == torch.bfloat16 and included() == key_in
            return torch.softmax(product, dim=-1).dtype

    cpu = torch.device("cpu")
    assert softmax_of_a_product(cpu, "cpu", key_in=False) == torch.bfloat16  # the CPU's own kernels
    for _ in range(2):
        with StandIn("cuda") as s:
            assert not included()
            assert softmax_of_a_product(s.device, "cuda", key_in=True) == torch.float32  # CUDA's policy, on the device
            assert softmax_of_a_product(cpu, "cpu", key_in=True) == torch.bfloat16  # the CPU's, on CPU tensors beside
            assert not included() and registered.active is not None
        assert not included() and registered.active is None
    assert softmax_of_a_product(cpu, "cpu", key_in=False) == torch.bfloat16
    assert autocast.kernels() is registered and autocast.kernels.cache_info().currsize == 1
    assert set(torch._C._dispatch_get_registrations_for_dispatch_key(key)) == own
    assert set(torch._C._dispatch_get_registrations_for_dispatch_key("AutocastCPU")) == cpu_key


def _ex2_files() -> list[Path]:
    found = [ROOT / "solutions" / "ex2_timing.py", *sorted((ROOT / "tests" / "submissions").glob("*/ex2_timing.py")),
             *sorted((ROOT / "tests" / "submissions" / "idioms").glob("*/*/ex2_timing.py")),
             *sorted((ROOT / "tests" / "submissions" / "mistakes" / "ex2_timing").glob("*.py"))]
    return [path for path in found if "def time_matmul" in path.read_text(encoding="utf-8")]


Timeline = tuple[tuple[float, float], list[tuple[str, str, float, float]]]  # returned; (kind, device, host, busy)


def _timeline(path: Path, kind: str, n: int, costs: CostModel) -> Timeline:
    spec = importlib.util.spec_from_file_location(f"ex2_under_test_{path.parent.name}_{path.stem}_{n}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    try:
        spec.loader.exec_module(module)
        with StandIn(kind, costs, virtual_clock=True, code=LearnerCode((str(path.parent),))) as s:  # type: ignore[arg-type]
            seconds = float(module.time_matmul(n, s.device, repeats=3))
            speedup = float(module.speedup(n, s.device, repeats=3)) if hasattr(module, "speedup") else 0.0
        return (seconds, speedup), [(e.kind, e.device, e.host, e.busy_until or 0.0) for e in s.events]
    finally:
        del sys.modules[spec.name]


@pytest.mark.parametrize("path", _ex2_files(), ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_a_timing_at_a_smaller_side_on_the_smaller_model_reads_the_same_times(path: Path) -> None:
    """ex2's checks time a stand-in's problems at a quarter of the drawn side on ``CostModel.smaller(4)``
    (grader/checks/ex2_timing/common.py ``SMALLER``): every correct style and every mistake of the corpus
    returns the same number, and its device leaves the same events at the same virtual times, as at the full
    side on the full model — so no verdict of a timing check can change with it."""
    for kind in ("cuda", "mps"):
        full = _timeline(path, kind, 512, CostModel())
        small = _timeline(path, kind, 512 // SMALLER, CostModel().smaller(SMALLER))
        assert small[0] == pytest.approx(full[0], rel=1e-9)
        assert [e[:2] for e in small[1]] == [e[:2] for e in full[1]]
        assert [t for e in small[1] for t in e[2:]] == pytest.approx([t for e in full[1] for t in e[2:]], rel=1e-9,
                                                                    abs=1e-12)
    unscaled = _timeline(path, "cuda", 512 // SMALLER, CostModel())  # the scaled model keeps them: unscaled, they move
    assert [e[3] for e in unscaled[1]] != pytest.approx([e[3] for e in full[1]], rel=1e-3)


def test_a_remembered_flop_count_belongs_to_its_own_shapes_and_values() -> None:
    """The memo's key tells apart what a formula could count differently: other shapes, a list from a
    tuple, ``1`` from ``True`` and ``1.0`` (equal as dict keys); an unhashable argument is counted
    each time, never remembered."""
    from grader.emulation import ops

    assert ops._signature([1, (2,)]) != ops._signature(((1,), (2,)))
    assert len({ops._signature(x) for x in (1, True, 1.0)}) == 3
    addmm = ops.classify(torch.ops.aten.addmm.default)
    ops._COUNTED.clear()
    for n in (3, 5, 3):
        bias, a, b = torch.ones(n), torch.ones(4, n), torch.ones(n, n)
        assert ops.flops(addmm, (bias, a, b), {}, torch.ones(4, n)) == 2 * 4 * n * n
    assert len(ops._COUNTED) == 2
    conv = ops.classify(torch.ops.aten.convolution.default)
    x, w = torch.ones(1, 2, 5, 5), torch.ones(3, 2, 3, 3)
    args = (x, w, None, [1, 1], [0, 0], [1, 1], False, [0, 0], 1, {0})  # a set: no key can hold it
    assert ops.flops(conv, args, {}, torch.ones(1, 3, 3, 3)) == 2 * 3 * 3 * 3 * 2 * 3 * 3
    assert len(ops._COUNTED) == 2


def test_the_flop_counters_formulas_count_the_same_through_the_stand_ins_shapes() -> None:
    """ops.flops maps arguments to shapes itself instead of through the FLOP counter's pytree wrapper,
    and remembers each formula's count by the call's signature: for every product, convolution and
    attention op_db samples (forward and backward), the count — computed, then remembered — is the
    counter's own."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's test utilities warn as they import
        from torch.testing._internal.common_methods_invocations import op_db
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils.flop_counter import flop_registry

    from grader.emulation import ops

    compared: set[str] = set()

    class Compare(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
            kwargs = kwargs or {}
            out = func(*args, **kwargs)
            formula = flop_registry.get(func.overloadpacket)
            if formula is not None:
                ops._COUNTED.clear()  # computed, then remembered
                counts = [ops.flops(ops.classify(func), args, kwargs, out) for _ in range(2)]
                assert counts == [formula(*args, **kwargs, out_val=out)] * 2, func
                compared.add(str(func.overloadpacket))
            return out

    names = {"mm", "addmm", "bmm", "baddbmm", "matmul", "nn.functional.linear", "nn.functional.conv1d",
             "nn.functional.conv2d", "nn.functional.conv_transpose2d", "nn.functional.scaled_dot_product_attention"}
    for info in (i for i in op_db if i.name in names):
        for sample in list(info.sample_inputs("cpu", torch.float32, requires_grad=True))[:4]:
            with Compare(), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                result = info.op(sample.input, *sample.args, **sample.kwargs)
                if isinstance(result, torch.Tensor) and result.requires_grad:
                    result.sum().backward()
    assert {"aten.mm", "aten.addmm", "aten.bmm", "aten.baddbmm", "aten.convolution",
            "aten.convolution_backward"} <= compared, compared


@pytest.mark.parametrize("kind", ["cuda", "mps"])
def test_a_stand_in_leaves_the_modules_it_patched_as_they_were(kind: str) -> None:
    """Every attribute a stand-in's session set on torch, torch._C, torch.cuda and torch.mps (one by one, or
    ~80 of torch._C's at once: ``Injected.set_all``) is the same object afterwards, and none is left behind."""
    import torch.cuda.graphs
    import torch.cuda.memory

    modules = (torch, torch._C, torch.cuda, torch.cuda.memory, torch.cuda.graphs, torch.mps)
    before = [dict(vars(module)) for module in modules]
    with StandIn(kind) as s:  # type: ignore[arg-type]
        x = torch.ones(3, device=s.device)
        with torch.autocast(kind, dtype=torch.float16):
            (x @ x).item()
        assert torch.accelerator.current_accelerator() == torch.device(kind)
        assert any(vars(module) != was for module, was in zip(modules, before, strict=True))
    for module, was in zip(modules, before, strict=True):
        now = vars(module)
        assert set(now) == set(was), (module.__name__, set(now) ^ set(was))
        changed = [name for name in was if now[name] is not was[name]]
        # ...but one, on purpose and once a process: an MPS event made on the stand-in may be collected after it
        # ended, and its release must not reach this build's C layer (grader/emulation/runtime.py).
        assert changed in ([], ["_mps_releaseEvent"]) and all(getattr(now[n], "tolerant", False) for n in changed), \
            (module.__name__, changed)


def test_every_function_the_surface_decides_for_is_kept_off_its_fast_path() -> None:
    """grader/emulation/surface.py: a call with no keyword argument goes straight to its function unless the
    function is one of ``_handled()``. Each function ``Surface.__torch_function__`` compares ``func`` with (is,
    in) must be one, or a case added there would never be reached by such a call (``x.to(device)``)."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(surface.Surface.__torch_function__)))
    compared: list[object] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare) and isinstance(node.left, ast.Name) and node.left.id == "func":
            for op, right in zip(node.ops, node.comparators, strict=True):
                value = eval(ast.unparse(right), vars(surface))  # noqa: S307 - the grader's own source
                if isinstance(op, ast.Is):
                    compared.append(value)
                elif isinstance(op, ast.In):
                    compared.extend(value)
    assert len(compared) > 20  # the surface's ten methods, the data and device constructors
    assert [f for f in compared if f not in surface._handled()] == []
