"""``captcha-tasks-dev bench altcha`` at a small scale: a row per algorithm the official
library offers, each with the library's own solver beside it, every solve checked, and
the command prints them."""

from __future__ import annotations

import json

from click.testing import CliRunner

from captcha_tasks.provider.altcha import ALGORITHMS, ALGORITHMS_V2
from captcha_tasks_dev.bench.altcha import EVERY, AltchaOptions, run_altcha
from captcha_tasks_dev.bench.cli import bench_group


def test_every_algorithm_has_a_row_beside_the_library() -> None:
    assert len(EVERY) == len(ALGORITHMS) + len(ALGORITHMS_V2) == 11
    seen: list[str] = []
    wanted = ("v1 SHA-256", "v2 PBKDF2/SHA-256", "v2 ARGON2ID")
    options = AltchaOptions(max_number=5_000, solves=3, seconds=0.05, algorithms=wanted)
    report = run_altcha(options, seen.append)
    assert len(seen) == 3
    rows = {row["algorithm"]: row for row in report["rows"]}
    assert tuple(rows) == wanted
    for row in rows.values():
        assert row["solves_per_second_per_core"] > 0
        assert row["library_solves_per_second_per_core"] > 0
        assert row["seconds_per_solve"] > 0
    assert rows["v1 SHA-256"]["parameters"] == "maxnumber 5,000"
    assert "64 MiB" in rows["v2 ARGON2ID"]["parameters"]  # the library's default memory
    assert rows["v2 PBKDF2/SHA-256"]["derivations"] >= 2
    assert report["library"].startswith("altcha 2.")


def test_the_command_prints_json_and_text() -> None:
    args = ["altcha", "--max-number", "2000", "--solves", "2", "--seconds", "0.02"]
    done = CliRunner().invoke(bench_group, [*args, "--algorithm", "v1 SHA-512", "--json"])
    assert done.exit_code == 0, done.output
    (row,) = json.loads(done.stdout)["rows"]
    assert row["algorithm"] == "v1 SHA-512" and row["solves"] == 2
    done = CliRunner().invoke(bench_group, [*args, "--algorithm", "v2 SCRYPT"])
    assert done.exit_code == 0, done.output
    assert "v2 SCRYPT" in done.stdout and "library" in done.stdout
