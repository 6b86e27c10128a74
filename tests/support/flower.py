"""A real ``celery flower`` for the integration tests: started with basic auth and a
worker's environment (:func:`flower_factory`, a fixture every test may take: this module
is a plugin of ``tests/conftest.py``), read through its HTTP API, stopped by PID."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests

from captcha_tasks_dev.procs import free_port, stop_process, wait_until
from tests.support.workers import ROOT

__all__ = ["AUTH", "FlowerProcess", "flower_factory", "flower_tasks", "wait_for_events"]

#: The login Flower is started with.
AUTH = ("flower-test", "Fl0werLoginPw")


@dataclass
class FlowerProcess:
    url: str
    proc: subprocess.Popen[bytes]
    log_path: Path

    def get(self, path: str, *, auth: Any = AUTH, **params: Any) -> requests.Response:
        return requests.get(f"{self.url}{path}", auth=auth, params=params, timeout=15)

    def json(self, path: str, **params: Any) -> Any:
        reply = self.get(path, **params)
        assert reply.status_code == 200, (path, reply.status_code, reply.text[:300])
        return reply.json()

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


@pytest.fixture
def flower_factory(tmp_path: Path) -> Iterator[Callable[[dict[str, str]], FlowerProcess]]:
    """Start ``celery flower`` with basic auth and a worker's environment; stopped by PID."""
    started: list[FlowerProcess] = []

    def start(env: dict[str, str]) -> FlowerProcess:
        port = free_port()
        log_path = tmp_path / f"flower{len(started) + 1}.log"
        # Only this test's login: no FLOWER_* from the calling shell.
        base = {k: v for k, v in os.environ.items() if not k.startswith("FLOWER_")}
        argv = [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "captcha_tasks",
            "flower",
            "--address=127.0.0.1",
            f"--port={port}",
            f"--basic-auth={AUTH[0]}:{AUTH[1]}",
        ]
        with log_path.open("wb") as log:
            proc = subprocess.Popen(
                argv,
                cwd=ROOT,
                env={**base, **env, "PYTHONUNBUFFERED": "1"},
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        flower = FlowerProcess(f"http://127.0.0.1:{port}", proc, log_path)
        started.append(flower)

        def healthy() -> bool:
            if proc.poll() is not None:
                raise AssertionError(f"flower exited with {proc.returncode}:\n{flower.log()}")
            try:
                return requests.get(f"{flower.url}/healthcheck", timeout=1).status_code == 200
            except requests.ConnectionError:
                return False

        wait_until(healthy, timeout=30, interval=0.2, what="Flower's /healthcheck")
        return flower

    yield start
    for flower in reversed(started):
        stop_process(flower.proc, timeout=10, group=True)


def wait_for_events(flower: Any) -> None:
    """Flower answers /healthcheck before its event receiver listens: a task sent in
    between is seen without its name. Ping until Flower has seen the last ping whole,
    from its task-received to its task-succeeded."""
    from captcha_tasks import ping

    def seen() -> bool:
        sent = ping.delay()
        sent.get(timeout=10)
        shown = flower.json("/api/tasks").get(sent.id) or {}
        return (shown.get("name"), shown.get("state")) == ("captcha_tasks.ping", "SUCCESS")

    wait_until(seen, timeout=60, interval=0.5, what="Flower to receive task events")


def flower_tasks(flower: FlowerProcess, ids: list[str], *, states: set[str]) -> dict[str, Any]:
    """Flower's ``/api/tasks`` once every id in ``ids`` is in one of ``states``."""
    seen: dict[str, Any] = {}

    def done() -> bool:
        seen.clear()
        seen.update(flower.json("/api/tasks", limit=1000))
        return all(seen.get(i, {}).get("state") in states for i in ids)

    try:
        wait_until(done, timeout=30, interval=0.3, what="Flower to see the tasks end")
    except TimeoutError:
        shown = {i: (seen.get(i) or {}).get("state") for i in ids}
        raise AssertionError(f"Flower's task states: {shown}") from None
    return seen
