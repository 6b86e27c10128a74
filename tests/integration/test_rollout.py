"""``captcha-tasks rollout`` against a real fleet: 4 ``celery worker`` processes under
continuous solve load, restarted one at a time by ``tests/support/fleet_restart.py``."""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from captcha_tasks.worker.control import CeleryControlPlane
from tests.support import fleet_restart
from tests.support.workers import ROOT, worker_env

pytestmark = pytest.mark.integration

SITEKEY = "6Le-wvkSAAAAAPBMRTvw0Q4Muexq9bi0DJwx_mJ-"
WORKERS = [f"w{i}@127.0.0.1" for i in range(1, 5)]
OLD, NEW, BAD = "1.0.0", "1.1.0", "1.1.0-broken"
THREADS = 20
#: Where the last rollout's output is kept (for reading after a run).
OUTPUT_DIR = ROOT / ".run" / "test-rollout"


@dataclass
class Fleet:
    directory: Path
    app: Any

    def restart_command(self) -> str:
        script = ROOT / "tests" / "support" / "fleet_restart.py"
        return f"{sys.executable} {script} {self.directory} restart {{worker}} {{version}}"

    def versions(self) -> dict[str, str]:
        return CeleryControlPlane(self.app).versions()


@pytest.fixture
def make_fleet(
    tmp_path: Path, celery_app: Any, sandbox_factory: Callable[..., Any]
) -> Iterator[Callable[..., Fleet]]:
    fleets: list[Path] = []

    def make(broken: dict[str, Any] | None = None) -> Fleet:
        sandbox = sandbox_factory(threads=THREADS)
        directory = tmp_path / "fleet"
        directory.mkdir()
        env = worker_env(
            sandbox.url, CAPTCHA_TASKS_THREADS=str(THREADS), CAPTCHA_TASKS_HEARTBEAT_INTERVAL="1"
        )
        config = {"env": env, "concurrency": 1, "broken": broken or {}}
        (directory / "fleet.json").write_text(json.dumps(config))
        fleets.append(directory)
        # Through the script, as the rollout will: the workers are not our children.
        script = str(ROOT / "tests" / "support" / "fleet_restart.py")
        starts = [
            subprocess.Popen([sys.executable, script, str(directory), "start", w, OLD], cwd=ROOT)
            for w in WORKERS
        ]
        assert [proc.wait(timeout=90) for proc in starts] == [0] * len(WORKERS)
        fleet = Fleet(directory, celery_app)
        fleet.sandbox = sandbox  # type: ignore[attr-defined]
        return fleet

    yield make
    # The test is over: no graceful stop, which would take each worker's 10 s soft
    # shutdown (worker_enable_soft_shutdown_on_idle) for nothing.
    stop_now = functools.partial(fleet_restart.stop, timeout=0)
    for directory in fleets:
        with ThreadPoolExecutor(len(WORKERS)) as pool:
            list(pool.map(stop_now, [directory] * len(WORKERS), WORKERS))


