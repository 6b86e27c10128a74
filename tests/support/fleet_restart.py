"""A tiny supervisor for a local fleet of ``celery -A captcha_tasks worker`` processes.

Used by tests/integration/test_rollout.py and as the rollout's restart command::

    python tests/support/fleet_restart.py FLEET_DIR start   WORKER VERSION
    python tests/support/fleet_restart.py FLEET_DIR restart WORKER VERSION
    python tests/support/fleet_restart.py FLEET_DIR stop    WORKER

``FLEET_DIR/fleet.json`` holds the workers' environment (``env``), their concurrency
and, to simulate a broken release on some hosts, ``broken``: ``{version: {"workers":
[...], "env": {...}}}`` (extra environment for those workers on that version, e.g. a
wrong API key). Each worker runs in its own session; its pid is in
``FLEET_DIR/<name>.pid`` and its log appended to ``FLEET_DIR/<name>.log``. A stop sends
SIGTERM to the worker's process group (``REMAP_SIGTERM=SIGQUIT``: soft shutdown) and
waits for it to exit, then SIGKILLs what is left. Always by PID.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
STOP_TIMEOUT = 30.0
READY_TIMEOUT = 60.0


def _config(fleet: Path) -> dict[str, Any]:
    config: dict[str, Any] = json.loads((fleet / "fleet.json").read_text())
    return config


def _safe(worker: str) -> str:
    return worker.replace("@", "_at_").replace("/", "_")


def pidfile(fleet: Path, worker: str) -> Path:
    return fleet / f"{_safe(worker)}.pid"


def logfile(fleet: Path, worker: str) -> Path:
    return fleet / f"{_safe(worker)}.log"


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie counts as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie (not reaped yet by its parent) is dead for our purpose
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state != "Z"


def stop(fleet: Path, worker: str, *, timeout: float = STOP_TIMEOUT) -> None:
    path = pidfile(fleet, worker)
    if not path.exists():
        return
    pid = int(path.read_text().strip())
    if pid_alive(pid):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while pid_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
    # Pool children may outlive their parent: the whole group goes.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
    path.unlink(missing_ok=True)


def start(fleet: Path, worker: str, version: str, *, wait: bool = True) -> int:
    config = _config(fleet)
    env = {
        **os.environ,
        **config["env"],
        "CAPTCHA_TASKS_VERSION": version,
        "REMAP_SIGTERM": "SIGQUIT",
        "PYTHONUNBUFFERED": "1",
    }
    broken = config.get("broken", {}).get(version)
    if broken and worker in broken.get("workers", []):
        env.update(broken["env"])
    log = logfile(fleet, worker)
    offset = log.stat().st_size if log.exists() else 0
    argv = [
        sys.executable,
        "-m",
        "celery",
        "-A",
        "captcha_tasks",
        "worker",
        "-n",
        worker,
        "-c",
        str(config.get("concurrency", 1)),
        "-l",
        "INFO",
        "--without-gossip",
        "--without-mingle",
    ]
    with log.open("ab") as out:
        proc = subprocess.Popen(
            argv,
            cwd=ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    pidfile(fleet, worker).write_text(str(proc.pid))
    if wait:
        deadline = time.monotonic() + READY_TIMEOUT
        while True:
            with log.open("rb") as handle:
                handle.seek(offset)
                if b" ready." in handle.read():
                    break
            if proc.poll() is not None:
                raise SystemExit(f"{worker} exited with {proc.returncode} (log: {log})")
            if time.monotonic() > deadline:
                raise SystemExit(f"{worker} not ready after {READY_TIMEOUT:g} s (log: {log})")
            time.sleep(0.1)
    return proc.pid


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] not in {"start", "restart", "stop"}:
        print(__doc__, file=sys.stderr)
        return 2
    fleet, action, worker = Path(argv[0]), argv[1], argv[2]
    if action in {"stop", "restart"}:
        stop(fleet, worker)
    if action in {"start", "restart"}:
        if len(argv) < 4:
            print("a version is needed", file=sys.stderr)
            return 2
        start(fleet, worker, argv[3])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
