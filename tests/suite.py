"""``make test``: lint, types and the four test tiers, side by side, then one summary.

``python -m tests.suite [TIER ...]`` runs the named tiers (all of them by default) as
``make <tier>`` children (the ``docs`` tier: ``make docs-check``, the site built with
``--strict`` and its links checked; the ``sdk`` tier: ``make sdk``, the official SDKs'
tests in a virtualenv of their own, bootstrapped on first use), each writing its whole
output to ``.run/test/<tier>.log``.
While they run, one progress line a while says how far each has come; at the end, a
table gives each tier's counts and wall time, then the failures (and the tail of each
failed tier's log), then every test skipped for want of a tool, with the command that
installs it. The last line is the run's total, in pytest's words.

The tiers mostly wait on sockets and sleeping solvers, so the two cores of a small
machine have room for them together: the unit tier, lint and types fill the first
minutes while the integration tier (the longest) runs from the start; the fault rows
start once the unit tier has freed its share. ``--serial`` runs one tier after another.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LOGS = ROOT / ".run" / "test"

#: Every tier, in the order the summary lists them.
TIERS = ("lint", "types", "docs", "unit", "integration", "sdk", "faults")
#: The make target of a tier whose name is not one (``make docs`` serves the site).
TARGETS = {"docs": "docs-check"}
#: Tiers that wait for another to end before they start (``tier: after``).
AFTER = {"faults": "unit"}
#: A progress line at most this often (seconds).
PROGRESS_EVERY = 30.0

#: pytest's closing line ("==== 1 failed, 16 passed in 133.51s (0:02:13) ====", or the
#: same without the rules under ``-q``).
_SUMMARY = re.compile(r"^(?:=+ )?(?P<body>\d+ \w+(?:, \d+ \w+)*) in [\d.]+s")
_COUNT = re.compile(r"(\d+) (passed|failed|errors?|skipped|xfailed|xpassed|deselected)")
#: pytest-xdist's count of the tests it shares out, and pytest's ``-q`` progress lines
#: (one mark a test: ``.`` passed, ``F`` failed, ``E`` error, ``s`` skipped, ...).
_ITEMS = re.compile(r"^\d+ workers? \[(\d+) items?\]", re.MULTILINE)
_MARKS = re.compile(r"^(?P<marks>[.FEsxX]+)[ ]*(?:\[\s*\d+%\])?$", re.MULTILINE)


@dataclass
class Tier:
    name: str
    log: Path
    proc: subprocess.Popen[bytes] | None = None
    started: float = 0.0
    ended: float = 0.0
    counts: dict[str, int] = field(default_factory=dict)

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def done(self) -> bool:
        return self.proc is not None and self.proc.poll() is not None

    @property
    def ok(self) -> bool:
        return self.proc is not None and self.proc.returncode == 0

    @property
    def is_pytest(self) -> bool:
        return self.name in ("unit", "integration", "sdk", "faults")

    def start(self) -> None:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(
                ["make", "--no-print-directory", TARGETS.get(self.name, self.name)],
                cwd=ROOT,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                # Its own process group: an interrupt reaches it through stop(), once.
                start_new_session=True,
            )
        self.started = time.monotonic()

    def text(self) -> str:
        try:
            return self.log.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def progress(self) -> str:
        if not self.proc:
            return "waiting"
        seconds = (self.ended or time.monotonic()) - self.started
        if self.done:
            return f"{'ok' if self.ok else 'FAILED'} ({seconds:.0f} s)"
        if self.is_pytest:
            text = self.text()
            total = _ITEMS.search(text)
            marks = "".join(m["marks"] for m in _MARKS.finditer(text))
            if total:
                bad = sum(marks.count(c) for c in "FE")
                trouble = f", {bad} failed" if bad else ""
                return f"{len(marks)}/{total[1]}{trouble} ({seconds:.0f} s)"
        return f"running ({seconds:.0f} s)"

    def read_counts(self) -> None:
        for line in reversed(self.text().splitlines()):
            match = _SUMMARY.match(line.strip())
            if match:
                for number, word in _COUNT.findall(match["body"]):
                    key = "errors" if word.startswith("error") else word
                    self.counts[key] = self.counts.get(key, 0) + int(number)
                return


def _lines(tier: Tier, prefix: str) -> list[str]:
    """The short test summary's lines that start with ``prefix`` (pytest's ``-ra``)."""
    return [line for line in tier.text().splitlines() if line.startswith(prefix)]


def stop(tiers: Iterable[Tier], grace: float = 60.0) -> None:
    """SIGINT to each running tier's process group (pytest tears its fixtures down), then
    SIGKILL to any group still there after ``grace`` seconds."""
    running = [t for t in tiers if t.running]
    for tier in running:
        assert tier.proc is not None
        with contextlib.suppress(ProcessLookupError):
            os.killpg(tier.proc.pid, signal.SIGINT)
    deadline = time.monotonic() + grace
    for tier in running:
        assert tier.proc is not None
        try:
            tier.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(tier.proc.pid, signal.SIGKILL)
            tier.proc.wait(timeout=10)


def run(tiers: dict[str, Tier], serial: bool) -> int:
    began = time.monotonic()
    print(f"make test: {', '.join(tiers)}; each tier's output in {LOGS.relative_to(ROOT)}/")
    last_progress = began
    while True:
        for tier in tiers.values():
            if tier.done and not tier.ended:
                tier.ended = time.monotonic()
                print(f"  {tier.name:<12} {tier.progress()}", flush=True)
        waiting = [t for t in tiers.values() if t.proc is None]
        running = [t for t in tiers.values() if t.running]
        if not waiting and not running:
            break
        for tier in waiting:
            after = tiers.get(AFTER.get(tier.name, ""))
            if serial and running:
                break
            if not serial and after is not None and not after.done:
                continue
            tier.start()
            running.append(tier)
            if serial:
                break
        now = time.monotonic()
        if now - last_progress >= PROGRESS_EVERY:
            last_progress = now
            states = ", ".join(
                f"{t.name} {t.progress()}" for t in tiers.values() if not t.done and t.proc
            )
            print(f"  [{now - began:4.0f} s] {states}", flush=True)
        time.sleep(0.5)
    return report(list(tiers.values()), time.monotonic() - began)


def report(tiers: list[Tier], seconds: float) -> int:
    for tier in tiers:
        tier.read_counts()
    failed = [t for t in tiers if not t.ok]
    for tier in failed:
        shown = tier.log.relative_to(ROOT) if tier.log.is_relative_to(ROOT) else tier.log
        print(f"\n---- {tier.name} failed: the end of {shown} ----")
        print("\n".join(tier.text().splitlines()[-60:]))
    skipped = [(t.name, line) for t in tiers for line in _lines(t, "SKIPPED")]
    if skipped:
        print("\nSkipped (a missing tool's reason names the command that installs it):")
        for name, line in skipped:
            print(f"  {name}: {line.removeprefix('SKIPPED ')}")
    print("\ntier          result   passed  failed  skipped   wall")
    total: dict[str, int] = {}
    for tier in tiers:
        counts = tier.counts
        for key, value in counts.items():
            total[key] = total.get(key, 0) + value
        bad = counts.get("failed", 0) + counts.get("errors", 0)
        cells = (
            f"{counts.get('passed', 0):>6}  {bad:>6}  {counts.get('skipped', 0):>7}"
            if tier.is_pytest
            else f"{'':>6}  {'':>6}  {'':>7}"
        )
        result = "ok" if tier.ok else "FAILED"
        wall = tier.ended - tier.started
        print(f"{tier.name:<12}  {result:<6}  {cells}  {wall:5.0f} s")
    print(f"all tiers in {seconds:.0f} s of wall time")
    # A tier that failed without a failed test to show (lint, types, a crash) counts one.
    bad_total = sum(
        max(1, tier.counts.get("failed", 0) + tier.counts.get("errors", 0)) for tier in failed
    )
    line = f"{total.get('passed', 0)} passed, {bad_total} failed"
    if total.get("skipped"):
        line += f", {total['skipped']} skipped"
    print(line)
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.suite", description=__doc__)
    parser.add_argument("tiers", nargs="*", metavar="TIER", help=f"of {', '.join(TIERS)}")
    parser.add_argument("--serial", action="store_true", help="one tier after another")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.tiers) - set(TIERS))
    if unknown:
        parser.error(f"no tier {', '.join(unknown)}: the tiers are {', '.join(TIERS)}")
    names = [name for name in TIERS if name in (args.tiers or TIERS)]
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    tiers = {name: Tier(name, LOGS / f"{name}.log") for name in names}
    try:
        return run(tiers, args.serial)
    except KeyboardInterrupt:
        print("\nmake test: interrupted; stopping the tiers (their tests clean up)", flush=True)
        stop(tiers.values())
        return 130


if __name__ == "__main__":
    sys.exit(main())
