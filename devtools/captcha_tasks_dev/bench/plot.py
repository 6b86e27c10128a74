"""Throughput over time, our engine beside the other columns: ``bench solve --plot``.

Each design's solves are counted in bins of half a solve's latency from its first
enqueue (``completion_series``, kept in the report so ``--json`` carries it too) and
drawn as throughput over T/L, the rate a plan of T threads allows at latency L.
matplotlib comes with the dev extra; the benchmark runs without it unless asked to plot.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from captcha_tasks.errors import ConfigurationError

__all__ = ["completion_series", "write_plot"]


def completion_series(times: Iterable[float], t0: float, width: float) -> list[int]:
    """Completions per bin of ``width`` seconds from ``t0`` (the first bin starts at t0)."""
    counts: list[int] = []
    for at in times:
        index = max(0, math.floor((at - t0) / width))
        counts.extend([0] * (index + 1 - len(counts)))
        counts[index] += 1
    return counts


def write_plot(report: dict[str, Any], path: Path) -> None:
    """Draw each design's ``completions_series`` of ``report`` (``run_bench``'s) to a PNG."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:  # pragma: no cover - the dev extra has it
        raise ConfigurationError(
            "--plot needs matplotlib: pip install 'captcha_tasks[dev]'"
        ) from None
    params = report["parameters"]
    target = params["threads"] / params["latency"]
    fig, ax = plt.subplots(figsize=(8, 4), dpi=100)
    for design in report["designs"].values():
        series, width = design.get("completions_series"), design.get("series_seconds")
        if not series or not width:
            continue
        xs = [(i + 0.5) * width for i in range(len(series))]
        ys = [n / width / target for n in series]
        ax.step(xs, ys, where="mid", label=design["label"])
    ax.axhline(1.0, color="grey", linestyle=":", linewidth=1, label="T/L (the plan's rate)")
    ax.set_xlabel("seconds since the first enqueue")
    ax.set_ylabel("throughput / (T/L)")
    batch = "no batch reads" if params.get("no_batch") else "batch reads"
    ax.set_title(
        f"T={params['threads']}, L={params['latency']} s, {params['solves']} solves, "
        f"{params['provider']}, {batch}"
    )
    ax.set_ylim(bottom=0)
    ax.legend(loc="lower right", fontsize="small")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
