"""The fault suite's accounting: duplicate submits, the table and the document it writes.

If these were wrong, every row of docs/RELIABILITY.md could say 0 and mean nothing.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from tests.chaos import report
from tests.chaos.harness import Row, duplicate_submits


def captcha(fingerprint: str, at: float, *, unsolvable: bool = False) -> dict[str, object]:
    return {"fingerprint": fingerprint, "submitted_at": at, "unsolvable": unsolvable}


def test_a_second_submit_of_one_job_is_a_duplicate() -> None:
    assert duplicate_submits([captcha("a", 1.0), captcha("b", 2.0)]) == 0
    assert duplicate_submits([captcha("a", 1.0), captcha("a", 2.0)]) == 1
    assert duplicate_submits([captcha("a", 3.0), captcha("a", 1.0), captcha("a", 2.0)]) == 2


def test_the_resubmit_after_unsolvable_is_not_a_duplicate() -> None:
    assert duplicate_submits([captcha("a", 1.0, unsolvable=True), captcha("a", 2.0)]) == 0
    # ...but a submit after a solvable one is, whatever came before.
    seq = [captcha("a", 1.0, unsolvable=True), captcha("a", 2.0), captcha("a", 3.0)]
    assert duplicate_submits(seq) == 1


def test_the_table_and_the_document(tmp_path: Path) -> None:
    good = Row(
        "Wrong API key",
        "a bad key",
        tasks=4,
        typed_errors={"InvalidApiKey": 4},
        provider_requests=2,
    )
    bad = Row(
        "Redis restart", "restart | mid-run", tasks=10, solved=7, lost=3, provider_requests=25
    )
    rows_path = tmp_path / "rows.jsonl"
    rows_path.write_text(good.as_json() + "\n" + bad.as_json() + "\n")
    rows = report.load(rows_path)
    table = report.table(rows)
    lines = table.splitlines()
    assert len(lines) == 4 and lines[0].startswith("| Fault |")
    assert "| InvalidApiKey 4 |" in lines[2] and "| 2 (0.50) |" in lines[2]
    assert "restart / mid-run" in lines[3] and "| 25 (2.50) |" in lines[3]

    doc = tmp_path / "RELIABILITY.md"
    doc.write_text(f"# Title\n\n{report.BEGIN}\nold table\n{report.END}\n\nafter\n")
    report.write(doc, rows)
    text = doc.read_text()
    assert "old table" not in text and "Last run:" in text and text.endswith("\n\nafter\n")
    assert table in text
    # A row that broke a promise makes the report exit non-zero.
    assert report.main(["--rows", str(rows_path)]) == 1
    rows_path.write_text(good.as_json() + "\n")
    assert report.main(["--rows", str(rows_path)]) == 0


def test_a_document_without_markers_is_refused(tmp_path: Path) -> None:
    doc = tmp_path / "RELIABILITY.md"
    doc.write_text("# no markers\n")
    with pytest.raises(SystemExit, match="markers"):
        report.write(doc, [json.loads(Row("x", "y").as_json())])


def test_losses_proven_to_be_the_faults_are_shown_as_such(tmp_path: Path) -> None:
    # The Sentinel row whose replica is behind: what it accepted in the window is lost.
    window = Row(
        "Sentinel failover, replica behind",
        "cut",
        tasks=10,
        solved=7,
        lost=3,
        explained_losses=3,
        provider_requests=20,
    )
    rows_path = tmp_path / "rows.jsonl"
    rows_path.write_text(window.as_json() + "\n")
    assert "| 3 (3 in the replication window) |" in report.table(report.load(rows_path))
    assert report.main(["--rows", str(rows_path)]) == 0
    # One more lost than it proved is a broken promise.
    rows_path.write_text(dataclasses.replace(window, lost=4).as_json() + "\n")
    assert report.main(["--rows", str(rows_path)]) == 1
