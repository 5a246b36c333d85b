"""The ``grader`` command: a thin layer over the stages; prints messages, not tracebacks.

Exit codes (grader.errors.ExitCode): 0 a report was written, whatever the score;
1 the score is below --fail-under; 2 usage error (bad path, bad course.yaml);
3 the grader itself failed (a zero-score report with the reason is still written).
"""

from __future__ import annotations

import argparse
import functools
import gc
import io
import platform
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from grader import __version__
from grader.course import LANGS, load_course
from grader.errors import ExitCode, GraderError
from grader.grading import grade_or_failed
from grader.intake.names import shown
from grader.outputs.classlist import MISSING_POLICIES
from grader.outputs.gradescope import write_results
from grader.outputs.lms import PLATFORMS
from grader.outputs.report import write_yaml
from grader.outputs.terminal import summary
from grader.run.isolation import NONE, Isolation, probe
from grader.run.launch import FRESH, Launchers
from grader.wire.messages import REQUESTED_DEVICES

if TYPE_CHECKING:
    from grader.commands.batch import RosterOptions


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="grader", description="Grade Lesson 14 (GPU và CUDA) submissions.")
    parser.add_argument("--version", action=_Version, nargs=0, help="show the versions and exit")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--course", type=Path, default=None, help="course.yaml (default: the one shipped)")
    sub = parser.add_subparsers(dest="command", required=True)

    g = sub.add_parser("grade", parents=[common],
                       help="grade one submission (.py, .ipynb or folder) with every check")
    g.add_argument("submission", type=Path)
    g.add_argument("-o", "--output", type=Path, required=True, help="where to write the YAML report")
    g.add_argument("--device", choices=REQUESTED_DEVICES, default="auto")
    g.add_argument("--lang", choices=LANGS, default=None)
    g.add_argument("--fail-under", type=float, default=None, metavar="PCT",
                   help="exit 1 when the score is below PCT percent")
    g.add_argument("--quiet", action="store_true", help="no summary on the terminal")
    g.add_argument("--gradescope", type=Path, default=None, metavar="PATH",
                   help="also write Gradescope's results.json to PATH")
    g.add_argument("--isolation", choices=ISOLATIONS, default="auto", help=ISOLATION_HELP)
    g.add_argument("--learner-timeout", type=float, default=None, metavar="SECONDS", help=LEARNER_TIMEOUT_HELP)
    g.add_argument("--seed", type=int, default=None, metavar="N", help=SEED_HELP)
    _add_instructor_commands(sub, common)
    _add_learner_commands(sub, common)
    return parser


ISOLATIONS = ("auto", "none")
ISOLATION_HELP = ("auto: learner code runs in a bubblewrap sandbox where the machine allows it (README, "
                  "'Security model'); none: without one (the report says so)")


LEARNER_TIMEOUT_HELP = ("the wall-clock bound on one learner's whole grading (default: course.yaml's "
                        "limits.run_timeout_s); a learner stopped by it says so in its report")


SEED_HELP = ("the grading's secret, from which the checks draw their problems (default: a new one from the "
             "operating system); the report's 'seed', given here, regrades identically")
MAX_SEED = 2**63 - 1


def _seed(value: int | None) -> int | None:
    if value is not None and not 0 <= value <= MAX_SEED:
        raise GraderError(f"--seed: {value!r} must be between 0 and {MAX_SEED}")
    return value


def _learner_timeout(value: float | None) -> float | None:
    if value is not None and not 1 <= value <= 86_400:
        raise GraderError(f"--learner-timeout: {value!r} must be between 1 and 86400 seconds")
    return value


def isolation_for(choice: str) -> Isolation:
    return probe() if choice == "auto" else NONE


class _Version(argparse.Action):
    """``--version``, its line looked up only when asked (importlib.metadata: 25 ms of every command)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: object,
                 option_string: str | None = None) -> None:
        print(_version_line())
        parser.exit()


def _version_line() -> str:
    """Read without importing torch: ``grader --version`` stays instant."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        torch_version = version("torch")
    except PackageNotFoundError:
        torch_version = "not installed"
    return f"grader {__version__} (python {platform.python_version()}, torch {torch_version}); `grader doctor` for more"


def _percent(value: float) -> float:
    if not 0 <= value <= 100:
        raise GraderError(f"--fail-under: {value!r} must be between 0 and 100")
    return value


