"""Every clock of the standard library a learner could time with, each read reported as an event.

The wall clocks (time.time, time.time_ns, clock_gettime(CLOCK_REALTIME/TAI), datetime's now/utcnow/
today, localtime/gmtime/ctime/asctime/strftime without a time), the monotonic ones (perf_counter,
monotonic, timeit.default_timer, clock_gettime(CLOCK_MONOTONIC/_RAW/BOOTTIME ...), os.times().elapsed)
and the CPU-time ones (process_time, thread_time, clock_gettime(CLOCK_*_CPUTIME_ID), os.times()
user+system, resource.getrusage). The list is what ``tests/conformance`` enumerates from the modules
(every function whose reading moves with real time), plus the ready-made stopwatches that hold a
clock as a default argument (timeit.Timer, timeit.timeit/repeat).

* ``VirtualClocks`` (a stand-in with ``virtual_clock=True``): each clock reads its real value at the
  stand-in's start plus the host's virtual time since — a host waiting in synchronize() spins, so
  CPU time follows the host too — and time.sleep advances the host's virtual time instead of
  sleeping. Real time never leaks in: readings are the same however loaded the machine is.
* ``RecordedClocks`` (the CPU, a real GPU): the real clocks, each read recorded.
"""

from __future__ import annotations

import datetime as _datetime
import os
import resource
import time
import timeit
import types
from collections.abc import Callable
from typing import Any

from grader.emulation.patching import Target

# The real functions, whatever a session patches later.
_TIME, _PERF, _MONO = time.time, time.perf_counter, time.monotonic
_PROCESS, _THREAD = time.process_time, time.thread_time
_CLOCK_GETTIME, _SLEEP = time.clock_gettime, time.sleep
_LOCALTIME, _GMTIME, _CTIME, _ASCTIME, _STRFTIME = time.localtime, time.gmtime, time.ctime, time.asctime, time.strftime
_OS_TIMES, _GETRUSAGE = os.times, resource.getrusage
_DATETIME, _DATE = _datetime.datetime, _datetime.date
_CLOCK_IDS: dict[int, str] = {getattr(time, name): name for name in dir(time) if name.startswith("CLOCK_")}


def _real(source: str) -> float:
    """The real reading of one clock, in seconds."""
    if source == "time":
        return _TIME()
    if source == "perf_counter":
        return _PERF()
    if source == "monotonic":
        return _MONO()
    if source == "process_time":
        return _PROCESS()
    if source == "thread_time":
        return _THREAD()
    if source == "os.times":
        return float(_OS_TIMES().elapsed)
    if source == "os.times.cpu":
        times = _OS_TIMES()
        return float(times.user + times.system)
    if source == "getrusage":
        usage = _GETRUSAGE(resource.RUSAGE_SELF)
        return float(usage.ru_utime + usage.ru_stime)
    return float(_CLOCK_GETTIME(getattr(time, source)))


def _sources() -> list[str]:
    found = ["time", "perf_counter", "monotonic", "process_time", "thread_time", "os.times", "os.times.cpu",
             "getrusage"]
    for name in _CLOCK_IDS.values():
        try:
            _CLOCK_GETTIME(getattr(time, name))
        except OSError:
            continue  # a clock this machine does not have: clock_gettime raises for it, as before
        found.append(name)
    return found


