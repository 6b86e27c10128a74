"""``make test``'s runner (tests/suite.py): what it reads from each tier's log and what it
says at the end. Tiers here are real, trivial processes writing real pytest output."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests import suite

PYTEST_LOG = """\
============================= test session starts ==============================
5 workers [291 items]

........................................................................ [ 24%]
.......F.s
=========================== short test summary info ============================
SKIPPED [1] tests/integration/test_playwright.py:48: Debian's chromium is not \
installed (/usr/bin/chromium): run `make browser`
FAILED tests/integration/test_engine.py::test_x - AssertionError
=================== 1 failed, 289 passed, 1 skipped in 250.10s (0:04:10) ===================
"""


def _tier(tmp_path: Path, name: str, text: str, exit_code: int) -> suite.Tier:
    tier = suite.Tier(name, tmp_path / f"{name}.log")
    tier.log.write_text(text)
    tier.proc = subprocess.Popen([sys.executable, "-c", f"raise SystemExit({exit_code})"])
    tier.proc.wait(timeout=30)
    tier.started, tier.ended = 0.0, 12.0
    return tier


def test_progress_counts_the_tests_done_out_of_those_shared_out(tmp_path: Path) -> None:
    tier = _tier(tmp_path, "integration", PYTEST_LOG, 1)
    text = tier.text()
    assert suite._ITEMS.search(text)[1] == "291"  # type: ignore[index]
    marks = "".join(m["marks"] for m in suite._MARKS.finditer(text))
    assert len(marks) == 82 and marks.count("F") == 1


def test_the_summary_counts_each_tier_lists_skips_and_ends_in_pytests_words(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tiers = [
        _tier(tmp_path, "lint", "All checks passed!\n", 0),
        _tier(tmp_path, "unit", "1904 passed in 97.02s (0:01:37)\n", 0),
        _tier(tmp_path, "integration", PYTEST_LOG, 1),
    ]
    assert suite.report(tiers, 250.0) == 1
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[-1] == "2193 passed, 1 failed, 1 skipped"
    assert "integration failed: the end of" in out and "test_engine.py::test_x" in out
    assert "run `make browser`" in out  # the skip names what installs the tool
    row = next(line for line in lines if line.startswith("unit "))
    assert row.split()[:3] == ["unit", "ok", "1904"]


def test_a_tier_that_fails_outside_pytest_counts_as_one_failure(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tiers = [
        _tier(tmp_path, "types", "error: Incompatible types\n", 1),
        _tier(tmp_path, "unit", "1904 passed in 97.02s (0:01:37)\n", 0),
    ]
    assert suite.report(tiers, 100.0) == 1
    assert capsys.readouterr().out.splitlines()[-1] == "1904 passed, 1 failed"


def test_unknown_tiers_are_refused_by_name(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        suite.main(["unit", "soak"])
    assert info.value.code == 2
    assert "no tier soak" in capsys.readouterr().err
