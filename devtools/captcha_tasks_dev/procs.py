"""Starting, waiting for and stopping child processes, always by PID.

One supervisor for ``make run`` (:mod:`.run`), the benchmarks (:mod:`.bench.stack`) and
the tests' clusters: :func:`spawn` starts a process in a session of its own with its
output in a log file, :func:`wait_ready` waits for it with a deadline (and fails at once
when it dies), :func:`stop_process` stops it by PID (SIGTERM, then SIGKILL after a grace
period), and a :class:`Supervisor` stops everything it started on the way out.

Children live in sessions of their own, so a process-group kill of their owner (a job
runner's ``kill -- -PGID``, a CI timeout) would not reach them: :func:`dies_with_us`
asks Linux to signal each one when its owner dies without stopping it.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import requests

from captcha_tasks.errors import CaptchaTasksError

__all__ = [
    "Child",
    "ChildExited",
    "Supervisor",
    "dies_with_us",
    "free_port",
    "http_ok",
    "logged",
    "port_is_free",
    "spawn",
    "stop_process",
    "wait_ready",
    "wait_until",
]


#: ``prctl(2)``'s option: the signal a process gets when the thread that forked it ends.
_PR_SET_PDEATHSIG = 1


def _prctl() -> Callable[..., int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    except OSError:
        return None
    function: Callable[..., int] = libc.prctl
    return function


_PRCTL = _prctl()


def dies_with_us(sig: int = signal.SIGTERM) -> Callable[[], None] | None:
    """A ``preexec_fn`` for ``Popen``: the child gets ``sig`` when we die (SIGKILLed,
    crashed) before stopping it, so no redis-server or worker outlives its owner.

    SIGTERM suits a redis-server (it writes its AOF and exits). :func:`spawn`'s children
    get SIGKILL: a Celery worker whose owner died may stay in its warm shutdown for
    good, its Redis gone at the same moment, with no owner left to escalate; workers,
    the sandbox and Flower are built to survive a SIGKILL.

    Linux only, and only when called from the main thread: the kernel sends the signal
    when the *thread* that forked the child ends, and a helper thread (one restarting
    a worker in a test) may end long before the process does. Elsewhere: ``None``
    (nothing to add; the owner's own stop is all there is)."""
    prctl = _PRCTL
    if prctl is None or threading.current_thread() is not threading.main_thread():
        return None
    owner = os.getpid()

    def arm() -> None:  # runs in the child, between fork and exec
        prctl(_PR_SET_PDEATHSIG, sig, 0, 0, 0)
        if os.getppid() != owner:  # the owner died before the line above
            os.kill(os.getpid(), sig)

    return arm


#: Ports handed out below the kernel's ephemeral range (see :func:`free_port`).
PORTS_BELOW_EPHEMERAL = 12000
#: Independent of ``random``'s seed (pytest-randomly seeds it alike in every process).
_ports = random.SystemRandom()


def _ephemeral_low(path: str = "/proc/sys/net/ipv4/ip_local_port_range") -> int | None:
    try:
        with open(path) as ranges:
            return int(ranges.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that nothing listens on right now, for a server started next.

    Taken below the kernel's ephemeral range where there is room: a port from that
    range (``bind(("", 0))``'s) is also what the kernel gives the next outgoing
    connection of any process as its own end, and a server bound to it a moment later
    fails with "Address already in use". Several processes choosing at once pick at
    random among thousands, and each choice is checked free."""
    low = _ephemeral_low()
    if low is not None and low - PORTS_BELOW_EPHEMERAL >= 1024:
        for _ in range(50):
            port = _ports.randrange(low - PORTS_BELOW_EPHEMERAL, low)
            if port_is_free(port, host):
                return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        found: int = sock.getsockname()[1]
        return found


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


class ChildExited(CaptchaTasksError):
    """A child ended while it was waited for (a CaptchaTasksError, so that
    :func:`wait_until` stops at once instead of polling a dead process to its deadline)."""


@dataclass(eq=False)
class Child:
    """A started process and its log file; ``log_offset`` is the log's size when it
    started (a restart appends to the same file)."""

    name: str
    proc: subprocess.Popen[bytes]
    log_path: Path
    stop_timeout: float = 10.0
    log_offset: int = 0

    @property
    def pid(self) -> int:
        return self.proc.pid

    def log(self) -> str:
        """The whole log file (every start of this name)."""
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def output(self) -> str:
        """What this process wrote."""
        return self.log()[self.log_offset :]

    def check_alive(self) -> None:
        """:class:`ChildExited`, with the end of its output, if the process ended."""
        if self.proc.poll() is not None:
            tail = "\n".join(self.output().splitlines()[-40:])
            raise ChildExited(
                f"{self.name} exited with code {self.proc.returncode}; see {self.log_path}"
                + (f"\n{tail}" if tail else "")
            )


def spawn(
    name: str,
    argv: Sequence[str],
    log_path: Path,
    *,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    to_terminal: bool = False,
    shown: Callable[[bytes], bool] | None = None,
    stop_timeout: float = 10.0,
) -> Child:
    """Start ``argv`` in a session of its own (a Ctrl-C reaches its owner only, which
    stops it by PID), stdin closed, stdout and stderr appended to ``log_path`` (and,
    ``to_terminal``, copied to ours as well: the lines ``shown`` accepts, in order)."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    offset = log_path.stat().st_size if log_path.exists() else 0
    out = log_path.open("ab")
    try:
        proc = subprocess.Popen(
            list(argv),
            env=None if env is None else dict(env),
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE if to_terminal else out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=dies_with_us(signal.SIGKILL),
        )
    except BaseException:
        out.close()
        raise
    if to_terminal and proc.stdout is not None:
        # Ends at the child's end of output (it exited); the file closes with it.
        threading.Thread(
            target=_tee, args=(proc.stdout, out, shown), name=f"tee-{name}", daemon=True
        ).start()
    else:
        out.close()
    return Child(name, proc, log_path, stop_timeout, offset)


def _tee(stream: IO[bytes], log: IO[bytes], shown: Callable[[bytes], bool] | None) -> None:
    """Copy a child's output to its log file and, the lines ``shown`` accepts (all
    without it), to our terminal, line by line."""
    terminal: IO[bytes] | None = sys.stdout.buffer
    with stream, log:
        for line in iter(stream.readline, b""):
            log.write(line)
            log.flush()
            if terminal is not None and (shown is None or shown(line)):
                try:
                    terminal.write(line)
                    terminal.flush()
                except (OSError, ValueError):  # the terminal went away: the file goes on
                    terminal = None


def wait_ready(
    children: Child | Iterable[Child],
    ready: Callable[[], bool],
    *,
    timeout: float,
    interval: float = 0.1,
    what: str,
) -> None:
    """Poll ``ready`` until it is true, :class:`ChildExited` as soon as one of
    ``children`` ends, ``TimeoutError`` after ``timeout`` seconds."""
    watched = [children] if isinstance(children, Child) else list(children)

    def check() -> bool:
        for child in watched:
            child.check_alive()
        return ready()

    wait_until(check, timeout=timeout, interval=interval, what=what)


def logged(child: Child, text: str) -> Callable[[], bool]:
    """A readiness check: ``child`` wrote ``text`` (e.g. a worker's " ready.")."""
    return lambda: text in child.output()


def http_ok(url: str) -> Callable[[], bool]:
    """A readiness check: ``GET url`` answers 2xx within a second."""
    return lambda: requests.get(url, timeout=1).ok


class Supervisor:
    """The children one owner started, each logging to ``log_dir/NAME.log``; stopped by
    PID, group and all, newest first, on :meth:`stop_all` and at the end of ``with``."""

    def __init__(
        self, log_dir: Path, *, env: Mapping[str, str] | None = None, cwd: Path | None = None
    ) -> None:
        self.log_dir = log_dir
        self.env = env
        self.cwd = cwd
        self.children: list[Child] = []

    def spawn(
        self,
        name: str,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        to_terminal: bool = False,
        shown: Callable[[bytes], bool] | None = None,
        stop_timeout: float = 10.0,
    ) -> Child:
        child = spawn(
            name,
            argv,
            self.log_dir / f"{name}.log",
            env=env or self.env,
            cwd=self.cwd,
            to_terminal=to_terminal,
            shown=shown,
            stop_timeout=stop_timeout,
        )
        self.children.append(child)
        return child

    def log(self, name: str) -> str:
        path = self.log_dir / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def stop(
        self,
        children: Sequence[Child] | None = None,
        *,
        sig: int = signal.SIGTERM,
        parallel: bool = False,
        hurry: Callable[[], bool] | None = None,
        said: Callable[[Child, int | None, Exception | None], None] | None = None,
    ) -> None:
        """Stop ``children`` (default: all), newest first or ``parallel``, each with
        ``sig``, then SIGKILL after its ``stop_timeout`` or once ``hurry`` answers true.
        Raises nothing, so that one that will not die does not leave the others running;
        ``said(child, exit code, error)`` hears how each stop went."""
        chosen = list(reversed(self.children)) if children is None else list(children)

        def one(child: Child) -> None:
            try:
                code = stop_process(
                    child.proc, sig=sig, timeout=child.stop_timeout, group=True, hurry=hurry
                )
            except Exception as exc:
                if said is not None:
                    said(child, None, exc)
                return
            if said is not None:
                said(child, code, None)

        if parallel:
            threads = [threading.Thread(target=one, args=(c,), daemon=True) for c in chosen]
            for thread in threads:
                thread.start()
            for thread, child in zip(threads, chosen, strict=True):
                thread.join(child.stop_timeout + 15)
        else:
            for child in chosen:
                one(child)
        self.children = [c for c in self.children if c not in chosen]

    def stop_all(self) -> None:
        self.stop()

    def __enter__(self) -> Supervisor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
