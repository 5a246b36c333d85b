"""YAML as the grader's process reads and writes it: course.yaml, the grader's texts, the reports,
the class's files.

PyYAML's C parser and emitter (libyaml, in PyYAML's wheels) where this PyYAML has them, its Python
ones where not. On a learner's report the C ones read 8 times and write 4 times as fast (2 ms vs 17,
2 vs 9, 2026-12-03) and give the same data both ways; only where a long quoted line is wrapped can the
text differ, and nothing reads a report but as YAML (its seal is over its data: grader/outputs/seal.py).
Where libyaml refuses what PyYAML's own code accepts — a lone surrogate, which the Python emitter writes
escaped ("\\uDCE9") and libyaml will neither write nor read — the Python ones do it, as before.
A file an LMS wrote is read by grader/intake/downloads.py's own lenient loader instead.
"""

from __future__ import annotations

from typing import Any

import yaml

YAMLError = yaml.YAMLError
# libyaml's classes are not subclasses of PyYAML's own (CParser, not Reader/Scanner/Parser): Any.
_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_DUMPER: Any = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def load(text: str) -> Any:
    """The data of a YAML document (plain types only, as ``yaml.safe_load``); YAMLError for none."""
    try:
        return yaml.load(text, Loader=_LOADER)  # noqa: S506 - a safe loader, C or Python
    except yaml.YAMLError:
        if _LOADER is yaml.SafeLoader:
            raise
    return yaml.safe_load(text)


def dump(data: Any, width: int = 100) -> str:
    """``data`` as a YAML document, its keys in their order, its text as it is (not escaped to ASCII)."""
    try:
        return yaml.dump(data, Dumper=_DUMPER, allow_unicode=True, sort_keys=False, width=width)
    except UnicodeEncodeError:
        return yaml.safe_dump(data, allow_unicode=True, sort_keys=False, width=width)
