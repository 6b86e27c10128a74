"""The solve benchmark's processes: redis-server, sandbox and celery workers, each in
its own session with its own log, stopped by PID; and their CPU time (psutil)."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from types import FrameType

import psutil  # type: ignore[import-untyped, unused-ignore]
import requests

from ..dev.procs import free_port, stop_process, wait_until
from ..dev.redis_server import RedisServer
from ..errors import CaptchaTasksError

__all__ = ["CpuProbe", "Processes", "start_sandbox", "start_workers", "terminate_on_sigterm"]

_CONCURRENCY_RE = re.compile(r"concurrency:\s*(\d+)")


class Processes:
    """The child processes of a run, each in its own session; stopped by PID."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self.children: list[tuple[str, subprocess.Popen[bytes]]] = []
        self.redis_servers: list[RedisServer] = []

    def spawn(self, name: str, argv: list[str], env: Mapping[str, str]) -> subprocess.Popen[bytes]:
        with (self.log_dir / f"{name}.log").open("ab") as log:
            proc = subprocess.Popen(
                argv,
                env=dict(env),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # Ctrl-C reaches the harness only; it stops these
            )
        self.children.append((name, proc))
        return proc

    def log(self, name: str) -> str:
        path = self.log_dir / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def redis(self) -> RedisServer:
        server = RedisServer(data_dir=self.log_dir / f"redis{len(self.redis_servers) + 1}")
        self.redis_servers.append(server)
        return server.start()

    def stop(self, procs: Sequence[subprocess.Popen[bytes]], timeout: float = 20.0) -> None:
        """Stop these children (warm shutdown first), in parallel, by PID."""
        threads = [
            threading.Thread(target=stop_process, args=(p,), kwargs={"timeout": timeout,
                             "group": True}, daemon=True)
            for p in procs
        ]  # fmt: skip
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout + 15)
        self.children = [(n, p) for n, p in self.children if p not in procs]

    def stop_all(self) -> None:
        self.stop([p for _, p in reversed(self.children)])
        for server in reversed(self.redis_servers):
            with contextlib.suppress(Exception):
                server.stop()
        self.redis_servers.clear()


@contextlib.contextmanager
def terminate_on_sigterm() -> Iterator[None]:
    """SIGTERM unwinds like Ctrl-C, so every ``finally`` stops what it started."""

    def handler(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    try:
        previous = signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread: leave signals alone
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def start_sandbox(procs: Processes, name: str, args: Sequence[str]) -> tuple[str, int]:
    """Start ``captcha-tasks sandbox`` on a free port with ``args``; its URL and PID once
    ``/healthz`` answers."""
    port = free_port()
    argv = [sys.executable, "-m", "captcha_tasks.cli", "sandbox", "--port", str(port), *args]
    proc = procs.spawn(name, argv, os.environ)
    url = f"http://127.0.0.1:{port}"

    def ready() -> bool:
        if proc.poll() is not None:
            raise CaptchaTasksError(f"the sandbox exited ({proc.returncode}):\n{procs.log(name)}")
        return requests.get(f"{url}/healthz", timeout=1).ok

    wait_until(ready, timeout=30, what="the sandbox")
    return url, proc.pid


def start_workers(
    procs: Processes, argvs: Sequence[tuple[str, list[str]]], env: Mapping[str, str]
) -> list[tuple[subprocess.Popen[bytes], int | None]]:
    """Start the workers, wait until each logs " ready."; (process, pool size) each."""
    started = [(name, procs.spawn(name, argv, env)) for name, argv in argvs]

    def all_ready() -> bool:
        for name, proc in started:
            if proc.poll() is not None:
                raise CaptchaTasksError(f"{name} exited ({proc.returncode}):\n{procs.log(name)}")
        return all(" ready." in procs.log(name) for name, _ in started)

    wait_until(all_ready, timeout=90, interval=0.2, what="the workers to be ready")
    out = []
    for name, proc in started:
        found = _CONCURRENCY_RE.search(procs.log(name))
        out.append((proc, int(found.group(1)) if found else None))
    return out


def _cpu(pid: int, *, tree: bool = True) -> float:
    """User + system CPU seconds of ``pid`` and (``tree``) its live descendants."""
    try:
        root = psutil.Process(pid)
        members = [root, *root.children(recursive=True)] if tree else [root]
    except psutil.NoSuchProcess:
        return 0.0
    total = 0.0
    for member in members:
        with contextlib.suppress(psutil.NoSuchProcess):
            times = member.cpu_times()
            total += times.user + times.system
    return total


def _machine_busy() -> tuple[float, float]:
    """(busy, total) CPU seconds of the whole machine so far."""
    times = psutil.cpu_times()
    idle = times.idle + getattr(times, "iowait", 0.0)
    total = float(sum(times))
    return total - idle, total


@dataclasses.dataclass
class CpuProbe:
    """CPU seconds so far of the workers (with their pool children), other processes by
    name, this harness, and the machine (``machine_busy`` of ``machine_total``)."""

    workers: list[int]
    others: dict[str, int]

    def read(self) -> dict[str, float]:
        out = {"workers": sum(_cpu(pid) for pid in self.workers)}
        out.update({name: _cpu(pid) for name, pid in self.others.items()})
        out["harness"] = _cpu(os.getpid(), tree=False)
        out["machine_busy"], out["machine_total"] = _machine_busy()
        return out