def cmd_grade(args: argparse.Namespace, launchers: Launchers = FRESH) -> int:
    course = load_course(args.course)
    lang = args.lang or course.default_lang
    fail_under = _percent(args.fail_under) if args.fail_under is not None else None
    wall_clock_s = _learner_timeout(args.learner_timeout)
    seed = _seed(args.seed)
    if not args.submission.exists():
        raise GraderError(f"submission not found: {shown(str(args.submission))}")
    # The path on the command line is the instructor's: a link there is followed, once. Nothing
    # inside the submission is (grader/intake/submission.py).
    submission = args.submission.resolve() if args.submission.is_symlink() else args.submission
    code = ExitCode.OK
    isolation = isolation_for(args.isolation)
    lanes = launchers.lanes(args.device, isolation)  # the course's lanes side by side (grader/run/lanes.py)
    with launchers.grading(isolation, lanes) as launcher:
        report = grade_or_failed(submission, course, device=args.device, lang=lang, launcher=launcher,
                                 wall_clock_s=wall_clock_s, seed=seed, lanes=lanes)
    if report.grader_error:
        print(f"grader: the grader could not grade {shown(str(args.submission))}: {shown(report.grader_error)}",
              file=sys.stderr)
        code = ExitCode.INTERNAL
    write_yaml(report, args.output)
    if args.gradescope is not None:
        write_results(report, course, args.gradescope)
    if not args.quiet:
        print(summary(report))
    if code == ExitCode.OK and fail_under is not None and 100 * report.score / report.max_score < fail_under:
        code = ExitCode.BELOW_FAIL_UNDER
    return int(code)


def _add_instructor_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser],
                             common: argparse.ArgumentParser) -> None:
    b = sub.add_parser("batch", parents=[common],
                       help="grade every submission in a folder: a report each, gradebook.csv, summary.html")
    b.add_argument("submissions", type=Path, help="folder holding one file or folder per learner")
    b.add_argument("-o", "--output", type=Path, required=True, help="folder for the reports and class files")
    b.add_argument("--workers", type=int, default=1, metavar="N", help="learners graded at once (default 1)")
    b.add_argument("--force", action="store_true", help="re-grade learners whose report is up to date")
    b.add_argument("--shard", default=None, metavar="K/N", help="grade only the K-th of N slices of the learners")
    b.add_argument("--device", choices=REQUESTED_DEVICES, default="auto")
    b.add_argument("--lang", choices=LANGS, default=None)
    b.add_argument("--quiet", action="store_true", help="no progress bar and no closing line")
    b.add_argument("--isolation", choices=ISOLATIONS, default="auto", help=ISOLATION_HELP)
    b.add_argument("--no-fork-server", dest="fork_server", action="store_false",
                   help="start every process as a fresh Python instead of forking it from a warm server "
                        "(slower, the same verdicts)")
    b.add_argument("--learner-timeout", type=float, default=None, metavar="SECONDS", help=LEARNER_TIMEOUT_HELP)
    b.add_argument("--roster", type=Path, default=None, metavar="CSV",
                   help="the class list exported from the LMS: every learner gets a row, those who did not submit "
                        "too, and submissions are matched to learners (docs/instructors.md)")
    b.add_argument("--roster-encoding", default=None, metavar="ENCODING",
                   help="the roster's encoding when it is neither UTF-8 nor marked by a BOM (e.g. cp1258)")
    b.add_argument("--missing", choices=MISSING_POLICIES, default=None,
                   help="with --roster: what a learner who submitted nothing gets, a 0 or empty cells "
                        "(default empty)")
    m = sub.add_parser("merge", parents=[common],
                       help="one gradebook and summary from several batch outputs (shards)")
    m.add_argument("inputs", type=Path, nargs="+", metavar="OUT_DIR", help="batch output folders")
    m.add_argument("-o", "--output", type=Path, required=True, help="folder for the merged reports and class files")
    e = sub.add_parser("export", parents=[common],
                       help="the grades of a batch output (graded with --roster) as the LMS's grade import file")
    e.add_argument("platform", choices=PLATFORMS)
    e.add_argument("out", type=Path, metavar="OUT_DIR", help="a batch (or merge) output folder")
    e.add_argument("-o", "--output", type=Path, required=True, help="the CSV file to write")
    e.add_argument("--assignment", default=None, metavar="TITLE",
                   help="the grade column's title (default: the course's title; Canvas: 'Title (123)' "
                        "grades its existing assignment 123)")


def _roster_options(args: argparse.Namespace) -> RosterOptions | None:
    if args.roster is None:
        for given, option in ((args.missing, "--missing"), (args.roster_encoding, "--roster-encoding")):
            if given is not None:
                raise GraderError(f"{option} goes with --roster")
        return None
    from grader.commands.batch import RosterOptions  # noqa: PLC0415 - see cmd_batch

    return RosterOptions(args.roster, args.roster_encoding, args.missing or "empty")


