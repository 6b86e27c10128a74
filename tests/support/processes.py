"""Python child processes for tests that need a second process (e.g. one to kill).

``python_processes()`` yields a function that starts ``python -c CODE ARGS...`` in the
repository root with unbuffered, piped text stdout; every process it started is
stopped by PID (and its stdout closed) when the block ends. ``read_line`` reads one
line of a child's stdout, failing the test when none comes in time. The ``spawn``
fixture (tests/conftest.py) is ``python_processes()`` for one test.

:data:`LOCK_HOLDER` is a child that holds a session lock for ever (``ttl host``).
"""

from __future__ import annotations

import contextlib
import os
import select
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator

from captcha_tasks_dev.procs import stop_process
from tests.support.workers import ROOT

__all__ = ["LOCK_HOLDER", "SpawnPython", "python_processes", "read_line"]

#: ``spawn(LOCK_HOLDER, str(ttl), host)``: takes the session lock of ``host`` (owner
#: "doomed", ``lock_ttl`` = ttl), prints "acquired" and extends it for ever: a live
#: holder to SIGKILL.
LOCK_HOLDER = textwrap.dedent(
    """
    import dataclasses, sys, time
    from captcha_tasks.settings import Settings
    from captcha_tasks.state import state_redis
    from captcha_tasks.session.locks import SessionLock
    s = dataclasses.replace(Settings.from_env(), lock_ttl=float(sys.argv[1]))
    lock = SessionLock(state_redis(s), s, sys.argv[2], owner="doomed")
    assert lock.acquire()
    print("acquired", flush=True)
    while True:  # a live holder keeps its lock
        assert lock.extend()
        time.sleep(s.lock_ttl / 4)
    """
)

#: Starts ``python -c code *args``; its stdout is a text pipe.
SpawnPython = Callable[..., subprocess.Popen[str]]


@contextlib.contextmanager
def python_processes() -> Iterator[SpawnPython]:
    """A function that starts Python children; all of them are stopped on the way out."""
    procs: list[subprocess.Popen[str]] = []

    def start(code: str, *args: str) -> subprocess.Popen[str]:
        proc = subprocess.Popen(
            [sys.executable, "-c", code, *args],
            cwd=ROOT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
            stdout=subprocess.PIPE,
            text=True,
        )
        procs.append(proc)
        return proc

    try:
        yield start
    finally:
        for proc in procs:
            stop_process(proc, timeout=5)
            if proc.stdout is not None:
                proc.stdout.close()


def read_line(proc: subprocess.Popen[str], timeout: float) -> str:
    """The next line ``proc`` prints (stripped); fails when none comes within ``timeout``."""
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    if not ready:
        raise AssertionError(f"no output from pid {proc.pid} within {timeout} s")
    return proc.stdout.readline().strip()
