"""What a plan prints: the ranked table and the dropped families, or one JSON object.

The JSON object (``--json``) is exactly::

    {"world_size", "gpu", "candidates": [{"layout": {degree name: value, ...}, "peak_bytes",
     "fits", "step_seconds", "tokens_per_second_per_gpu", "mfu",
     "parts": {"compute", "exposed_comm", "bubble"}}], "dropped": [{"layout", "reason"}]}

candidates best first (those that fit by predicted step time, then the others by memory); a
candidate whose step could not be priced (a role failed to build) has ``null`` figures.
"""

from __future__ import annotations

from typing import Any

from hyper_parallel.plan.space import label

GIB = 1 << 30
#: Dropped families the table lists before it refers to ``--json`` for the rest.
TABLE_DROPPED = 25


def candidate_json(item: Any, global_batch: int) -> dict[str, Any]:
    p = item.prediction
    return {
        "layout": item.candidate.describe(global_batch),
        "peak_bytes": item.peak_bytes,
        "fits": item.fits,
        "step_seconds": None if p is None else p.step_seconds,
        "tokens_per_second_per_gpu": item.tokens_per_second_per_gpu,
        "mfu": item.mfu,
        "parts": {"compute": None if p is None else p.compute,
                  "exposed_comm": None if p is None else p.exposed_comm,
                  "bubble": None if p is None else p.bubble},
    }


def to_json(result: Any) -> dict[str, Any]:
    return {
        "world_size": result.world,
        "gpu": result.gpu.name,
        "candidates": [candidate_json(e, result.global_batch) for e in result.evaluated],
        "dropped": [d.as_json() for d in result.dropped],
    }


def _row(rank: str, item: Any, gbs: int) -> list[str]:
    p = item.prediction
    mark = " (the recipe's)" if item.recipe else ""
    verdict = "" if item.fits else " oom"
    if item.report is not None and item.report.problems:
        verdict = " failed"
    return [
        rank,
        label(item.candidate.describe(gbs)) + mark,
        f"{item.peak_bytes / GIB:.1f} GiB{verdict}",
        "-" if p is None else f"{p.step_seconds:.3g} s",
        "-" if item.tokens_per_second_per_gpu is None else f"{item.tokens_per_second_per_gpu:,.0f}",
        "-" if item.mfu is None else f"{100 * item.mfu:.1f} %",
        "-" if p is None else (f"{p.largest_cost} ({p.compute:.3g} + {p.exposed_comm:.3g} "
                               f"+ {p.bubble:.3g} s)"),
    ]


def _table(rows: list[list[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]


def to_text(result: Any, origin: str) -> str:
    """The plan as a reader wants it: the ranked layouts, then why the others are not there."""
    gbs = result.global_batch
    lines = [
        (f"plan: {origin} on {result.nodes} node(s) x {result.gpus_per_node} "
         f"{result.gpu.name} = {result.world} ranks, {gbs} sequences of {result.seq_len} tokens "
         f"a step; priced with the {result.hardware.name} profile"),
        "",
    ]
    head = ["#", "layout", "memory", "step", "tokens/s/GPU", "MFU",
            "largest cost (compute + exposed comm + bubble)"]
    fitting = [e for e in result.evaluated if e.fits]
    rest = [e for e in result.evaluated if not e.fits]
    if fitting:
        rows = [head] + [_row(str(i), e, gbs) for i, e in enumerate(fitting, 1)]
        lines += _table(rows)
    else:
        lines.append("no layout preflighted fits.")
    if rest:
        lines += ["", "preflighted, does not fit:"]
        lines += ["  " + line for line in _table([head] + [_row("-", e, gbs) for e in rest])[1:]]
    if result.dropped:
        lines += ["", f"dropped ({len(result.dropped)}):"]
        lines += [f"  {d.reason}" for d in result.dropped[:TABLE_DROPPED]]
        if len(result.dropped) > TABLE_DROPPED:
            lines.append(f"  ... and {len(result.dropped) - TABLE_DROPPED} more (--json lists "
                         "every one)")
    lines += ["", (f"searched {result.considered} layouts; {result.preflights} preflighted "
                   f"(budget {result.budget}) in {result.seconds:.0f} s. Memory is preflight's "
                   "(see docs/preflight.md); the step time is a model of the preflighted step's "
                   "work on the profile, for ranking (docs/plan.md says what it cannot see).")]
    return "\n".join(lines)


__all__ = ["candidate_json", "to_json", "to_text"]