def cmd_batch(args: argparse.Namespace, launchers: Launchers = FRESH) -> int:
    # Imported here, not at the top: what only a class needs (tqdm, the class summary, the roster;
    # ~60 ms) is not imported by `grader grade` and `grader check`, whose learner process waits for it.
    from grader.commands.batch import parse_shard, run_batch  # noqa: PLC0415

    course = load_course(args.course)
    shard = parse_shard(args.shard) if args.shard is not None else None
    wall_clock_s = _learner_timeout(args.learner_timeout)
    roster = _roster_options(args)
    try:
        done = run_batch(args.submissions, args.output, course, workers=args.workers, force=args.force,
                         device=args.device, lang=args.lang or course.default_lang, shard=shard,
                         progress=not args.quiet, fork=args.fork_server, isolation=isolation_for(args.isolation),
                         wall_clock_s=wall_clock_s, roster=roster, launchers=launchers)
    except OSError as exc:
        raise GraderError(f"batch: {shown(str(exc))}") from None
    if not args.quiet:
        print(f"{done.learners} learners: {done.graded} graded, {done.current} already up to date, "
              f"{done.failed} grader failures; reports, gradebook.csv and summary.html in {shown(str(done.out_dir))}")
        if done.record is not None:
            record = done.record
            submitted = sum(1 for member in record.members if record.submissions.get(member.key))
            print(f"roster: {len(record.members)} learners, {submitted} submitted, "
                  f"{len(record.members) - submitted} did not (gradebook status missing), "
                  f"{len(record.unmatched)} submissions matched nobody (status unmatched); "
                  f"who is whose: {shown(str(done.out_dir / 'roster.yaml'))}")
    return int(ExitCode.INTERNAL if done.failed else ExitCode.OK)


def cmd_merge(args: argparse.Namespace) -> int:
    from grader.commands.batch import merge  # noqa: PLC0415 - see cmd_batch

    course = load_course(args.course)
    try:
        count = merge(args.inputs, args.output, course)
    except OSError as exc:
        raise GraderError(f"merge: {exc}") from None
    print(f"{count} learners merged into {args.output}")
    return int(ExitCode.OK)


def cmd_export(args: argparse.Namespace) -> int:
    from grader.commands import export

    course = load_course(args.course)
    try:
        result = export.run_export(args.platform, args.out, args.output, course, assignment=args.assignment)
    except OSError as exc:
        raise GraderError(f"export: {exc}") from None
    export.print_result(result)
    return int(ExitCode.OK)


def _add_learner_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser],
                          common: argparse.ArgumentParser) -> None:
    c = sub.add_parser("check", parents=[common],
                       help="self-check your files in exercises/ with the public checks (always exit 0)")
    c.add_argument("exercise", nargs="?", default=None, help="ex1 … ex5 (default: every exercise file in DIR)")
    c.add_argument("--dir", type=Path, default=Path("exercises"), help="your exercise files (default: exercises)")
    c.add_argument("--lang", choices=LANGS, default=None)
    c.add_argument("--device", choices=REQUESTED_DEVICES, default="auto")
    n = sub.add_parser("notebooks", parents=[common], help="write the exercise notebooks from the stubs")
    n.add_argument("-o", "--output", type=Path, default=None, help="folder (default: notebooks/ next to course.yaml)")
    n.add_argument("--install-url", default=None, help="what the notebooks' install cell pip-installs")
    n.add_argument("--check", action="store_true", help="write nothing; exit 1 when the notebooks are out of date")
    r = sub.add_parser("release", parents=[common],
                       help="build the learner bundle: stubs, notebooks, public checks, grader; no solutions")
    r.add_argument("-o", "--output", type=Path, required=True,
                   help="a new (or empty) folder; with --gradescope, the zip to write")
    r.add_argument("--install-url", default=None, help="what the notebooks' install cell pip-installs")
    r.add_argument("--gradescope", action="store_true",
                   help="build the Gradescope autograder zip instead (every check, no solutions)")
    r.add_argument("--gpu", action="store_true", help="with --gradescope: torch's default (CUDA) build, not CPU")
    a = sub.add_parser("autograde", parents=[common],
                       help="on Gradescope (run_autograder): grade ROOT/submission, write ROOT/results/results.json")
    a.add_argument("--root", type=Path, default=Path("/autograder"), help="Gradescope's folder (default /autograder)")
    a.add_argument("--lang", choices=LANGS, default=None)
    a.add_argument("--isolation", choices=ISOLATIONS, default="auto", help=ISOLATION_HELP)
    sub.add_parser("doctor", parents=[common],
                   help="what this machine has for the grader (versions, devices, sandbox); exit 3 if broken")


