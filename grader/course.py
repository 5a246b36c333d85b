"""Load course.yaml once into typed, validated objects.

Every problem names the key, the bad value and the file, like pytest-timeout's validators
name where a bad timeout came from.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, get_args

from grader import yamltext
from grader.errors import GraderError
from grader.paths import CHECKS_DIR, PACKAGE_DIR, PROJECT_ROOT
from grader.wire.messages import Limits

Visibility = Literal["public", "hidden"]
Lang = Literal["vi", "en"]
LANGS: tuple[Lang, ...] = get_args(Lang)
TOTAL_POINTS = 100.0
# `release: public` marks a learner's copy (grader release): hidden checks and solution paths
# were removed, so its points add up to the public total, not to TOTAL_POINTS.
Release = Literal["public"]
# Gradescope's own visibility values for a test (see grader/outputs/gradescope.py).
GradescopeVisibility = Literal["visible", "hidden", "after_due_date", "after_published"]
GRADESCOPE_VISIBILITIES: tuple[GradescopeVisibility, ...] = ("visible", "hidden", "after_due_date", "after_published")


def lang_of(value: object) -> Lang | None:
    """``value`` as one of the course's languages, or None (a learner's ``grader.check(lang=...)``)."""
    return next((lang for lang in LANGS if lang == value), None)


@dataclass(frozen=True)
class Gradescope:
    """How public and hidden checks show on Gradescope (course.yaml ``gradescope.visibility``), and
    when learners see what their code printed (``gradescope.stdout_visibility``)."""

    public: GradescopeVisibility = "visible"
    hidden: GradescopeVisibility = "after_published"
    stdout: GradescopeVisibility = "hidden"


@dataclass(frozen=True)
class CheckSpec:
    id: str  # "ex3.roundtrip_values"
    name: str  # "roundtrip_values": the test function is test_<name>
    exercise: str  # "ex3"
    module: str  # "ex3_roundtrip": the folder grader/checks/<module>/ holds the test
    points: float
    visibility: Visibility
    timeout_s: float

    @property
    def test_file(self) -> Path:
        """The check's own module: its test function, its hint and its messages (vi, en)."""
        return CHECKS_DIR / self.module / f"test_{self.name}.py"

    @property
    def nodeid(self) -> str:
        return f"{self.module}/test_{self.name}.py::test_{self.name}"


@dataclass(frozen=True)
class Exercise:
    id: str
    module: str
    title: Mapping[str, str]
    functions: tuple[str, ...]
    stub: Path | None  # None only in a released course (the learner's files are theirs)
    solution: Path | None
    checks: tuple[CheckSpec, ...]

    @property
    def max_score(self) -> float:
        return sum(c.points for c in self.checks)


@dataclass(frozen=True)
class Course:
    path: Path
    title: Mapping[str, str]
    default_lang: Lang
    limits: Limits
    exercises: tuple[Exercise, ...]
    gradescope: Gradescope = Gradescope()
    release: Release | None = None
    # Exercises whose checks may run beside each other's, each group in a run of its own, where the
    # machine has the cores (grader/run/lanes.py ``lanes_of``): (("ex1", "ex2"), ("ex3",)). Empty: one run.
    lanes: tuple[tuple[str, ...], ...] = ()

    def exercise(self, exercise_id: str) -> Exercise:
        for ex in self.exercises:
            if ex.id == exercise_id:
                return ex
        raise GraderError(f"unknown exercise {exercise_id!r}; known: {', '.join(self.exercise_ids)}")

    @property
    def exercise_ids(self) -> tuple[str, ...]:
        return tuple(ex.id for ex in self.exercises)

    @property
    def checks(self) -> tuple[CheckSpec, ...]:
        return tuple(c for ex in self.exercises for c in ex.checks)

    @property
    def max_score(self) -> float:
        return sum(ex.max_score for ex in self.exercises)

    @property
    def modules(self) -> dict[str, str]:
        return {ex.id: ex.module for ex in self.exercises}


def default_course_path() -> Path:
    """course.yaml at the repository root (editable install), in the package (a release bundle,
    also when pip-installed in Colab/Kaggle), or in the current directory."""
    for candidate in (PROJECT_ROOT / "course.yaml", PACKAGE_DIR / "course.yaml", Path.cwd() / "course.yaml"):
        if candidate.is_file():
            return candidate
    raise GraderError("course.yaml not found next to the grader package; pass --course PATH")


