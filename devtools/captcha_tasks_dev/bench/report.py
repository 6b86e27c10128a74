"""The text reports of ``captcha-tasks-dev bench``: one table, one column per run, one row
per figure, rows grouped under section titles. Each benchmark lists its rows
(:class:`Row`); :func:`render_report` lays them out. Nothing here does I/O."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

__all__ = [
    "Cell",
    "Row",
    "cpu_rows",
    "field",
    "fields",
    "joined",
    "render_report",
    "section",
    "shown",
]

#: One column's text in a row, from that column's (run's) figures.
Cell = Callable[[Mapping[str, Any]], str]


@dataclasses.dataclass(frozen=True)
class Row:
    """A row of the table: a figure, or (``cell`` None) a section title."""

    label: str
    cell: Cell | None = None


def section(title: str) -> Row:
    return Row(title)


def shown(value: Any, spec: str) -> str:
    """``value`` formatted with ``spec``; ``-`` when it is None (not applicable)."""
    return "-" if value is None else format(value, spec)


def field(key: str, spec: str = "") -> Cell:
    """The figure ``key`` formatted with ``spec``."""
    return lambda figures: shown(figures.get(key), spec)


def joined(*cells: Cell) -> Cell:
    """Several figures in one column, ``a / b / c``."""
    return lambda figures: " / ".join(cell(figures) for cell in cells)


def fields(*keys: str, spec: str = "") -> Cell:
    """The figures ``keys``, each formatted with ``spec``, as ``a / b / c``."""
    return joined(*(field(key, spec) for key in keys))


def cpu_rows(unit: str) -> list[Row]:
    """The CPU section of both benchmarks; ``unit``: what the workers' CPU seconds are
    divided by (figure ``worker_cpu_per_<unit>``: ``solve``, ``page``)."""
    return [
        section("CPU"),
        Row(f"worker CPU seconds per {unit}", field(f"worker_cpu_per_{unit}", ".4f")),
        Row("worker CPU seconds (all worker processes)", field("worker_cpu_seconds", ".2f")),
        Row(
            "redis-server / sandbox / harness CPU seconds",
            fields("redis_cpu_seconds", "sandbox_cpu_seconds", "harness_cpu_seconds", spec=".2f"),
        ),
        Row("machine CPU busy during the run (all cores)", field("machine_cpu_busy", ".0%")),
    ]


def render_report(
    intro: Sequence[str],
    environment: Mapping[str, str],
    rows: Sequence[Row],
    columns: Sequence[Mapping[str, Any]],
) -> list[str]:
    """``intro``, the environment passed to the workers (if any), a blank line and the
    table: a header of the columns' ``label``, then each row's label and cells (right
    aligned), each section title as a rule across the table."""
    lines = list(intro)
    if environment:
        lines.append(f"environment passed to the workers: {environment}")
    headers = [column["label"] for column in columns]
    width = max(len(row.label) for row in rows) + 2
    cells = [[row.cell(c) if row.cell else "" for c in columns] for row in rows]
    col = [max([len(h), *(len(line[i]) for line in cells)]) + 2 for i, h in enumerate(headers)]
    lines.append("")
    lines.append("".ljust(width) + "".join(h.rjust(c) for h, c in zip(headers, col, strict=True)))
    for row, line in zip(rows, cells, strict=True):
        if row.cell is None:
            lines.append(f"-- {row.label} ".ljust(width + sum(col), "-"))
            continue
        lines.append(
            row.label.ljust(width) + "".join(v.rjust(c) for v, c in zip(line, col, strict=True))
        )
    return lines