def cmd_check(args: argparse.Namespace) -> int:
    from grader.commands import selfcheck

    course = load_course(args.course)
    lang = args.lang or course.default_lang
    if not args.dir.is_dir():
        raise GraderError(f"no folder {args.dir}: run `grader check` where exercises/ is, or pass --dir DIR")
    if args.exercise is not None and selfcheck.resolve_exercise(course, args.exercise) is None:
        raise GraderError(f"unknown exercise {args.exercise!r}; known: {', '.join(course.exercise_ids)}")
    code = ExitCode.OK
    try:
        view = selfcheck.run(course, args.exercise, lang=lang, device=args.device, path=args.dir)
    except Exception as exc:  # noqa: BLE001 - a grader bug is shown like any result, with its reason
        view = selfcheck.failure_view(course, args.exercise, lang, exc)
        code = ExitCode.INTERNAL
    print(selfcheck.render_text(view))
    return int(code)


def cmd_notebooks(args: argparse.Namespace) -> int:
    from grader.commands import notebooks

    course = load_course(args.course)
    folder = args.output or notebooks.default_dir(course)
    install_url = args.install_url or notebooks.INSTALL_URL
    if args.check:
        stale = notebooks.stale_notebooks(notebooks.render_notebooks(course, install_url=install_url), folder)
        for name in stale:
            print(f"out of date: {folder / name}")
        return 1 if stale else int(ExitCode.OK)
    for path in notebooks.write_notebooks(course, folder, install_url=install_url):
        print(f"wrote {path}")
    return int(ExitCode.OK)


def cmd_release(args: argparse.Namespace) -> int:
    from grader.commands import gradescope_zip, notebooks, release

    course = load_course(args.course)
    if args.gradescope:
        package = gradescope_zip.build(course, args.output, gpu=args.gpu)
        print(f"Gradescope autograder in {package.path}: {package.files} files, {package.checks} checks "
              f"(public and hidden), torch {'default (CUDA) build' if args.gpu else 'CPU build'}, no solutions")
        return int(ExitCode.OK)
    if args.gpu:
        raise GraderError("--gpu goes with --gradescope")
    bundle = release.build(course, args.output, install_url=args.install_url or notebooks.INSTALL_URL)
    print(f"learner bundle in {bundle.path}: {bundle.files} files, exercises {', '.join(bundle.exercises)}, "
          f"{bundle.public_checks} public checks, no hidden checks, no solutions")
    return int(ExitCode.OK)


def cmd_autograde(args: argparse.Namespace) -> int:
    from grader.commands import autograde

    try:
        course = load_course(args.course)
    except GraderError as exc:  # the learner still gets a page that says the grader is broken
        autograde.unavailable(args.root, args.lang or LANGS[0], str(exc))
        raise
    done = autograde.autograde(args.root, course, lang=args.lang or course.default_lang,
                               isolation=isolation_for(args.isolation))
    if done.grader_error:
        print(f"grader: the grader could not grade this submission: {done.grader_error}", file=sys.stderr)
        return int(ExitCode.INTERNAL)
    return int(ExitCode.OK)


def cmd_doctor(args: argparse.Namespace) -> int:
    from grader.commands import doctor

    text, ok = doctor.diagnose(args.course)
    print(text)
    return int(ExitCode.OK if ok else ExitCode.INTERNAL)


_LEARNER_COMMANDS = {"check": cmd_check, "notebooks": cmd_notebooks, "release": cmd_release}


def main(argv: list[str] | None = None, *, launchers: Launchers = FRESH) -> int:
    """The ``grader`` command; ``launchers``: how ``grade`` and ``batch`` start their processes
    (grader/run/launch.py: the command line's ``FRESH``; the test suite passes warm servers)."""
    args = _parser().parse_args(argv)
    try:
        commands: dict[str, Callable[[argparse.Namespace], int]] = {
            "grade": functools.partial(cmd_grade, launchers=launchers),
            "batch": functools.partial(cmd_batch, launchers=launchers),
            "merge": cmd_merge, "export": cmd_export, "doctor": cmd_doctor, "autograde": cmd_autograde,
            **_LEARNER_COMMANDS}
        return commands[args.command](args)
    except GraderError as exc:
        print(f"grader: error: {shown(str(exc))}", file=sys.stderr)
        return int(exc.exit_code)
    except KeyboardInterrupt:
        print("grader: interrupted", file=sys.stderr)
        return 130


def cli() -> int:
    """The command line (pyproject.toml ``[project.scripts]``, ``python -m grader``): ``main`` on this
    process's own streams. A character the terminal's or log's encoding cannot show (Vietnamese under a
    Latin-1 locale or ``PYTHONIOENCODING=ascii``) is written as a backslash escape, never a traceback
    after the grading: the report files are UTF-8 whatever the locale."""
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper):
            stream.reconfigure(errors="backslashreplace")
    code = main()
    # The process ends next. The interpreter's last collections would walk every object the command made,
    # all of it garbage the process's end frees anyway: 13-15 ms of a `grader grade` (docs/performance.md,
    # twenty-first session). Frozen, they are skipped; what holds a file was closed where it was written.
    gc.freeze()
    return code
