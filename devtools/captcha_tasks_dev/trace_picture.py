"""A trace's spans drawn as a waterfall (matplotlib): one bar per span, in start order,
indented under its parent, coloured by the service instance that recorded it, a mark
at each of its events and steps (a read each, on a ``captcha_tasks.reads`` span). The
monitoring guide's picture is drawn from the spans real workers exported in
``tests/integration/test_traces.py`` (``CAPTCHA_TASKS_TRACE_PICTURE``: the PNG's path)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["draw_trace"]


def _depths(spans: Sequence[Any]) -> dict[str, int]:
    parents = {s.span_id: s.parent_id for s in spans}
    depths = {}
    for s in spans:
        depth, at = 0, s.parent_id
        while at in parents and depth < 20:
            depth, at = depth + 1, parents[at]
        depths[s.span_id] = depth
    return depths


def draw_trace(spans: Sequence[Any], path: Path, *, title: str = "") -> None:
    """Draw ``spans`` (:class:`~captcha_tasks_dev.otlp_receiver.ReceivedSpan`, one trace)
    to the PNG at ``path``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    ordered = sorted(spans, key=lambda s: (s.start_ns, s.end_ns))
    start = min(s.start_ns for s in ordered)
    depths = _depths(ordered)
    instances = sorted({str(s.resource.get("service.instance.id", "caller")) for s in ordered})
    colours = dict(zip(instances, ["#4c72b0", "#dd8452", "#55a868", "#c44e52"], strict=False))
    total = (max(s.end_ns for s in ordered) - start) / 1e9
    fig, ax = plt.subplots(figsize=(10, 0.42 * len(ordered) + 1.2))
    for row, s in enumerate(ordered):
        left = (s.start_ns - start) / 1e9
        # A span of a millisecond still shows: at least half a percent of the trace.
        width = max((s.end_ns - s.start_ns) / 1e9, total / 200)
        instance = str(s.resource.get("service.instance.id", "caller"))
        colour = colours.get(instance, "#8172b3")
        ax.barh(row, width, left=left, color=colour, height=0.6, alpha=0.85)
        ticks = [(e["time_ns"] - start) / 1e9 for e in getattr(s, "events", []) if "time_ns" in e]
        # A span of steps (tracing.SpanOfSteps): when each ended, in ms from its start.
        ticks += [left + ms / 1000 for ms in s.attributes.get("captcha_tasks.step_ends_ms", [])]
        if ticks:  # the events and steps (a read each): a mark at each
            ax.plot(ticks, [row] * len(ticks), "|", color="black", markersize=12)
        answer = s.attributes.get("captcha_tasks.answer")
        steps = s.attributes.get("captcha_tasks.steps")
        detail = ", ".join(str(x) for x in (answer, steps and f"{steps} reads") if x)
        label = "    " * depths[s.span_id] + s.name + (f" ({detail})" if detail else "")
        ax.text(-0.02, row, label, ha="right", va="center", fontsize=8, family="monospace")
    ax.set_yticks([])
    ax.invert_yaxis()
    ax.set_xlabel("seconds since the send")
    ax.set_title(title or "one solve's trace", fontsize=10)
    handles = [Rectangle((0, 0), 1, 1, color=colours[i]) for i in instances]
    ax.legend(handles, [f"worker {i}" for i in instances], loc="upper right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
