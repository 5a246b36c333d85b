"""Self-check for learners: ``grader.check()`` in a notebook, ``grader check`` in a terminal.

Only the public checks run, through the same pipeline as ``grader grade``: the learner's code
is written to a file and runs in the sandboxed child, never in the notebook's kernel, so a
crash, a hang or an out-of-memory in an exercise cannot take the kernel down.

In a notebook the code is the session's input history — every cell run so far, in the order
it ran, one code cell per execution, saved as ``In [7]`` so that a message names the learner's
own cell — written to a temporary ``.ipynb`` that the final grade's loader and top-level runner
read like any notebook (grader/intake/submission.py, grader/learner/toplevel.py): the same cells run with the
same rules both ways, so a green self-check is what the grade's public checks say too. A cell
that fails again there (a demo that needs a GPU, a stub called too early, a scratch cell that
never compiled) is recorded and costs nothing; ``grader.check()`` inside the sandbox does nothing.

``check()`` never raises in the learner's cell: a mistake, a hang, a grader bug or Ctrl-C is
shown in the table (HTML in Jupyter, Colab and Kaggle; plain text elsewhere).
"""

from __future__ import annotations

import dataclasses
import html
import sys
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from os import PathLike
from pathlib import Path
from typing import Any

import nbformat
from nbformat import v4

from grader import __version__
from grader.course import LANGS, Course, Exercise, Lang, Visibility, lang_of, load_course
from grader.errors import GraderFailure
from grader.grading import UNKNOWN_DEVICE, grade
from grader.intake.submission import Submission
from grader.outputs.report import as_dict
from grader.outputs.terminal import top_level_lines
from grader.run.launch import Launcher
from grader.score import texts
from grader.score.results import CheckResult, Report
from grader.score.scoring import build_report
from grader.wire.messages import REQUESTED_DEVICES, RequestedDevice

PUBLIC: tuple[Visibility, ...] = ("public",)
EXERCISES_DIR = Path("exercises")
NOTEBOOK_NAME = "notebook.ipynb"
_MARK = {"passed": "✓", "not_attempted": "·", "skipped": "·"}
_COLOUR = {"passed": "#1a7f37", "not_attempted": "#6e7781", "skipped": "#6e7781"}


class CheckReport(dict[str, Any]):
    """The report mapping (as ``report.as_dict``); in IPython it shows as one short line.

    The table is already on screen, so ``Out[..]`` need not repeat the whole mapping.
    ``dict(result)`` gives a plain dict (e.g. for ``yaml.safe_dump``).
    """

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(f"<grader.check: {self.get('score', 0.0):g} / {self.get('max_score', 0.0):g}>")


@dataclass(frozen=True)
class View:
    """What the learner sees: the report (if grading ran) and notices above it."""

    lang: Lang
    report: Report | None
    notices: tuple[str, ...] = ()
    footnotes: tuple[str, ...] = ()

    def mapping(self) -> dict[str, Any]:
        data = as_dict(self.report) if self.report is not None else {"score": 0.0, "max_score": 0.0, "exercises": {}}
        data["notices"] = list(self.notices)
        return data


# --- choosing what to grade ---------------------------------------------------------------


def resolve_exercise(course: Course, given: str | int) -> str | None:
    """``"ex3"``, ``3``, ``"3"``, ``"ex3_roundtrip"`` or ``"ex3_roundtrip.py"`` -> ``"ex3"``."""
    text = str(given).strip().lower()
    if text.isdigit():
        text = f"ex{int(text)}"
    for ex in course.exercises:
        if text in (ex.id, ex.module, f"{ex.module}.py", f"{ex.module}.ipynb"):
            return ex.id
    return None


def defined_exercises(course: Course, namespace: Mapping[str, Any]) -> tuple[str, ...]:
    """Exercises with at least one of their functions (or constants) defined in ``namespace``."""
    return tuple(ex.id for ex in course.exercises if any(name in namespace for name in ex.functions))


def folder_exercises(course: Course, folder: Path) -> tuple[str, ...]:
    """Exercises whose file (``ex1_device.py`` or ``.ipynb``) is in ``folder``."""
    return tuple(ex.id for ex in course.exercises
                 if any((folder / f"{ex.module}{suffix}").is_file() for suffix in (".py", ".ipynb")))