def load_course(path: Path | None = None) -> Course:
    path = (path or default_course_path()).resolve()
    try:
        raw = yamltext.load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise GraderError(f"cannot read course file {path}: {exc.strerror}") from None
    except yamltext.YAMLError as exc:
        raise GraderError(f"{path}: not valid YAML: {exc}") from None
    return _Validator(path).course(raw)


class _Validator:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.release: Release | None = None

    def fail(self, where: str, value: object, why: str) -> GraderError:
        return GraderError(f"{self.path}: {where}: {value!r} {why}")

    def mapping(self, where: str, value: object, required: set[str], optional: set[str]) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.fail(where, value, "must be a mapping")
        unknown = set(value) - required - optional
        if unknown:
            key = sorted(map(str, unknown))[0]
            allowed = ", ".join(sorted(required | optional))
            raise self.fail(f"{where}.{key}", value[key], f"is under an unknown key {key!r} (allowed: {allowed})")
        missing = required - set(value)
        if missing:
            raise self.fail(where, sorted(missing)[0], "is a required key that is missing")
        return value

    def text(self, where: str, value: object) -> str:
        if not isinstance(value, str) or not value.strip():
            raise self.fail(where, value, "must be a non-empty string")
        return value

    def number(self, where: str, value: object) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
            raise self.fail(where, value, "must be a positive number")
        return float(value)

    def titles(self, where: str, value: object) -> dict[str, str]:
        raw = self.mapping(where, value, set(LANGS), set())
        return {lang: self.text(f"{where}.{lang}", raw[lang]) for lang in LANGS}

    def file(self, where: str, value: object) -> Path:
        rel = self.text(where, value)
        full = self.path.parent / rel
        if not full.is_file():
            raise self.fail(where, rel, f"names a file that does not exist ({full})")
        return full

    def course(self, raw: object) -> Course:
        raw = self.mapping("<top>", raw, {"title", "exercises"},
                           {"default_lang", "limits", "defaults", "gradescope", "release", "lanes"})
        if raw.get("release", "public") != "public":
            raise self.fail("release", raw["release"], "must be 'public' (a learner's copy without hidden checks)")
        self.release = raw.get("release")
        lang = raw.get("default_lang", "vi")
        if lang not in LANGS:
            raise self.fail("default_lang", lang, f"must be one of {', '.join(LANGS)}")
        defaults = self.mapping("defaults", raw.get("defaults", {}), set(), {"check_timeout_s"})
        default_timeout = self.number("defaults.check_timeout_s", defaults.get("check_timeout_s", 30))
        limits = self.limits(raw.get("limits", {}))
        if not isinstance(raw["exercises"], list) or not raw["exercises"]:
            raise self.fail("exercises", raw["exercises"], "must be a non-empty list")
        exercises = tuple(
            self.exercise(f"exercises[{i}]", item, default_timeout) for i, item in enumerate(raw["exercises"])
        )
        ids = [ex.id for ex in exercises]
        if len(set(ids)) != len(ids):
            raise self.fail("exercises", ids, "contain the same id twice")
        total = sum(ex.max_score for ex in exercises)
        if self.release is None and abs(total - TOTAL_POINTS) > 1e-6:
            raise self.fail("exercises[*].checks[*].points", total, f"add up to {total:g}, not {TOTAL_POINTS:g}")
        return Course(self.path, self.titles("title", raw["title"]), lang, limits, exercises,
                      self.gradescope(raw.get("gradescope", {})), self.release, self.lanes(raw.get("lanes", []), ids))

    def lanes(self, raw: object, ids: list[str]) -> tuple[tuple[str, ...], ...]:
        if not isinstance(raw, list) or not all(isinstance(lane, list) and lane for lane in raw):
            raise self.fail("lanes", raw, "must be a list of non-empty lists of exercise ids")
        named = [ex for lane in raw for ex in lane]
        for ex in named:
            if ex not in ids:
                raise self.fail("lanes", ex, f"is not an exercise id (known: {', '.join(ids)})")
        if len(set(named)) != len(named):
            raise self.fail("lanes", raw, "name an exercise twice")
        if raw and set(named) != set(ids):
            raise self.fail("lanes", raw, f"leave out {', '.join(i for i in ids if i not in named)}")
        return tuple(tuple(lane) for lane in raw)

    def gradescope(self, raw: object) -> Gradescope:
        raw = self.mapping("gradescope", raw, set(), {"visibility", "stdout_visibility"})
        visibility = self.mapping("gradescope.visibility", raw.get("visibility", {}), set(), {"public", "hidden"})
        named = {f"gradescope.visibility.{key}": value for key, value in visibility.items()}
        if "stdout_visibility" in raw:
            named["gradescope.stdout_visibility"] = raw["stdout_visibility"]
        for where, value in named.items():
            if value not in GRADESCOPE_VISIBILITIES:
                raise self.fail(where, value, f"must be one of {', '.join(GRADESCOPE_VISIBILITIES)}")
        stdout = {"stdout": raw["stdout_visibility"]} if "stdout_visibility" in raw else {}
        return Gradescope(**visibility, **stdout)

    def limits(self, raw: object) -> Limits:
        fields = Limits.__dataclass_fields__
        raw = self.mapping("limits", raw, set(), set(fields))
        values = {key: self.number(f"limits.{key}", val) for key, val in raw.items()}
        typed: dict[str, Any] = {k: (int(v) if fields[k].type == "int" else v) for k, v in values.items()}
        return Limits(**typed)

    def exercise(self, where: str, raw: object, default_timeout: float) -> Exercise:
        required = {"id", "module", "title", "functions", "checks"}
        if self.release is None:
            raw = self.mapping(where, raw, required | {"stub"}, {"solution"})
        else:  # a learner's copy: solution paths are an error, the stubs may be elsewhere (pip install)
            raw = self.mapping(where, raw, required, {"stub"})
        ex_id = self.text(f"{where}.id", raw["id"])
        module = self.text(f"{where}.module", raw["module"])
        functions = raw["functions"]
        if not isinstance(functions, list) or not functions or not all(isinstance(f, str) for f in functions):
            raise self.fail(f"{where}.functions", functions, "must be a non-empty list of names")
        if not isinstance(raw["checks"], list) or not raw["checks"]:
            raise self.fail(f"{where}.checks", raw["checks"], "must be a non-empty list")
        checks = tuple(
            self.check(f"{where}.checks[{i}]", item, ex_id, module, default_timeout)
            for i, item in enumerate(raw["checks"])
        )
        self.checks_match_files(where, module, checks)
        solution = self.file(f"{where}.solution", raw["solution"]) if "solution" in raw else None
        return Exercise(
            id=ex_id,
            module=module,
            title=self.titles(f"{where}.title", raw["title"]),
            functions=tuple(functions),
            stub=self.file(f"{where}.stub", raw["stub"]) if "stub" in raw else None,
            solution=solution,
            checks=checks,
        )

    def check(self, where: str, raw: object, exercise: str, module: str, default_timeout: float) -> CheckSpec:
        raw = self.mapping(where, raw, {"id", "points"}, {"visibility", "timeout_s"})
        name = self.text(f"{where}.id", raw["id"])
        if not name.isidentifier():
            raise self.fail(f"{where}.id", name, "must be a Python identifier (the test is test_<id>)")
        visibility = raw.get("visibility", "public")
        if visibility not in ("public", "hidden"):
            raise self.fail(f"{where}.visibility", visibility, "must be public or hidden")
        if visibility == "hidden" and self.release is not None:
            raise self.fail(f"{where}.visibility", visibility, "is not allowed with release: public")
        timeout = self.number(f"{where}.timeout_s", raw.get("timeout_s", default_timeout))
        return CheckSpec(f"{exercise}.{name}", name, exercise, module, self.number(f"{where}.points", raw["points"]),
                         visibility, timeout)

    def checks_match_files(self, where: str, module: str, checks: tuple[CheckSpec, ...]) -> None:
        """Each declared check has its module with its test function, and no check module is left
        undeclared (a learner's copy holds only the public checks' modules, and declares only them)."""
        folder = CHECKS_DIR / module
        for check in checks:
            if not check.test_file.is_file():
                raise self.fail(f"{where}.checks", check.name, f"is declared but {check.test_file} is missing")
            tree = ast.parse(check.test_file.read_text(encoding="utf-8"))
            if not any(isinstance(node, ast.FunctionDef) and node.name == f"test_{check.name}" for node in tree.body):
                raise self.fail(f"{where}.checks", check.name,
                                f"has no function test_{check.name} in {check.test_file}")
        declared = {check.test_file.name for check in checks}
        for path in sorted(folder.glob("test_*.py")):
            if path.name not in declared:
                raise self.fail(f"{where}.checks", path.stem.removeprefix("test_"),
                                f"has a module {path} but is not declared in the course")
