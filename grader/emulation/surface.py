"""What PyTorch answers above the dispatcher, for a stand-in's tensors.

A tensor's ``.device``, ``.is_cuda``, ``get_device()``, its repr and ``.type()`` are read in Python
or C++ from the tensor itself (a CPU tensor underneath), and a few calls decide in C++, from that
real device, whether to copy at all (``.to()``, ``.cpu()``, ``.cuda()``, ``type_as``) or build
the data on the CPU first (``torch.tensor(data, device=...)``). This TorchFunctionMode answers
those as the emulated device does; everything else goes on to the dispatcher
(grader/emulation/standin.py). It also tells the dispatcher, for each call, whether its tensors
are on the device: C++ inside a call builds new tensors from its arguments' options, whose device
is the real one.

Python code inside a torch function (``torch.norm``'s own body, say) runs with this mode popped,
as PyTorch runs every mode's functions, and reads the CPU there; what it builds from those reads
still lands on the device (the dispatcher's context rule).
"""

from __future__ import annotations

import functools
from typing import Any, Protocol

import torch
from torch.overrides import TorchFunctionMode

from grader.emulation.generators import generator_mismatch
from grader.reference.device import NO_CUDA
from grader.reference.meter import tensors
from grader.reference.modes import LeavesFromUnder

# Calls that build their data on the CPU in C++ before moving it (with no op the dispatcher sees
# for a device that this build lacks).
DATA_CONSTRUCTORS = frozenset({torch.tensor, torch.as_tensor, torch.asarray, torch.Tensor.new_tensor})
LEGACY_DTYPES = {"Float": torch.float32, "Double": torch.float64, "Half": torch.float16, "BFloat16": torch.bfloat16,
                 "Long": torch.int64, "Int": torch.int32, "Short": torch.int16, "Char": torch.int8,
                 "Byte": torch.uint8, "Bool": torch.bool}


def device_type_name(tensor: torch.Tensor, kind: str) -> str:
    """A device tensor's legacy type name, as ``Tensor.type()`` and ATen's messages give it there
    ("torch.cuda.FloatTensor"): its CPU one with the device's kind in it."""
    return str(torch.Tensor.type(tensor)).replace("torch.", f"torch.{kind}.", 1)


@functools.cache
def _device_constructors() -> Any:
    """The functions that take a ``device=`` (torch's own set, read once: asked at every call)."""
    from torch.utils._device import _device_constructors

    return _device_constructors()


# The properties whose answer is the stand-in's (``Surface._attribute``); every other one is the tensor's own.
_PLACED = frozenset({"device", "is_cuda", "is_mps", "is_cpu"})


@functools.cache
def _handled() -> frozenset[Any]:
    """The functions ``Surface.__torch_function__`` decides something for even when called with no keyword
    argument: any other, called so, only runs inside a ``Call`` (checking each of ~15 cases in turn for every
    op of a training was ~1 us of ~10 a call)."""
    methods = (torch.Tensor.to, torch.Tensor.cpu, torch.Tensor.cuda, torch.Tensor.get_device, torch.Tensor.__repr__,
               torch.Tensor.numpy, torch.Tensor.__array__, torch.Tensor.tolist, torch.Tensor.type,
               torch.Tensor.type_as)
    return frozenset({*_device_constructors(), *DATA_CONSTRUCTORS, *methods})


def default_device_context() -> Any:
    """torch's record of this thread's default device (``torch.set_default_device``): the DeviceContext it
    names, None when none is set. Its next ``set_default_device`` exits this one."""
    return getattr(torch._GLOBAL_DEVICE_CONTEXT, "device_context", None)


def _default_device() -> torch.device | None:
    """The device torch.set_default_device (or ``with torch.device(...)``) made this thread's default,
    if any. Its mode sits at the bottom of the thread's mode stack, below this one: it has not yet
    filled it in. (Not ``torch.utils._device.CURRENT_DEVICE``, one for the whole process: another
    thread's default is not this one's, on a GPU as here.)"""
    from torch.overrides import _get_current_function_mode_stack
    from torch.utils._device import DeviceContext

    for mode in reversed(_get_current_function_mode_stack()):
        if isinstance(mode, DeviceContext):
            return torch.device(mode.device)
    return None