def _expected_files(exercises: Iterable[Exercise]) -> str:
    return ", ".join(f"{ex.module}.py" for ex in exercises)


# --- the notebook session -----------------------------------------------------------------


def _ipython() -> Any:
    """The running IPython shell, or None; never imports IPython itself."""
    if "IPython" not in sys.modules:
        return None
    from IPython import get_ipython

    return get_ipython()


def session_cells(shell: Any) -> list[str]:
    """Every cell run so far, in order; index 0 is IPython's empty placeholder for ``In[0]``."""
    history = getattr(getattr(shell, "history_manager", None), "input_hist_raw", None)
    if history is None:
        history = shell.user_ns.get("In", [""])
    return [str(cell) for cell in history]


def write_session_notebook(cells: list[str], folder: Path) -> Path:
    """One code cell per history entry after ``In[0]``, saved as ``In [k]``: the final grade's
    loader reads it like any notebook, so both run the same cells with the same rules."""
    notebook = v4.new_notebook(cells=[v4.new_code_cell(cell, execution_count=k) for k, cell in enumerate(cells[1:], 1)])
    path = folder / NOTEBOOK_NAME
    path.write_text(nbformat.writes(notebook), encoding="utf-8")
    return path


# --- grading ------------------------------------------------------------------------------


def grade_public(path: Path, course: Course, exercise_ids: Iterable[str], *, lang: Lang,
                 device: RequestedDevice = "auto", launcher: Launcher | None = None) -> Report:
    """The public checks of ``exercise_ids``; ``launcher``: as ``grade()`` (exec'd processes by default)."""
    return grade(path, course, device=device, lang=lang, visibility=PUBLIC, exercises=list(exercise_ids),
                 launcher=launcher)


def error_report(course: Course, exercise_ids: Iterable[str], reason: str, lang: Lang) -> Report:
    """Grading itself broke: each public check of the exercises is skipped, with the reason."""
    wanted = set(exercise_ids)
    exercises = tuple(
        dataclasses.replace(ex, checks=tuple(c for c in ex.checks if c.visibility in PUBLIC))
        for ex in course.exercises if ex.id in wanted
    )
    submission = Submission(learner="self-check", path=Path("."), sources={}, problems={})
    return build_report(course, submission, exercises, {}, device=UNKNOWN_DEVICE, lang=lang,
                        seconds=0.0, version=__version__, failure=GraderFailure("internal", reason))


def _ui(lang: Lang, key: str, **params: object) -> str:
    return texts.ui(lang, key).format(**params)


def choose_lang(lang: str | None, course: Course) -> tuple[Lang, tuple[str, ...]]:
    """The language asked for, else the course's default (with a notice for a bad one)."""
    if lang is None:
        return course.default_lang, ()
    known = lang_of(lang)
    if known is not None:
        return known, ()
    used = course.default_lang
    return used, (_ui(used, "selfcheck.unknown_lang", given=repr(lang), used=used),)


def run(course: Course, exercise: str | int | None, *, lang: Lang, device: RequestedDevice = "auto",
        path: Path | None = None) -> View:
    """Grade ``path`` (a folder or a file) or, without it, the notebook session or ``exercises/``."""
    requested: tuple[str, ...] = ()
    if exercise is not None:
        found = resolve_exercise(course, exercise)
        if found is None:
            return View(lang, None, (_ui(lang, "selfcheck.unknown_exercise", given=repr(exercise),
                                         known=", ".join(course.exercise_ids)),))
        requested = (found,)
    shell = _ipython() if path is None else None
    if shell is not None:
        return _run_session(course, shell, requested, lang=lang, device=device)
    source = path if path is not None else EXERCISES_DIR
    if source.is_dir():
        ids = requested or folder_exercises(course, source)
    else:
        ids = requested or (course.exercise_ids if source.is_file() else ())
    if not ids:
        return View(lang, None, (_ui(lang, "selfcheck.no_files", folder=str(source),
                                     expected=_expected_files(course.exercises)),))
    return View(lang, grade_public(source, course, ids, lang=lang, device=device))


