"""``captcha-tasks bench altcha`` at a small scale: its figures add up, every solve found
the number its challenge hid, and the command prints them."""

from __future__ import annotations

import json

from click.testing import CliRunner

from captcha_tasks.devtools.bench.altcha import AltchaOptions, run_altcha
from captcha_tasks.devtools.bench.cli import bench_group


def test_the_report_adds_up() -> None:
    seen: list[str] = []
    report = run_altcha(AltchaOptions(max_number=5_000, solves=4, processes=2), seen.append)
    assert len(seen) == 3
    assert report["max_number"] == 5_000 and report["algorithm"] == "SHA-256"
    assert report["hashes_per_second_per_core"] > 10_000
    assert 0 < report["mean_hashes_per_solve"] <= 5_001
    whole = report["whole_run"]
    assert (whole["processes"], whole["solves"]) == (2, 8)
    assert whole["wall_seconds"] > 0 and whole["cpu_seconds"] > 0
    assert whole["solves_per_second_per_process"] * 2 <= whole["solves_per_second"] + 0.02


def test_the_command_prints_json() -> None:
    args = ["altcha", "--max-number", "2000", "--solves", "2", "--processes", "1", "--json"]
    done = CliRunner().invoke(bench_group, [*args, "--algorithm", "SHA-512"])
    assert done.exit_code == 0, done.output
    report = json.loads(done.stdout)
    assert report["algorithm"] == "SHA-512" and report["whole_run"]["solves"] == 2