class Call:
    """One torch-function call the surface passed on: whether its tensors are on the device, asked
    of the stand-in only when the dispatcher needs it (an op inside the call that builds a tensor from
    options alone), at most once. Most calls never ask; reading every argument's place at each call
    was most of the surface's own cost (benchmarks/standin_cost.py, docs/performance.md)."""

    __slots__ = ("_args", "_kwargs", "_on")

    def __init__(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        self._args = args
        self._kwargs = kwargs
        self._on: bool | None = None

    def on_device(self, s: Placed) -> bool:
        if self._on is None:
            self._on = any(s.on_device(t) for t in tensors((self._args, self._kwargs)))
        return self._on


# A call that names its device (``device=``): what it builds goes there, never by context — as a call
# with no tensors, whose answer is False for every stand-in and thread (one, shared).
NOT_ON_DEVICE = Call((), {})


class Placed(Protocol):
    """What the surface needs of the stand-in."""

    @property
    def kind(self) -> str: ...

    index0: torch.device
    @property
    def contexts(self) -> list[Call]: ...

    def on_device(self, t: torch.Tensor) -> bool: ...

    def target(self, device: Any) -> bool: ...

    def names(self, device: Any) -> bool: ...

    def synchronize(self) -> None: ...


class Surface(LeavesFromUnder, TorchFunctionMode):
    def __init__(self, device: Placed) -> None:
        super().__init__()
        self.s = device

    def _norm(self, device: Any) -> Any:
        """"cuda" as "cuda:0": a device without an index makes C++ ask this build for its current one."""
        if isinstance(device, int) and not isinstance(device, bool):
            return torch.device(self.s.kind, device)
        if isinstance(device, (str, torch.device)):
            dev = torch.device(device)
            return self.s.index0 if dev.type == self.s.kind and dev.index is None else dev
        return device

    def __torch_function__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        s = self.s
        if getattr(func, "__name__", "") == "__get__":  # half the calls of a training: a tensor's property
            prop = getattr(getattr(func, "__self__", None), "__name__", "")
            return self._attribute(prop, func, args) if prop in _PLACED else func(*args)
        if not kwargs and func not in _handled():  # most of the rest: an op on tensors, nothing to decide
            contexts = s.contexts
            contexts.append(Call(args, {}))
            try:
                return func(*args)
            finally:
                contexts.pop()
        kwargs = kwargs or {}
        if kwargs.get("device") is None and func in _device_constructors():
            default = _default_device()
            if default is not None and default.type == s.kind:
                kwargs = {**kwargs, "device": default}  # torch.set_default_device(kind), whatever its place
        if "device" in kwargs:
            kwargs = {**kwargs, "device": self._norm(kwargs["device"])}
        if kwargs.get("generator") is not None:
            self._check_generator(args, kwargs)
        if func in DATA_CONSTRUCTORS:
            return self._construct(func, args, kwargs)
        if func is torch.Tensor.to:
            return self._to(args, kwargs)
        if func is torch.Tensor.cpu:
            return self._to((args[0], torch.device("cpu")), {k: v for k, v in kwargs.items() if k == "memory_format"})
        if func is torch.Tensor.cuda:
            if s.kind != "cuda":
                raise AssertionError(NO_CUDA)
            device = kwargs.get("device", args[1] if len(args) > 1 else None)
            return self._to((args[0], self._norm(0 if device is None else device)),
                            {"non_blocking": kwargs.get("non_blocking", False)})
        if func is torch.Tensor.get_device:
            return 0 if s.on_device(args[0]) else -1
        if func is torch.Tensor.__repr__:
            with self:  # its formatting reads .device: the device's, as PyTorch prints it there
                return torch._tensor_str._str(args[0], tensor_contents=kwargs.get("tensor_contents"))
        if func in (torch.Tensor.numpy, torch.Tensor.__array__) and s.on_device(args[0]) and not kwargs.get("force"):
            raise TypeError(f"can't convert {s.kind}:0 device type tensor to numpy. Use Tensor.cpu() to copy the "
                            "tensor to host memory first.")
        if func is torch.Tensor.tolist and s.on_device(args[0]):
            s.synchronize()
        if func is torch.Tensor.type:
            return self._type(args, kwargs)
        if func is torch.Tensor.type_as:
            return self._to((args[0], args[1]), {})
        s.contexts.append(Call(args, kwargs) if kwargs.get("device") is None else NOT_ON_DEVICE)
        try:
            return func(*args, **kwargs)
        finally:
            s.contexts.pop()

    def _check_generator(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """A generator of one device handed to an op on the other raises as PyTorch's C++ does
        (grader/emulation/generators.py): the op is on the device it is asked for, else on its
        first tensor's."""
        device = kwargs.get("device")
        if device is not None:
            on_device = self.s.names(device)
        else:
            first = next(iter(tensors((args, kwargs))), None)
            on_device = first is not None and self.s.on_device(first)
        error = generator_mismatch(kwargs["generator"], on_device, self.s.kind)
        if error is not None:
            raise error

    def _attribute(self, prop: str, func: Any, args: tuple[Any, ...]) -> Any:
        t = args[0]
        if prop == "device":
            return self.s.index0 if self.s.on_device(t) else func(*args)
        if prop == "is_cuda":
            return self.s.kind == "cuda" and self.s.on_device(t)
        if prop == "is_mps":
            return self.s.kind == "mps" and self.s.on_device(t)
        if prop == "is_cpu":
            return not self.s.on_device(t)
        return func(*args)

    def _construct(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        device = kwargs.get("device")
        if device is None and func is torch.Tensor.new_tensor and self.s.on_device(args[0]):
            device = self.s.index0
        if device is None or not self.s.target(device):
            return func(*args, **kwargs)
        data = args[1] if func is torch.Tensor.new_tensor else args[0]
        if isinstance(data, torch.Tensor) and self.s.on_device(data) and func is not torch.tensor:
            return func(*args, **{k: v for k, v in kwargs.items() if k != "device"})
        made = func(*args, **{**kwargs, "device": torch.device("cpu")})
        requires_grad = made.requires_grad
        with torch.no_grad():
            moved = made.to(self.s.index0)
        return moved.requires_grad_(True) if requires_grad else moved

    def _to(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """``Tensor.to`` in all its forms: a copy exactly when the device or dtype changes (or ``copy``)."""
        tensor, rest = args[0], tuple(args[1:])
        flags = [i for i, a in enumerate(rest) if isinstance(a, bool)]
        copy = bool(kwargs.get("copy", False))
        if len(flags) == 2:  # (..., non_blocking, copy)
            copy = copy or bool(rest[flags[1]])
            rest = rest[:flags[1]] + rest[flags[1] + 1:]
        other = rest[0] if rest and isinstance(rest[0], torch.Tensor) else kwargs.get("other")
        if isinstance(other, torch.Tensor):
            device: Any = self.s.index0 if self.s.on_device(other) else torch.device("cpu")
            dtype, memory_format = other.dtype, None
            non_blocking = bool(rest[1] if len(rest) > 1 else kwargs.get("non_blocking", False))
        else:
            normalized = tuple(self._norm(a) if i == 0 and isinstance(a, (str, torch.device, int))
                               and not isinstance(a, bool) else a for i, a in enumerate(rest))
            device, dtype, non_blocking, memory_format = torch._C._nn._parse_to(
                *normalized, **{k: v for k, v in kwargs.items() if k != "copy"})
        options: dict[str, Any] = {"non_blocking": non_blocking}
        if dtype is not None:
            options["dtype"] = dtype
        if memory_format is not None:
            options["memory_format"] = memory_format
        if device is not None and torch.device(device).type == "meta":  # shapes only, from any device
            return torch.Tensor.to(tensor, device, copy=copy, **options)
        source_on = self.s.on_device(tensor)
        target_on = self.s.target(device) if device is not None else source_on
        same_place = target_on == source_on
        if same_place and not copy and options.get("dtype", tensor.dtype) == tensor.dtype \
                and options.get("memory_format") in (None, torch.preserve_format):
            return tensor  # as PyTorch: .to() the place a tensor already is returns it
        # The device is always given: C++ fills in the tensor's real one (the CPU) otherwise.
        return torch.Tensor.to(tensor, self.s.index0 if target_on else torch.device("cpu"),
                               copy=copy or not same_place, **options)

    def _type(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """``Tensor.type()``: the legacy type names say the device ("torch.cuda.FloatTensor")."""
        tensor = args[0]
        wanted = args[1] if len(args) > 1 else kwargs.get("dtype")
        if wanted is None:
            return device_type_name(tensor, self.s.kind) if self.s.on_device(tensor) else str(torch.Tensor.type(tensor))
        non_blocking = {"non_blocking": kwargs.get("non_blocking", False)}
        if isinstance(wanted, torch.dtype):
            return self._to((tensor, wanted), non_blocking)
        name = wanted if isinstance(wanted, str) else f"{getattr(wanted, '__module__', 'torch')}.{wanted.__name__}"
        on_device = name.startswith(f"torch.{self.s.kind}.")
        dtype = LEGACY_DTYPES.get(name.rsplit(".", 1)[-1].removesuffix("Tensor"))
        if dtype is None:
            return torch.Tensor.type(tensor, wanted, **kwargs)
        return self._to((tensor, self.s.index0 if on_device else torch.device("cpu"), dtype), non_blocking)
