"""A caller's script that keeps its ``AsyncResult``\\ s until the interpreter exits ends
quietly: nothing on stderr, exit 0. Each script is a file run by ``python script.py`` in a
directory of its own (as a user runs one: from the repository's root, the order in
which the interpreter finalizes modules differs, and Celery's finalizer happened to
pass), against the session's Redis and a real worker."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tests.support.workers import worker_env

pytestmark = pytest.mark.integration

V2_KEY = "6Le-wvkSAAAAAPBMRTvw0Q4Muexq9bi0DJwx_mJ-"

#: The script from the README: results in a module-level list, collected with ``.get()``.
KEPT_AND_COLLECTED = f"""
from captcha_tasks import solve_recaptcha_v2
rs = [solve_recaptcha_v2.delay({V2_KEY!r}, f"https://example.com/{{i}}") for i in range(20)]
print(len([r.get(timeout=60) for r in rs]))
"""

#: Fire and forget: sent, never collected, still referenced when the interpreter exits
#: (through a function of the script, which keeps the module's globals alive until the
#: garbage collector's last pass).
KEPT_NEVER_COLLECTED = f"""
from captcha_tasks import solve_recaptcha_v2

def send(n):
    return solve_recaptcha_v2.delay({V2_KEY!r}, f"https://example.com/{{n}}")

rs = [send(i) for i in range(20)]
print(len(rs))
"""

#: Awaited through ``aio``, the same results then kept (and one collected by ``.get()``).
KEPT_AFTER_AIO = f"""
import asyncio
from captcha_tasks import aio

async def main():
    sent = [aio.send("captcha_tasks.solve_recaptcha_v2", {V2_KEY!r}, f"https://example.com/{{i}}")
            for i in range(10)]
    answers = await asyncio.gather(*(aio.result(r, timeout=60) for r in sent))
    return sent, answers

rs, answers = asyncio.run(main())
rs[0].get(timeout=30)
print(len(answers))
"""


@pytest.fixture
def solving_worker(celery_app: Any, sandbox_factory: Any, worker_factory: Any) -> None:
    sandbox = sandbox_factory(threads=20)
    worker_factory(worker_env(sandbox.url, CAPTCHA_TASKS_THREADS="20"), concurrency=2)


def _run(script: str, where: Path) -> subprocess.CompletedProcess[str]:
    path = where / "script.py"
    path.write_text(textwrap.dedent(script))
    return subprocess.run(
        [sys.executable, path.name],
        cwd=where,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize(
    ("script", "printed"),
    [
        (KEPT_AND_COLLECTED, "20"),
        (KEPT_NEVER_COLLECTED, "20"),
        (KEPT_AFTER_AIO, "10"),
    ],
    ids=["collected", "never-collected", "aio"],
)
def test_a_script_that_keeps_its_results_exits_quietly(
    solving_worker: None, tmp_path: Path, script: str, printed: str
) -> None:
    done = _run(script, tmp_path)
    assert (done.returncode, done.stdout.strip()) == (0, printed), done.stderr[-3000:]
    assert done.stderr == "", f"{len(done.stderr.splitlines())} lines:\n{done.stderr[-3000:]}"
