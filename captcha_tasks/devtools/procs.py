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
    hurry: Callable[[], bool] | None = None,
) -> int | None:
    """Send ``sig`` to ``proc`` (or to its process group, when it leads one), wait up to
    ``timeout`` seconds, then SIGKILL what is left. Returns the exit code.

    ``hurry``, when given, is asked while waiting: once it answers true (e.g. a second
    Ctrl-C), the wait ends at once and the process (group) is SIGKILLed. Either way the
    call returns within ``timeout`` plus a few seconds and raises for no signal.
    """

    def in_a_hurry() -> bool:
        return hurry is not None and hurry()

    def kill() -> None:
        with contextlib.suppress(ProcessLookupError):
            if group:
                os.killpg(proc.pid, signal.SIGKILL)
            else:
                proc.kill()

    if proc.poll() is None:
        if not in_a_hurry():
            with contextlib.suppress(ProcessLookupError):
                if group:
                    os.killpg(proc.pid, sig)
                else:
                    proc.send_signal(sig)
            # Polled rather than one proc.wait(timeout): ``hurry`` must be able to cut it short.
            deadline = time.monotonic() + timeout
            while proc.poll() is None and time.monotonic() < deadline and not in_a_hurry():
                time.sleep(0.05)
        if proc.poll() is None:
            kill()
            proc.wait(timeout=10)
    if group:
        # Children of a group leader (e.g. prefork pool processes) may outlive it.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
    return proc.returncode