def _run_session(course: Course, shell: Any, requested: tuple[str, ...], *, lang: Lang,
                 device: RequestedDevice) -> View:
    ids = requested or defined_exercises(course, shell.user_ns)
    if not ids:
        names = ", ".join(f"{ex.functions[0]}()" for ex in course.exercises[:2])
        return View(lang, None, (_ui(lang, "selfcheck.nothing", functions=names),))
    cells = session_cells(shell)
    with tempfile.TemporaryDirectory(prefix="grader-check-") as workdir:
        source = write_session_notebook(cells, Path(workdir))
        report = grade_public(source, course, ids, lang=lang, device=device)
    report = dataclasses.replace(report, learner="notebook", submission=f"In [1] … In [{len(cells) - 1}]")
    all_passed = all(c.status == "passed" for ex in report.exercises for c in ex.checks)
    return View(lang, report, footnotes=() if all_passed else (_ui(lang, "selfcheck.cells"),))


def check(exercise: str | int | None = None, *, lang: str | None = None, device: str = "auto",
          path: str | PathLike[str] | None = None) -> CheckReport:
    """``grader.check()``: grade, show the table, return the report mapping; never raises."""
    used = lang_of(lang) or LANGS[0]
    course: Course | None = None
    notices: tuple[str, ...] = ()
    try:
        course = load_course()
        used, notices = choose_lang(lang, course)
        chosen = next((d for d in REQUESTED_DEVICES if d == device), None)
        if chosen is None:
            notices += (_ui(used, "selfcheck.unknown_device", given=repr(device), used="auto",
                            known=", ".join(REQUESTED_DEVICES)),)
            chosen = "auto"
        view = run(course, exercise, lang=used, device=chosen, path=Path(path) if path is not None else None)
        view = dataclasses.replace(view, notices=notices + view.notices)
    # Ctrl-C stops the grading (the sandbox kills its child); the cell still ends quietly.
    except (Exception, KeyboardInterrupt) as exc:  # noqa: BLE001 - nothing may raise in the learner's cell
        view = failure_view(course, exercise, used, exc, notices)
    show(view)
    return CheckReport(view.mapping())


def failure_view(course: Course | None, exercise: str | int | None, lang: Lang, exc: BaseException,
                 notices: tuple[str, ...] = ()) -> View:
    if isinstance(exc, KeyboardInterrupt):
        reason, text = "KeyboardInterrupt", _ui(lang, "selfcheck.interrupted")
    else:
        reason = f"{type(exc).__name__}: {str(exc)[:300]}"
        text = _ui(lang, "selfcheck.failed", error=reason)
    report = None
    if course is not None:
        try:
            found = resolve_exercise(course, exercise) if exercise is not None else None
            report = error_report(course, [found] if found else course.exercise_ids, reason, lang)
        except Exception:  # noqa: BLE001 - the notice alone still says what happened
            report = None
    return View(lang, report, (*notices, text))


# --- showing the table --------------------------------------------------------------------


def _status(lang: Lang, status: str) -> str:
    return texts.ui(lang, f"status.{status}")


def _mark(status: str) -> str:
    return _MARK.get(status, "✗")


def _device_line(report: Report) -> str | None:
    device = report.device
    if device.type == UNKNOWN_DEVICE.type:
        return None
    return f"{texts.ui(report.lang, 'device')}: {device.type} ({device.name}, torch {device.torch})"


def render_text(view: View) -> str:
    lang = view.lang
    lines = [_ui(lang, "selfcheck.title")]
    lines += [f"! {notice}" for notice in view.notices]
    report = view.report
    if report is not None:
        device = _device_line(report)
        if device:
            lines.append(device)
        if report.device.standin:
            lines.append(f"  ({texts.ui(lang, 'standin')})")
        if report.grader_error:
            lines.append(f"! {texts.ui(lang, 'grader_error')}: {report.grader_error}")
        lines += top_level_lines(report)
        width = max((len(c.id) for ex in report.exercises for c in ex.checks), default=20)
        for ex in report.exercises:
            lines.append("")
            lines.append(f"{ex.id}  {ex.title}  {ex.score:g} / {ex.max_score:g}  {_status(lang, ex.status)}")
            for c in ex.checks:
                lines.append(f"  {_mark(c.status)} {c.id:<{width}}  {c.points:g} / {c.max_points:g}  "
                             f"{_status(lang, c.status)}")
                if c.message:
                    lines.append(f"      {c.message}")
                if c.hint:
                    lines.append(f"      {texts.ui(lang, 'hint')}: {c.hint}")
        lines.append("")
        lines.append(f"{texts.ui(lang, 'score')}: {report.score:g} / {report.max_score:g}")
        lines.append(_ui(lang, "selfcheck.public_only"))
    lines += list(view.footnotes)
    return "\n".join(lines)


