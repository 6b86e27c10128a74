"""No child outlives its owner: a redis-server, a sentinel's node or a spawned worker
lives in a session of its own (so a terminal's Ctrl-C reaches its owner only), which a
process-group kill of the owner (a job runner stopping ``pytest``, a CI timeout) does
not reach. Once seen: a test run's redis-server left running for two hours."""

from __future__ import annotations

import os
import signal
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from captcha_tasks_dev.procs import dies_with_us
from tests.support.fleet_restart import pid_alive
from tests.support.processes import SpawnPython, read_line

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl is Linux's")

OWNER = textwrap.dedent(
    """
    import sys, threading, time
    from pathlib import Path
    from captcha_tasks_dev.procs import spawn
    from captcha_tasks_dev.redis_server import RedisServer
    here = Path(sys.argv[1])  # the test's tmp_path: nothing is left in /tmp
    server = RedisServer(data_dir=here / "redis").start()
    log = here / "sleeper.log"
    # It ignores SIGTERM, as a worker in a warm shutdown hung on its lost Redis does.
    stubborn = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)"
    child = spawn("sleeper", [sys.executable, "-c", stubborn], log)
    from_thread = []  # a child started by a helper thread: not tied to that thread's end
    thread = threading.Thread(target=lambda: from_thread.append(
        spawn("sleeper2", [sys.executable, "-c", "import time; time.sleep(60)"], log)))
    thread.start()
    thread.join()
    print(server.proc.pid, child.pid, from_thread[0].pid, flush=True)
    time.sleep(60)
    """
)


def test_children_of_a_killed_owner_stop(spawn: SpawnPython, tmp_path: Path) -> None:
    owner = spawn(OWNER, str(tmp_path))
    redis_pid, child_pid, thread_child_pid = map(int, read_line(owner, timeout=30).split())
    try:
        # The helper thread has ended: its child must live on while its owner does.
        assert pid_alive(redis_pid) and pid_alive(child_pid) and pid_alive(thread_child_pid)
        os.kill(owner.pid, signal.SIGKILL)
        owner.wait(timeout=10)
        deadline = time.monotonic() + 10
        while (pid_alive(redis_pid) or pid_alive(child_pid)) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not pid_alive(redis_pid), "redis-server outlived its owner"
        assert not pid_alive(child_pid), "a spawned child outlived its owner"
    finally:  # the helper thread's child is not tied to the owner: stopped here
        for pid in (redis_pid, child_pid, thread_child_pid):
            if pid_alive(pid):
                os.kill(pid, signal.SIGKILL)


def test_only_the_main_thread_ties_its_children_to_it() -> None:
    seen: list[object] = []
    thread = threading.Thread(target=lambda: seen.append(dies_with_us()))
    thread.start()
    thread.join(timeout=5)
    assert seen == [None]
    assert callable(dies_with_us())
