"""Starting, waiting for and stopping child processes, always by PID."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable

from ..errors import CaptchaTasksError

__all__ = ["free_port", "port_is_free", "stop_process", "wait_until"]


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


def port_is_free(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        # As servers bind (redis-server does): a port in TIME_WAIT is free to them.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
        return True


def wait_until(
    predicate: Callable[[], bool],
    *,
    timeout: float,
    interval: float = 0.05,
    what: str = "condition",
) -> None:
    """Poll ``predicate`` until it is true; ``TimeoutError`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if predicate():
                return
        except CaptchaTasksError:
            raise  # a definite failure (e.g. the process exited): stop waiting
        except Exception:  # noqa: S110 - "not yet", e.g. connection refused while starting
            pass
        if time.monotonic() >= deadline:
            raise TimeoutError(f"timed out after {timeout:.1f} s waiting for {what}")
        time.sleep(interval)


def stop_process(
    proc: subprocess.Popen[bytes] | subprocess.Popen[str],
    *,
    sig: int = signal.SIGTERM,
    timeout: float = 10.0,
    group: bool = False,
) -> int | None:
    """Send ``sig`` to ``proc`` (or to its process group, when it leads one), wait up to
    ``timeout`` seconds, then SIGKILL what is left. Returns the exit code."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            if group:
                os.killpg(proc.pid, sig)
            else:
                proc.send_signal(sig)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                if group:
                    os.killpg(proc.pid, signal.SIGKILL)
                else:
                    proc.kill()
            proc.wait(timeout=10)
    if group:
        # Children of a group leader (e.g. prefork pool processes) may outlive it.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
    return proc.returncode
