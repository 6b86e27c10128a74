"""`make docs` (mkdocs serve) stops on one SIGINT, whether it was started as a terminal's
foreground job or with SIGINT ignored, as a shell without job control or an editor's
task runner starts it (POSIX: an ignored signal stays ignored across exec)."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import urllib.request

import psutil
import pytest

from captcha_tasks_dev.procs import free_port, port_is_free, wait_until
from tests.support.workers import ROOT

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(shutil.which("make") is None, reason="needs make"),
]


def _started_with(disposition: signal.Handlers, port: int) -> subprocess.Popen[str]:
    """`make docs` in a process group of its own, SIGINT set to ``disposition`` first."""
    return subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"import os, signal, sys\nsignal.signal(signal.SIGINT, signal.{disposition.name})\n"
            "os.execvp(sys.argv[1], sys.argv[1:])",
            *("make", "-s", "docs", f"DOCS_PORT={port}"),
        ],
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )


def _serving(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=2) as answer:
            return bool(answer.status == 200)
    except OSError:
        return False


@pytest.mark.timeout(180)
@pytest.mark.parametrize(
    "disposition", [signal.SIG_DFL, signal.SIG_IGN], ids=["terminal", "sigint-ignored"]
)
def test_one_sigint_stops_make_docs(disposition: signal.Handlers) -> None:
    port = free_port()
    make = _started_with(disposition, port)
    tree: list[psutil.Process] = []
    try:
        wait_until(lambda: _serving(port), timeout=120, interval=0.5, what="mkdocs serve")
        root = psutil.Process(make.pid)
        tree = [root, *root.children(recursive=True)]
        os.killpg(make.pid, signal.SIGINT)
        make.wait(timeout=15)
        wait_until(lambda: port_is_free(port), timeout=5, interval=0.1, what="the port")
        assert [p.pid for p in tree if p.is_running() and p.status() != "zombie"] == []
    finally:
        for proc in tree:
            with contextlib.suppress(psutil.NoSuchProcess):
                proc.kill()  # by PID; psutil refuses a PID that now names another process
        with contextlib.suppress(ProcessLookupError):
            if make.poll() is None:
                make.kill()
        make.wait(timeout=5)