def _html_check(lang: Lang, check: CheckResult) -> str:
    colour = _COLOUR.get(check.status, "#cf222e")
    detail = html.escape(check.message)
    if check.hint:
        detail += f"<br><i>{html.escape(texts.ui(lang, 'hint'))}:</i> {html.escape(check.hint)}"
    return (f"<tr><td style='text-align:left'><code>{html.escape(check.id)}</code></td>"
            f"<td style='text-align:left;color:{colour};white-space:nowrap'>"
            f"{_mark(check.status)} {html.escape(_status(lang, check.status))}</td>"
            f"<td style='text-align:right;white-space:nowrap'>{check.points:g} / {check.max_points:g}</td>"
            f"<td style='text-align:left'>{detail}</td></tr>")


def render_html(view: View) -> str:
    lang = view.lang
    esc = html.escape
    parts = ["<div class='grader-check'>", f"<h4>{esc(_ui(lang, 'selfcheck.title'))}</h4>"]
    parts += [f"<p style='color:#9a6700'>{esc(notice)}</p>" for notice in view.notices]
    report = view.report
    if report is not None:
        device = _device_line(report)
        if device:
            standin = f" <i>({esc(texts.ui(lang, 'standin'))})</i>" if report.device.standin else ""
            parts.append(f"<p>{esc(device)}{standin}</p>")
        if report.grader_error:
            parts.append(f"<p style='color:#9a6700'>{esc(texts.ui(lang, 'grader_error'))}: "
                         f"{esc(report.grader_error)}</p>")
        if report.top_level:
            heading = texts.ui(lang, "top_level.heading").format(count=len(report.top_level))
            items = "".join(f"<li>{esc(stop.message)}</li>" for stop in report.top_level)
            parts.append(f"<details><summary>{esc(heading)}</summary><ul>{items}</ul></details>")
        head = "".join(f"<th style='text-align:left'>{esc(_ui(lang, key))}</th>"
                       for key in ("selfcheck.check", "selfcheck.result", "selfcheck.points", "selfcheck.message"))
        parts.append(f"<table><thead><tr>{head}</tr></thead><tbody>")
        for ex in report.exercises:
            parts.append(f"<tr><td colspan='4' style='text-align:left'><b>{esc(ex.id)} — {esc(ex.title)}</b>: "
                         f"{ex.score:g} / {ex.max_score:g} ({esc(_status(lang, ex.status))})</td></tr>")
            parts += [_html_check(lang, c) for c in ex.checks]
        parts.append("</tbody></table>")
        parts.append(f"<p><b>{esc(texts.ui(lang, 'score'))}: {report.score:g} / {report.max_score:g}</b>. "
                     f"{esc(_ui(lang, 'selfcheck.public_only'))}</p>")
        if report.output.strip():
            parts.append(f"<details><summary>{esc(_ui(lang, 'selfcheck.output'))}</summary>"
                         f"<pre>{esc(report.output)}</pre></details>")
    parts += [f"<p style='color:#6e7781'><small>{esc(note)}</small></p>" for note in view.footnotes]
    parts.append("</div>")
    return "\n".join(parts)


def show(view: View) -> None:
    """HTML and text together in a notebook (the frontend picks), text elsewhere."""
    text = render_text(view)
    try:
        shell = _ipython()
        if shell is not None and getattr(shell, "kernel", None) is not None:
            from IPython.display import display

            display({"text/plain": text, "text/html": render_html(view)}, raw=True)
            return
    except Exception:  # noqa: BLE001 - fall back to plain text rather than raise in the cell
        pass
    print(text)
