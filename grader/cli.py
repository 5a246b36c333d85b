"""The ``grader`` command: a thin layer over the stages; prints messages, not tracebacks.

Exit codes (grader.errors.ExitCode): 0 a report was written, whatever the score;
1 the score is below --fail-under; 2 usage error (bad path, bad course.yaml);
3 the grader itself failed (a zero-score report with the reason is still written).
"""

from __future__ import annotations

import argparse
import sys
import traceback
from pathlib import Path

from grader.course import LANGS, load_course
from grader.errors import ExitCode, GraderError
from grader.grading import failed_report, grade
from grader.report import summary, write_yaml

DEVICES = ("auto", "cpu", "cuda", "mps")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="grader", description="Grade Lesson 14 (GPU và CUDA) submissions.")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--course", type=Path, default=None, help="course.yaml (default: the one shipped)")
    sub = parser.add_subparsers(dest="command", required=True)

    g = sub.add_parser("grade", parents=[common],
                       help="grade one submission (.py, .ipynb or folder) with every check")
    g.add_argument("submission", type=Path)
    g.add_argument("-o", "--output", type=Path, required=True, help="where to write the YAML report")
    g.add_argument("--device", choices=DEVICES, default="auto")
    g.add_argument("--lang", choices=LANGS, default=None)
    g.add_argument("--fail-under", type=float, default=None, metavar="PCT",
                   help="exit 1 when the score is below PCT percent")
    g.add_argument("--quiet", action="store_true", help="no summary on the terminal")
    return parser


def _percent(value: float) -> float:
    if not 0 <= value <= 100:
        raise GraderError(f"--fail-under: {value!r} must be between 0 and 100")
    return value


def cmd_grade(args: argparse.Namespace) -> int:
    course = load_course(args.course)
    lang = args.lang or course.default_lang
    fail_under = _percent(args.fail_under) if args.fail_under is not None else None
    if not args.submission.exists():
        raise GraderError(f"submission not found: {args.submission}")
    code = ExitCode.OK
    try:
        report = grade(args.submission, course, device=args.device, lang=lang)
    except GraderError:
        raise
    except Exception as exc:  # noqa: BLE001 - a grader bug still leaves a report behind
        traceback.print_exc()
        report = failed_report(args.submission, course, f"{type(exc).__name__}: {exc}", lang)
        code = ExitCode.INTERNAL
    write_yaml(report, args.output)
    if not args.quiet:
        print(summary(report))
    if code == ExitCode.OK and fail_under is not None and 100 * report.score / report.max_score < fail_under:
        code = ExitCode.BELOW_FAIL_UNDER
    return int(code)


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return {"grade": cmd_grade}[args.command](args)
    except GraderError as exc:
        print(f"grader: error: {exc}", file=sys.stderr)
        return int(exc.exit_code)
    except KeyboardInterrupt:
        print("grader: interrupted", file=sys.stderr)
        return 130
