"""PerProcess: one value per key and process; a forked child builds its own."""

from __future__ import annotations

import os
import threading

from captcha_tasks.forksafe import PerProcess


def test_a_value_is_built_once_per_key_and_shared_by_threads() -> None:
    cache: PerProcess[object] = PerProcess()
    built: list[str] = []

    def build(key: str) -> object:
        built.append(key)
        return object()

    seen: list[object] = []
    threads = [
        threading.Thread(target=lambda: seen.append(cache.get("a", lambda: build("a"))))
        for _ in range(8)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=5)
    assert built == ["a"]
    assert len({id(v) for v in seen}) == 1
    assert cache.get("b", lambda: build("b")) is not seen[0]
    assert cache.clear() != []
    assert cache.get("a", lambda: build("a")) is not seen[0]


def test_a_forked_child_builds_its_own_value() -> None:
    cache: PerProcess[int] = PerProcess()
    assert cache.get("k", os.getpid) == os.getpid()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report the value it sees, then leave at once
        try:
            os.write(write, str(cache.get("k", os.getpid)).encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        child_value = int(pipe.read())
    os.waitpid(pid, 0)
    assert child_value == pid
    assert cache.get("k", os.getpid) == os.getpid()
