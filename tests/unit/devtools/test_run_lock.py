"""One `captcha-tasks-dev dev` per run directory: the lock is the kernel's (``flock``), so only
a live holder blocks; the file names the holder's PID for the refusal's message."""

from __future__ import annotations

import os
from pathlib import Path

from captcha_tasks_dev.run import RunLock


def test_a_lock_file_left_by_a_killed_stack_blocks_nothing(tmp_path: Path) -> None:
    (tmp_path / "dev.lock").write_text("999999999\n")  # what a SIGKILLed stack leaves
    lock = RunLock(tmp_path)
    assert lock.acquire() is None
    lock.release()


def test_a_held_lock_refuses_with_its_holders_pid(tmp_path: Path) -> None:
    first = RunLock(tmp_path)
    assert first.acquire() is None
    try:
        # flock belongs to an open file: a second open is refused, in this process too.
        assert RunLock(tmp_path).acquire() == os.getpid()
    finally:
        first.release()
    again = RunLock(tmp_path)
    assert again.acquire() is None  # released: the next stack takes it
    again.release()
