"""Print the fault suite's table, and write it into docs/RELIABILITY.md.

``python -m tests.chaos.report [--rows FILE] [--write docs/RELIABILITY.md]``: reads the
rows the suite recorded (``.run/chaos/rows.jsonl`` unless ``CAPTCHA_TASKS_CHAOS_ROWS``
or ``--rows`` says otherwise) and prints them as a Markdown table; ``--write`` replaces
the table between the markers of the document and the line that says when it ran.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys
from pathlib import Path
from typing import Any

from tests.chaos.harness import rows_file

BEGIN = "<!-- chaos table: begin (written by make chaos) -->"
END = "<!-- chaos table: end -->"
COLUMNS = (
    "Fault",
    "What was run",
    "Tasks",
    "Solved",
    "Typed errors",
    "Refused at send",
    "Lost",
    "Duplicate submits",
    "Provider requests (per task)",
    "Leaked secrets",
)


def load(path: Path) -> list[dict[str, Any]]:
    """The recorded rows in the suite's order (by their test's file and line), whatever
    order the tests that recorded them ended in."""
    rows = []
    for line in path.read_text().splitlines():
        if line.strip():
            rows.append(json.loads(line))
    return sorted(rows, key=lambda row: tuple(row.get("test") or ("", 0, "")))


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{name} {n}" for name, n in sorted(counts.items())) or "0"


def _lost(row: dict[str, Any]) -> str:
    explained = row.get("explained_losses", 0)
    if not explained:
        return str(row["lost"])
    return f"{row['lost']} ({explained} in the replication window)"


def broke_a_promise(row: dict[str, Any]) -> bool:
    """Lost (beyond what the row proved lost to its fault), duplicated, leaked, untyped."""
    lost = row["lost"] > row.get("explained_losses", 0)
    return bool(lost or row["duplicates"] or row["leaked"] or row["untyped"])


def table(rows: list[dict[str, Any]]) -> str:
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for row in rows:
        tasks = row["tasks"]
        per_task = row["provider_requests"] / tasks if tasks else 0.0
        run = row["run"] + (f" ({row['notes']})" if row.get("notes") else "")
        cells = [
            row["fault"],
            run.replace("|", "/"),
            str(tasks),
            str(row["solved"]),
            _counts(row["typed_errors"]),
            _counts(row["refused_at_send"]),
            _lost(row),
            str(row["duplicates"]),
            f"{row['provider_requests']} ({per_task:.2f})",
            str(row["leaked"]),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def write(doc: Path, rows: list[dict[str, Any]]) -> None:
    text = doc.read_text()
    if BEGIN not in text or END not in text:
        raise SystemExit(f"{doc}: the markers {BEGIN!r} and {END!r} are missing")
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    scale = os.environ.get("CAPTCHA_TASKS_CHAOS", "quick")
    ran = (
        f"Last run: {when}, scale `{scale}`, {len(rows)} rows, on {platform.system()} "
        f"{platform.machine()} with {os.cpu_count()} CPUs (`make chaos`)."
    )
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    doc.write_text(f"{head}{BEGIN}\n{ran}\n\n{table(rows)}\n{END}{tail}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=Path, default=None, help="the rows file")
    parser.add_argument("--write", type=Path, default=None, help="the document to update")
    args = parser.parse_args(argv)
    path = args.rows or rows_file()
    if not path.exists():
        print(f"no rows at {path}: run the fault suite first (make chaos)", file=sys.stderr)
        return 1
    rows = load(path)
    print(table(rows))
    bad = [r["fault"] for r in rows if broke_a_promise(r)]
    if bad:
        print(f"\nrows that broke a promise: {', '.join(bad)}", file=sys.stderr)
    if args.write:
        write(args.write, rows)
        print(f"\nwrote the table into {args.write}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
