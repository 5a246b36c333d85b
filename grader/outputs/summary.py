"""The class at a glance, for the instructor: score distribution and the pitfalls most fallen into.

Built from the learners' YAML reports (a batch, or the merged outputs of several shards) and
written twice: ``summary.yaml`` for tools and ``summary.html`` for people. The page is one
self-contained file: inline CSS and an inline SVG chart, no script, and a Content-Security-Policy
that forbids every request, so opening it never touches the network.

The page speaks the batch's language (``--lang``; a merge, its reports' language): its words are
the ``summary.*`` texts of grader/score/texts/, the exercises' titles and the checks' hints those
of the course in that language. ``summary.yaml`` keeps English keys for tools; its titles and
hints are in the batch's language too. With a roster (grader/outputs/classlist.py) both list
the learners who submitted nothing and the submissions that matched nobody; every figure counts
the submissions graded.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from html import escape
from pathlib import Path
from typing import Any, get_args

from grader import yamltext
from grader.course import Course, Lang, Visibility
from grader.intake.names import shown
from grader.outputs.classlist import ClassRecord
from grader.outputs.report import write_atomic
from grader.score import texts
from grader.score.results import Report
from grader.wire.messages import CheckStatus

SUMMARY_STEM = "summary"
SLOWEST = 10  # learners listed by grading time
BINS = 10  # the distribution's bars, each 10 % of the maximum score wide
STATUSES: tuple[CheckStatus, ...] = get_args(CheckStatus)
CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"


@dataclass(frozen=True)
class Bin:
    low: int  # percent of the maximum score, inclusive
    high: int  # exclusive, except the last bar, which also holds full marks
    learners: int


@dataclass(frozen=True)
class ExerciseStats:
    id: str
    title: str
    max_score: float
    mean: float
    full_marks: int
    attempted: int


@dataclass(frozen=True)
class CheckStats:
    id: str
    exercise: str
    visibility: Visibility
    max_points: float
    counts: Mapping[str, int]  # status -> learners
    hint: str

    @property
    def attempted(self) -> int:
        return sum(n for status, n in self.counts.items() if status != "not_attempted")

    @property
    def pass_rate(self) -> float | None:
        """Passed among the learners who attempted the check; None when nobody did."""
        return self.counts.get("passed", 0) / self.attempted if self.attempted else None


@dataclass(frozen=True)
class Slow:
    learner: str
    seconds: float  # what the wall-clock bound counts (Report.learner_seconds)
    stopped: bool  # cut at the wall-clock bound (its report's notes say wall_clock_limit)


@dataclass(frozen=True)
class ClassSummary:
    title: str
    learners: int
    max_score: float
    mean: float
    median: float
    lowest: float
    highest: float
    bins: tuple[Bin, ...]
    exercises: tuple[ExerciseStats, ...]
    checks: tuple[CheckStats, ...]  # most-failed first
    lang: Lang = "en"
    # Learners the grader could not grade (its environment failed), with the reason: left out
    # of every figure above, and regraded by the next batch run.
    not_graded: tuple[tuple[str, str], ...] = ()
    # The learners whose grading took longest, slowest first: who holds the workers, and how close
    # the wall-clock bound (--learner-timeout) is to cutting someone.
    slowest: tuple[Slow, ...] = ()
    # With a roster: who submitted nothing (key, name), what matched nobody (learner, entry, why),
    # and what the gradebook gave the first ("zero" or "empty").
    missing: tuple[tuple[str, str], ...] = ()
    unmatched: tuple[tuple[str, str, str], ...] = ()  # (learner, entry, why in the summary's language)
    missing_policy: str = ""


def _percent_bin(score: float, max_score: float) -> int:
    percent = 100.0 * score / max_score if max_score else 0.0
    return min(max(int(percent // (100 / BINS)), 0), BINS - 1)


def summarize(reports: Iterable[Report], course: Course, lang: Lang,
              record: ClassRecord | None = None) -> ClassSummary:
    every = list(reports)
    not_graded = tuple(sorted((shown(r.learner), shown(r.grader_error)) for r in every if r.grader_error))
    by_time = sorted(every, key=lambda r: (-r.learner_seconds, r.learner))[:SLOWEST]
    slowest = tuple(Slow(shown(r.learner), r.learner_seconds, "wall_clock_limit" in r.notes) for r in by_time)
    graded = [r for r in every if not r.grader_error]
    scores = [r.score for r in graded]
    max_score = max((r.max_score for r in graded), default=course.max_score)
    counts = [0] * BINS
    for report in graded:
        counts[_percent_bin(report.score, report.max_score)] += 1
    width = 100 // BINS
    bins = tuple(Bin(i * width, (i + 1) * width, n) for i, n in enumerate(counts))

    exercises = []
    for ex in course.exercises:
        results = [res for r in graded for res in r.exercises if res.id == ex.id]
        exercises.append(ExerciseStats(
            ex.id, ex.title[lang], ex.max_score,
            statistics.fmean(res.score for res in results) if results else 0.0,
            sum(1 for res in results if res.score >= res.max_score - 1e-9),
            sum(1 for res in results if res.status != "not_attempted"),
        ))

    order = {check.id: i for i, check in enumerate(course.checks)}
    tally: dict[str, dict[str, int]] = {}
    meta: dict[str, tuple[str, Visibility, float]] = {}
    for report in graded:
        for result in report.exercises:
            for check in result.checks:
                tally.setdefault(check.id, dict.fromkeys(STATUSES, 0))
                tally[check.id][check.status] = tally[check.id].get(check.status, 0) + 1
                meta[check.id] = (result.id, check.visibility, check.max_points)
    specs = {check.id: check for check in course.checks}
    checks = [CheckStats(cid, *meta[cid], tally[cid], texts.hint(lang, specs[cid].test_file) if cid in specs else "")
              for cid in tally]
    checks.sort(key=lambda c: (c.pass_rate is None, c.pass_rate or 0.0, -c.attempted, order.get(c.id, len(order)),
                               c.id))
    missing = tuple((m.key, m.name) for m in record.members if not record.submissions.get(m.key)) if record else ()
    unmatched = tuple((u.learner, u.submission, texts.ui(lang, f"summary.unmatched.{u.reason}").format(
        count=len(u.candidates), learners=", ".join(u.candidates))) for u in record.unmatched) if record else ()
    return ClassSummary(
        title=course.title[lang],
        learners=len(graded),
        max_score=max_score,
        mean=statistics.fmean(scores) if scores else 0.0,
        median=statistics.median(scores) if scores else 0.0,
        lowest=min(scores, default=0.0),
        highest=max(scores, default=0.0),
        bins=bins,
        exercises=tuple(exercises),
        checks=tuple(checks),
        lang=lang,
        not_graded=not_graded,
        slowest=slowest,
        missing=missing,
        unmatched=unmatched,
        missing_policy=record.missing if record else "",
    )


def as_dict(summary: ClassSummary) -> dict[str, Any]:
    return {
        "kind": "class_summary",
        "lang": summary.lang,
        "title": summary.title,
        "learners": summary.learners,
        "score": {"max_score": summary.max_score, "mean": round(summary.mean, 2), "median": summary.median,
                  "lowest": summary.lowest, "highest": summary.highest},
        "distribution": [{"percent": f"{b.low}-{b.high}", "learners": b.learners} for b in summary.bins],
        "exercises": {
            ex.id: {"title": ex.title, "max_score": ex.max_score, "mean": round(ex.mean, 2),
                    "full_marks": ex.full_marks, "attempted": ex.attempted}
            for ex in summary.exercises
        },
        # Most-failed first: what to reteach.
        "checks": [
            {"id": c.id, "exercise": c.exercise, "visibility": c.visibility, "max_points": c.max_points,
             "attempted": c.attempted,
             "pass_rate": None if c.pass_rate is None else round(c.pass_rate, 3),
             **{status: c.counts.get(status, 0) for status in STATUSES},
             "hint": c.hint}
            for c in summary.checks
        ],
        "not_graded": [{"learner": name, "grader_error": reason} for name, reason in summary.not_graded],
        "slowest": [{"learner": s.learner, "seconds": s.seconds, "wall_clock_limit": s.stopped}
                    for s in summary.slowest],
        **({"missing": [{"learner": key, "name": name} for key, name in summary.missing],
            "missing_scores": summary.missing_policy,
            "unmatched": [{"learner": learner, "submission": entry, "reason": reason}
                          for learner, entry, reason in summary.unmatched]}
           if summary.missing_policy else {}),
    }


_CSS = """
body { font: 15px/1.45 system-ui, sans-serif; margin: 2rem auto; max-width: 64rem; color: #1d2330; padding: 0 1rem; }
h1 { font-size: 1.5rem; } h2 { font-size: 1.15rem; margin-top: 2rem; }
.figures span { display: inline-block; margin-right: 1.5rem; }
table { border-collapse: collapse; width: 100%; }
th, td { text-align: left; padding: .3rem .5rem; vertical-align: top; }
tr + tr td { border-top: 1px solid #e3e6ec; } td.n { text-align: right; font-variant-numeric: tabular-nums; }
td.r { white-space: nowrap; } th.n { text-align: right; }
.rate { display: inline-block; width: 5rem; height: .8rem; background: #f3d9d6; vertical-align: middle; }
.rate i { display: block; height: 100%; background: #3f8f5b; }
.hint { color: #4a5263; font-size: .9rem; }
svg .bar { fill: #3f6fd8; } svg text { font: 12px system-ui, sans-serif; fill: #1d2330; }
svg .axis { stroke: #8a91a0; }
"""

_W, _H, _LEFT, _BOTTOM, _TOP = 640, 260, 40, 36, 16


def _t(lang: Lang, key: str, html: Mapping[str, str] | None = None, **params: object) -> str:
    """A summary text in ``lang``, HTML-escaped, its placeholders filled: ``params`` escaped,
    ``html`` (the grader's own markup) as it is."""
    values = {name: escape(str(value)) for name, value in params.items()}
    return escape(texts.ui(lang, f"summary.{key}")).format(**values, **(html or {}))


def _chart(bins: tuple[Bin, ...], lang: Lang) -> str:
    """The score distribution as an inline SVG bar chart (one <rect class="bar"> per bin)."""
    top = max((b.learners for b in bins), default=0) or 1
    plot_w, plot_h = _W - _LEFT - 8, _H - _BOTTOM - _TOP
    step = plot_w / len(bins)
    parts = [f'<svg id="distribution" width="{_W}" height="{_H}" '
             f'viewBox="0 0 {_W} {_H}" role="img" aria-label="{_t(lang, "distribution")}">']
    base = _TOP + plot_h
    parts.append(f'<line class="axis" x1="{_LEFT}" y1="{base}" x2="{_W - 8}" y2="{base}"/>')
    parts.append(f'<line class="axis" x1="{_LEFT}" y1="{_TOP}" x2="{_LEFT}" y2="{base}"/>')
    parts.append(f'<text x="{_LEFT - 6}" y="{_TOP + 4}" text-anchor="end">{top}</text>')
    parts.append(f'<text x="{_LEFT - 6}" y="{base}" text-anchor="end">0</text>')
    for i, b in enumerate(bins):
        height = plot_h * b.learners / top
        x = _LEFT + i * step + 3
        label = _t(lang, "bar.one" if b.learners == 1 else "bar.other", low=b.low, high=b.high, count=b.learners)
        parts.append(f'<rect class="bar" x="{x:.1f}" y="{base - height:.1f}" width="{step - 6:.1f}" '
                     f'height="{height:.1f}" data-learners="{b.learners}"><title>{label}</title></rect>')
        if b.learners:
            parts.append(f'<text x="{x + (step - 6) / 2:.1f}" y="{base - height - 4:.1f}" '
                         f'text-anchor="middle">{b.learners}</text>')
        parts.append(f'<text x="{x + (step - 6) / 2:.1f}" y="{base + 16}" text-anchor="middle">{b.low}</text>')
    parts.append(f'<text x="{_LEFT + plot_w / 2:.1f}" y="{_H - 4}" text-anchor="middle">{_t(lang, "axis")}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _rate(rate: float | None) -> str:
    if rate is None:
        return "—"
    return f'<span class="rate"><i style="width:{100 * rate:.0f}%"></i></span> {100 * rate:.0f}%'


def _not_graded(summary: ClassSummary) -> str:
    if not summary.not_graded:
        return ""
    lang = summary.lang
    rows = "".join(f"<li><b>{escape(name)}</b>: {escape(reason)}</li>" for name, reason in summary.not_graded)
    text = _t(lang, "not_graded.text", {"doctor": "<code>grader doctor</code>", "batch": "<code>grader batch</code>"})
    return (f'<section id="not-graded"><h2>{_t(lang, "not_graded.heading", count=len(summary.not_graded))}</h2>'
            f"<p>{text}</p><ul>{rows}</ul></section>\n")


def _roster(summary: ClassSummary) -> str:
    """Who did not submit, and what matched nobody: only for a batch given a roster."""
    if not summary.missing_policy:
        return ""
    lang = summary.lang
    policy = texts.ui(lang, f"summary.missing.{summary.missing_policy}")
    missing = "".join(f"<li><b>{escape(key)}</b> {escape(name)}</li>" for key, name in summary.missing)
    unmatched = "".join(f"<li><b>{escape(entry)}</b> ({escape(learner)}): {escape(reason)}</li>"
                        for learner, entry, reason in summary.unmatched)
    return (f'<section id="missing"><h2>{_t(lang, "missing.heading", count=len(summary.missing))}</h2>'
            f"<p>{_t(lang, 'missing.text', policy=policy)}</p><ul>{missing}</ul></section>\n"
            f'<section id="unmatched"><h2>{_t(lang, "unmatched.heading", count=len(summary.unmatched))}</h2>'
            f"<p>{_t(lang, 'unmatched.text')}</p><ul>{unmatched}</ul></section>\n")


def _slowest(summary: ClassSummary) -> str:
    if not summary.slowest:
        return ""
    lang = summary.lang
    stopped = _t(lang, "slowest.stopped")
    rows = "".join(f"<tr><td>{escape(s.learner)}</td><td class=n>{s.seconds:.1f} s</td>"
                   f"<td>{stopped if s.stopped else ''}</td></tr>" for s in summary.slowest)
    text = _t(lang, "slowest.text", {"option": "<code>--learner-timeout</code>",
                                      "limit": "<code>limits.run_timeout_s</code>"})
    return (f'<h2>{_t(lang, "slowest.heading")}</h2>\n<p class="hint">{text}</p>\n'
            f'<table id="slowest"><tr><th>{_t(lang, "slowest.learner")}</th>'
            f'<th class=n>{_t(lang, "slowest.seconds")}</th><th></th></tr>\n{rows}</table>\n')


def render_html(summary: ClassSummary) -> str:
    s = summary
    lang = s.lang
    rows_ex = "".join(
        f"<tr><td>{escape(ex.id)}</td><td>{escape(ex.title)}</td><td class=n>{ex.mean:.1f} / {ex.max_score:g}</td>"
        f"<td class=n>{ex.full_marks}</td><td class=n>{ex.attempted}</td></tr>"
        for ex in s.exercises
    )
    rows_checks = "".join(
        f"<tr><td class=n>{rank}</td><td><code>{escape(c.id)}</code><br><span class=hint>{escape(c.hint)}</span></td>"
        f"<td>{_t(lang, 'visibility.' + c.visibility)}</td><td class=r>{_rate(c.pass_rate)}</td>"
        f"<td class=n>{c.counts.get('passed', 0)} / {c.attempted}</td>"
        f"<td class=n>{c.counts.get('failed', 0)}</td><td class=n>{c.counts.get('error', 0)}</td>"
        f"<td class=n>{c.counts.get('timeout', 0)}</td><td class=n>{c.counts.get('not_attempted', 0)}</td></tr>"
        for rank, c in enumerate(s.checks, 1)
    )
    title = _t(lang, "title", title=s.title)
    return f"""<!DOCTYPE html>
<html lang="{lang}">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{CSP}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
<style>{_CSS}</style>
</head>
<body>
<h1>{title}</h1>
<p class="figures"><span>{_t(lang, "learners")}: <b id="learners">{s.learners}</b></span>
<span>{_t(lang, "mean")}: <b>{s.mean:.1f}</b> / {s.max_score:g}</span>
<span>{_t(lang, "median")}: <b>{s.median:.1f}</b></span>
<span>{_t(lang, "lowest")}: <b>{s.lowest:g}</b></span><span>{_t(lang, "highest")}: <b>{s.highest:g}</b></span></p>
{_not_graded(s)}{_roster(s)}<h2>{_t(lang, "distribution")}</h2>
<figure>{_chart(s.bins, lang)}</figure>
<h2>{_t(lang, "exercises")}</h2>
<table id="exercises"><tr><th>{_t(lang, "exercise")}</th><th>{_t(lang, "exercise_title")}</th>
<th class=n>{_t(lang, "mean")}</th><th class=n>{_t(lang, "full_marks")}</th>
<th class=n>{_t(lang, "attempted")}</th></tr>
{rows_ex}</table>
<h2>{_t(lang, "checks")}</h2>
<p class="hint">{_t(lang, "pass_rate_note")}</p>
<table id="checks"><tr><th class=n>#</th><th>{_t(lang, "check")}</th><th>{_t(lang, "visibility")}</th>
<th>{_t(lang, "pass_rate")}</th><th class=n>{_t(lang, "passed")}</th><th class=n>{_t(lang, "failed")}</th>
<th class=n>{_t(lang, "error")}</th><th class=n>{_t(lang, "timeout")}</th>
<th class=n>{_t(lang, "not_attempted")}</th></tr>
{rows_checks}</table>
{_slowest(s)}</body>
</html>
"""


def write_summary(summary: ClassSummary, out_dir: Path) -> None:
    write_atomic(out_dir / f"{SUMMARY_STEM}.yaml",
                 yamltext.dump(as_dict(summary)))
    write_atomic(out_dir / f"{SUMMARY_STEM}.html", render_html(summary))