class Clocks:
    """Every clock, each reading ``now(source)`` (in seconds) and reporting it to ``record``."""

    def __init__(self, record: Callable[[str, float], None]) -> None:
        self.record = record
        self.sources = frozenset(_sources())

    def reading(self, source: str) -> float:
        raise NotImplementedError

    def now(self, source: str) -> float:
        value = self.reading(source)
        self.record(source, value)
        return value

    def sleep(self, seconds: float) -> None:
        _SLEEP(seconds)

    # -- the functions a learner calls ------------------------------------------------------------
    def _reader(self, source: str, scale: float = 1.0, as_int: bool = False) -> Callable[[], Any]:
        def read() -> Any:
            value = self.now(source) * scale
            return int(value) if as_int else value

        read.__name__ = source
        return read

    def _clock_gettime(self, as_int: bool) -> Callable[[int], Any]:
        def clock_gettime(clk_id: int) -> Any:
            name = _CLOCK_IDS.get(clk_id)
            if name is None or name not in self.sources:
                return _CLOCK_GETTIME(clk_id)  # not a clock this machine has: the real error
            value = self.now(name)
            return int(value * 1e9) if as_int else value

        return clock_gettime

    def _calendar(self, real: Callable[..., Any]) -> Callable[..., Any]:
        def calendar(secs: float | None = None) -> Any:
            return real(self.now("time") if secs is None else secs)

        calendar.__name__ = real.__name__
        return calendar

    def _strftime(self) -> Callable[..., str]:
        def strftime(fmt: str, t: Any = None) -> str:
            return str(_STRFTIME(fmt, _LOCALTIME(self.now("time")) if t is None else t))

        return strftime

    def _asctime(self) -> Callable[..., str]:
        def asctime(t: Any = None) -> str:
            return str(_ASCTIME(_LOCALTIME(self.now("time")) if t is None else t))

        return asctime

    def _os_times(self) -> Callable[[], Any]:
        def times() -> Any:
            now = _OS_TIMES()
            return os.times_result((self.now("os.times.cpu"), 0.0, now.children_user, now.children_system,
                                    self.now("os.times")))

        return times

    def _getrusage(self) -> Callable[[int], Any]:
        def getrusage(who: int) -> Any:
            usage = _GETRUSAGE(who)
            if who == resource.RUSAGE_CHILDREN:
                return usage
            fields = list(usage)
            fields[0], fields[1] = self.now("getrusage"), 0.0
            return resource.struct_rusage(fields)

        return getrusage

    def _datetime_classes(self) -> tuple[type, type]:
        clocks = self

        class _Meta(type):
            # datetime objects made anywhere (the real class) are still instances of it.
            def __instancecheck__(cls, obj: object) -> bool:
                return isinstance(obj, cls.__bases__[0])

            def __subclasscheck__(cls, sub: type) -> bool:
                return issubclass(sub, cls.__bases__[0])

        # The real classes (taken at import): a stand-in inside another's still derives from them.
        class datetime(_DATETIME, metaclass=_Meta):  # type: ignore[valid-type,misc]  # noqa: N801 - it stands for datetime.datetime
            @classmethod
            def now(cls, tz: Any = None) -> Any:
                return _DATETIME.fromtimestamp(clocks.now("time"), tz)

            @classmethod
            def utcnow(cls) -> Any:
                return _DATETIME.fromtimestamp(clocks.now("time"), _datetime.timezone.utc).replace(tzinfo=None)

            @classmethod
            def today(cls) -> Any:
                return _DATETIME.fromtimestamp(clocks.now("time"))

        class date(_DATE, metaclass=_Meta):  # type: ignore[valid-type,misc]  # noqa: N801 - it stands for datetime.date
            @classmethod
            def today(cls) -> Any:
                return _DATE.fromtimestamp(clocks.now("time"))

        return datetime, date

    def replacements(self) -> dict[Target, object]:
        found: dict[Target, object] = {
            (time, "time"): self._reader("time"),
            (time, "time_ns"): self._reader("time", 1e9, as_int=True),
            (time, "perf_counter"): self._reader("perf_counter"),
            (time, "perf_counter_ns"): self._reader("perf_counter", 1e9, as_int=True),
            (time, "monotonic"): self._reader("monotonic"),
            (time, "monotonic_ns"): self._reader("monotonic", 1e9, as_int=True),
            (time, "process_time"): self._reader("process_time"),
            (time, "process_time_ns"): self._reader("process_time", 1e9, as_int=True),
            (time, "thread_time"): self._reader("thread_time"),
            (time, "thread_time_ns"): self._reader("thread_time", 1e9, as_int=True),
            (time, "clock_gettime"): self._clock_gettime(as_int=False),
            (time, "clock_gettime_ns"): self._clock_gettime(as_int=True),
            (time, "localtime"): self._calendar(_LOCALTIME),
            (time, "gmtime"): self._calendar(_GMTIME),
            (time, "ctime"): self._calendar(_CTIME),
            (time, "asctime"): self._asctime(),
            (time, "strftime"): self._strftime(),
            (time, "sleep"): self.sleep,
            (os, "times"): self._os_times(),
            (resource, "getrusage"): self._getrusage(),
            (timeit, "default_timer"): self._reader("perf_counter"),
        }
        datetime_cls, date_cls = self._datetime_classes()
        found[(_datetime, "datetime")] = datetime_cls
        found[(_datetime, "date")] = date_cls
        return {target: value for target, value in found.items() if hasattr(*target)}


class VirtualClocks(Clocks):
    """Clocks on a stand-in's virtual timeline: ``origin + host()``."""

    def __init__(self, host: Callable[[], float], advance: Callable[[float], None],
                 record: Callable[[str, float], None]) -> None:
        super().__init__(record)
        self.host = host
        self.advance = advance
        self.origin = {source: _real(source) for source in self.sources}

    def reading(self, source: str) -> float:
        return self.origin[source] + self.host()

    def sleep(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError("sleep length must be non-negative")
        self.advance(float(seconds))  # the host sleeps on the virtual timeline
        _SLEEP(0)


class RecordedClocks(Clocks):
    """The machine's real clocks, each read recorded."""

    def reading(self, source: str) -> float:
        return _real(source)


def held_as_default(replacements: dict[Target, object]) -> list[tuple[types.FunctionType, str, Any]]:
    """Stopwatches that hold a clock as a default argument (bound when their module was imported):
    (function, '__defaults__' or '__kwdefaults__', its defaults with the clocks replaced)."""
    by_id = {id(getattr(owner, name)): value for (owner, name), value in replacements.items()
             if hasattr(owner, name)}
    holders: list[Any] = [timeit.Timer.__init__, timeit.timeit, timeit.repeat]
    found: list[tuple[types.FunctionType, str, Any]] = []
    for func in holders:
        if func.__defaults__ and any(id(d) in by_id for d in func.__defaults__):
            found.append((func, "__defaults__", tuple(by_id.get(id(d), d) for d in func.__defaults__)))
        if func.__kwdefaults__ and any(id(d) in by_id for d in func.__kwdefaults__.values()):
            found.append((func, "__kwdefaults__", {k: by_id.get(id(d), d) for k, d in func.__kwdefaults__.items()}))
    return found