@dataclass
class Load:
    """Solve tasks at a steady rate, each on its own page (so the sandbox can tell
    a duplicate submit from a new captcha)."""

    app: Any
    rate: float = 4.0
    results: list[tuple[float, Any]] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> Load:
        self._thread = threading.Thread(target=self._run, name="load", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        i = 0
        while not self._stop.wait(1.0 / self.rate):
            i += 1
            page = f"https://example.com/rollout/{i}"
            sig = self.app.signature("captcha_tasks.solve_recaptcha_v2", args=(SITEKEY, page))
            self.results.append((time.monotonic(), sig.apply_async()))

    def stop(self) -> None:
        self._stop.set()
        assert self._thread is not None
        self._thread.join(timeout=10)

    def outcomes(self, timeout: float = 60.0) -> dict[str, list[tuple[float, str]]]:
        """``ok``, ``failed`` (with the error) and ``lost`` (no result in time)."""
        deadline = time.monotonic() + timeout
        out: dict[str, list[tuple[float, str]]] = {"ok": [], "failed": [], "lost": []}
        for sent, result in self.results:
            try:
                result.get(timeout=max(0.1, deadline - time.monotonic()), propagate=False)
            except Exception:  # a timeout: counted as lost
                out["lost"].append((sent, result.id))
                continue
            if result.successful():
                out["ok"].append((sent, result.id))
            else:
                out["failed"].append((sent, repr(result.result)))
        return out


def _rollout(fleet: Fleet, version: str, *extra: str) -> tuple[int, dict[str, Any], str]:
    argv = [
        sys.executable,
        "-m",
        "captcha_tasks.cli.main",
        "rollout",
        "--to",
        version,
        "--restart",
        fleet.restart_command(),
        "--max-unavailable",
        "1",
        "--drain-timeout",
        "auto",
        "--health-check",
        "balance",
        "--start-timeout",
        "60",
        "--health-timeout",
        "20",
        "--json",
        *extra,
    ]
    done = subprocess.run(
        argv, cwd=ROOT, env=os.environ.copy(), capture_output=True, text=True, timeout=170
    )
    OUTPUT_DIR.mkdir(parents=True, exist_ok=True)
    name = version.replace(".", "_")
    (OUTPUT_DIR / f"{name}.progress.txt").write_text(done.stderr)
    (OUTPUT_DIR / f"{name}.summary.json").write_text(done.stdout)
    print(done.stderr)
    print(done.stdout)
    try:
        summary = json.loads(done.stdout)
    except ValueError:
        raise AssertionError(f"no JSON summary:\n{done.stdout}\n{done.stderr}") from None
    return done.returncode, summary, done.stderr


@pytest.mark.long
def test_rollout_under_load_loses_nothing(make_fleet: Callable[..., Fleet]) -> None:
    fleet = make_fleet()
    assert fleet.versions() == dict.fromkeys(WORKERS, OLD)
    load = Load(fleet.app).start()
    time.sleep(2.0)  # load is flowing before the first drain
    try:
        code, summary, progress = _rollout(fleet, NEW)
        time.sleep(2.0)  # and keeps flowing on the new version
    finally:
        load.stop()

    assert code == 0, progress
    assert summary["status"] == "completed"
    assert sorted(summary["updated"]) == WORKERS and summary["failed"] == []
    assert summary["rolled_back"] == []
    for detail in summary["details"]:
        assert detail["health"]["ok"] and detail["health"]["version"] == NEW
        assert detail["left_at_restart"] == {
            "active": 0,
            "reserved": 0,
            "scheduled": 0,
            "solve_calls": 0,
        }
    assert "drained in" in progress and "[4/4]" in progress
    assert fleet.versions() == dict.fromkeys(WORKERS, NEW)

    outcomes = load.outcomes()
    stats = fleet.sandbox.stats()  # type: ignore[attr-defined]
    sent = len(load.results)
    print(
        f"load: {sent} solves sent, {len(outcomes['ok'])} ok, {len(outcomes['failed'])} "
        f"failed, {len(outcomes['lost'])} lost; sandbox {stats}"
    )
    assert sent >= 40
    assert outcomes["lost"] == [] and outcomes["failed"] == []
    assert len(outcomes["ok"]) == sent
    assert stats["duplicates"] == 0
    assert stats["submitted"] == sent


@pytest.mark.long
def test_failed_health_check_rolls_every_updated_worker_back(
    make_fleet: Callable[..., Fleet],
) -> None:
    # The new release is broken on w2's host: it starts with a key the provider refuses.
    broken = {BAD: {"workers": [WORKERS[1]], "env": {"CAPTCHAAI_API_KEY": "0" * 32}}}
    fleet = make_fleet(broken)
    load = Load(fleet.app).start()
    time.sleep(1.0)
    try:
        code, summary, progress = _rollout(fleet, BAD)  # default --abort-threshold 0.25
        finished = time.monotonic()
        time.sleep(3.0)  # the fleet, back on the old version, serves load
    finally:
        load.stop()

    assert code == 1, progress
    assert summary["status"] == "rolled_back"
    assert summary["failed"] == [WORKERS[1]]
    # w1 passed its gate, then went back too: not only the failing worker.
    assert summary["rolled_back"] == WORKERS[:2]
    details = {d["worker"]: d for d in summary["details"]}
    # The worker itself refuses to start with a key the provider refuses (exit status 78,
    # EX_CONFIG): the release fails at its restart, before the worker takes any job.
    assert "exited with 78" in details[WORKERS[1]]["error"]
    log = Path(details[WORKERS[1]]["error"].rsplit("(log: ", 1)[1].rstrip(")")).read_text()
    assert "refuses the key in CAPTCHAAI_API_KEY (ERROR_KEY_DOES_NOT_EXIST)" in log
    assert details[WORKERS[0]]["rollback"]["ok"] and details[WORKERS[1]]["rollback"]["ok"]
    assert [details[w]["result"] for w in WORKERS[2:]] == ["untouched", "untouched"]
    assert fleet.versions() == dict.fromkeys(WORKERS, OLD)

    outcomes = load.outcomes()
    print(
        f"load: {len(load.results)} solves sent, {len(outcomes['ok'])} ok, "
        f"{len(outcomes['failed'])} failed, {len(outcomes['lost'])} lost"
    )
    for _, error in outcomes["failed"]:
        print("failed:", error)
    assert outcomes["lost"] == []
    # Solves sent after the rollback all succeed: the old fleet serves load.
    after = [sent for sent, _ in outcomes["failed"] if sent > finished]
    assert after == []
    assert len([1 for sent, _ in outcomes["ok"] if sent > finished]) >= 5
