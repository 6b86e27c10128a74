"""`make run` (captcha-tasks dev): comes up with no API key and no Redis, answers
`celery inspect ping`, and stops cleanly on SIGTERM, leaving no process behind."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from captcha_tasks.dev.procs import free_port, stop_process, wait_until

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _group_alive(pgid: int) -> bool:
    """Children of a session leader (prefork pool processes) share its group id."""
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return True


@pytest.mark.timeout(300)  # four processes and three round trips on a busy 2-core machine
def test_dev_stack_comes_up_answers_and_stops_cleanly(tmp_path: Path) -> None:
    redis_url = f"redis://127.0.0.1:{free_port()}/0"  # nothing listens there yet
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CAPTCHA", "FLOWER"))}
    env.update(CAPTCHA_TASKS_REDIS_URL=redis_url, CAPTCHA_TASKS_TIME_SCALE="0.05")
    argv = [sys.executable, "-m", "captcha_tasks.cli", "dev", "--run-dir", str(tmp_path),
            "--sandbox-port", str(free_port()), "--flower-port", str(free_port())]  # fmt: skip
    proc = subprocess.Popen(
        argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    lines: list[str] = []
    reader = threading.Thread(
        target=lambda: lines.extend(iter(proc.stdout.readline, "")),  # type: ignore[union-attr]
        daemon=True,
    )
    reader.start()
    try:
        wait_until(lambda: any("up. Try" in line for line in lines), timeout=200, what="dev up")
        out = "".join(lines)
        assert "started redis-server" in out
        assert re.search(r"smoke   : ping -> dev1@\S+ v\S+; get_balance -> 100\.0000", out)
        pids = [int(p) for p in re.findall(r"pid (\d+)", out)]
        assert len(pids) >= 4  # redis, sandbox, worker, flower

        ping = subprocess.run(
            [sys.executable, "-m", "celery", "-A", "captcha_tasks", "inspect", "ping", "-t", "5"],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert ping.returncode == 0, ping.stdout + ping.stderr
        assert "pong" in ping.stdout

        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
        reader.join(timeout=5)
        out = "".join(lines)
        assert "stopped flower" in out and "stopped worker1" in out
        assert "stopped sandbox" in out and "stopped redis-server" in out
        left = [pid for pid in pids if _alive(pid) or _group_alive(pid)]
        assert left == [], f"processes left behind: {left}\n{out}"
    finally:
        stop_process(proc, timeout=30)
        reader.join(timeout=5)
        proc.stdout.close()  # type: ignore[union-attr]
