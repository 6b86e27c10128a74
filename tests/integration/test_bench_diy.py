"""``captcha-tasks-dev bench solve --baseline diy`` end to end at a tiny size: the engine and
the official client in a Celery task, each with two real workers, against a real https
sandbox with the same plan; every solve answered, the figures and the lead consistent."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from captcha_tasks_dev.bench.metrics import LEAD_FIGURES

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

SOLVES = 20
THREADS = 5


def test_diy_column_runs_beside_the_engine_against_the_same_plan() -> None:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("CAPTCHA_TASKS_") and k != "REQUESTS_CA_BUNDLE"
    }
    argv = [
        sys.executable,
        "-m",
        "captcha_tasks_dev",
        "bench",
        "solve",
        "--json",
        "--baseline",
        "diy",
        "--solves",
        str(SOLVES),
        "--threads",
        str(THREADS),
        "--latency",
        "0.5",
        "--warmup",
        "2",
        "--noop",
        "0",
    ]
    proc = subprocess.Popen(
        argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        out, err = proc.communicate(timeout=480)
    except subprocess.TimeoutExpired:
        # SIGTERM: the benchmark stops every process it started, then exits.
        proc.terminate()
        out, err = proc.communicate(timeout=90)
        pytest.fail(f"the benchmark did not finish in 480 s: {err[-4000:]}")
    assert proc.returncode == 0, err[-4000:]
    report = json.loads(out)

    p = report["parameters"]
    assert p["baselines"] == ["diy"] and p["sandbox_scheme"] == "https"
    assert p["diy_concurrency"] == [3, 2]
    # 10 s x (0.5 / 15) would be 0.33 s: the client's whole seconds, at least 1.
    assert p["diy_sdk_timings"]["pollingInterval"] == 1
    assert list(report["designs"]) == ["ours", "diy"]
    for name, m in report["designs"].items():
        assert (m["completed"], m["failures"], m["unfinished"]) == (SOLVES, 0, 0), name
        # Every result names a captcha the sandbox solved in the measured window.
        assert m["matched_to_sandbox"] == SOLVES, name
        assert m["submits_per_task"] == 1.0 and m["duplicates"] == 0, name
        assert m["no_slot"] == 0 and 0 < m["max_in_flight"] <= THREADS, name
        # Each captcha asked for at least once (ours may ask for several in one batch read).
        assert m["captcha_polled_mean"] >= 1.0, name
        assert m["polls"] > 0, name
        assert m["collection_delay_p50"] >= 0.0, name
        assert 0 < m["fraction_of_t_over_l"] <= 1.0, name
        assert m["worker_cpu_per_solve"] > 0, name
    diy = report["designs"]["diy"]
    assert diy["concurrency"] == [3, 2]
    # The client reads one captcha per res.php request: at least one read per solve.
    assert diy["polls_per_solve"] >= 1.0
    assert diy["polls_per_solve"] == pytest.approx(diy["captcha_polled_mean"], abs=0.01)

    ours = report["designs"]["ours"]
    lead = report["lead"]["diy"]
    assert set(lead) == set(LEAD_FIGURES)
    for key, ratio in lead.items():
        if diy[key]:
            assert ratio == pytest.approx(ours[key] / diy[key], abs=0.006), key
