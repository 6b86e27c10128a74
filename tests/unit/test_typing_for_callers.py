"""A user's script type-checked with mypy (run as a subprocess): the tasks' ``.delay()``,
a direct call, ``.get()`` and ``aio``'s functions carry each task's parameters and result
type, so a misspelt keyword or a wrong type is an error before anything runs."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

GOOD = """
from captcha_tasks import aio, get_balance, solve_geetest_v4, solve_recaptcha_v2
from captcha_tasks.results import BalanceResult, GeeTestV4Solution

def enqueue() -> str:
    sent = solve_recaptcha_v2.delay("key", "https://example.com", invisible=True, exclude=["a"])
    token: str = sent.get(timeout=60)["solution"]
    balance: BalanceResult = get_balance.delay(provider="main").get()
    return token + balance["protocol"]

async def wait() -> GeeTestV4Solution:
    token = await aio.solve_recaptcha_v2("key", "https://example.com", provider="main", timeout=30)
    assert token["source"] in ("api", "pool")
    solved = await aio.solve_geetest_v4("id", "https://example.com")
    return solved["solution"]
"""

BAD = """
from captcha_tasks import aio, solve_recaptcha_v2

def enqueue() -> None:
    solve_recaptcha_v2.delay("key", "https://example.com", invisble=True)
    solve_recaptcha_v2.delay(1, "https://example.com")
    number: int = solve_recaptcha_v2.delay("key", "https://example.com").get()["solution"]

async def wait() -> None:
    await aio.solve_recaptcha_v2(sitekey=1)
    await aio.solve_recaptcha_v2("key", "https://example.com", exlude=["a"])
"""


def _mypy(tmp_path: Path, source: str) -> tuple[int, list[str]]:
    """mypy --strict on ``source`` (the project's configuration: the package it imports is
    checked as ``make types`` checks it, and clean), its errors as ``line: message``."""
    script = tmp_path / "user_script.py"
    script.write_text(source)
    options = ["--no-incremental", "--no-error-summary", "--hide-error-context"]
    config = f"--config-file={ROOT / 'pyproject.toml'}"
    done = subprocess.run(
        [sys.executable, "-m", "mypy", *options, "--show-error-codes", config, str(script)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    errors = [re.sub(r"^.*user_script\.py:", "", line) for line in done.stdout.splitlines()]
    return done.returncode, errors


def test_a_correct_script_passes(tmp_path: Path) -> None:
    code, errors = _mypy(tmp_path, GOOD)
    assert (code, errors) == (0, [])


def test_misspelt_keywords_and_wrong_types_are_errors(tmp_path: Path) -> None:
    code, errors = _mypy(tmp_path, BAD)
    assert code == 1
    by_line: dict[int, list[str]] = {}
    for error in errors:
        line, _, message = error.partition(": error: ")
        by_line.setdefault(int(line.split(":")[0]), []).append(message)
    # .delay(): a misspelt keyword, a wrong type; .get(): the result's type.
    assert any('Unexpected keyword argument "invisble"' in m for m in by_line[5]), by_line
    assert any('Argument 1 to "delay"' in m and '"int"' in m for m in by_line[6]), by_line
    assert any("Incompatible types in assignment" in m for m in by_line[7]), by_line
    # aio: a wrong type, a missing argument, a misspelt keyword.
    assert any('Argument "sitekey"' in m and '"int"' in m for m in by_line[10]), by_line
    assert any('Missing positional argument "pageurl"' in m for m in by_line[10]), by_line
    assert any('Unexpected keyword argument "exlude"' in m for m in by_line[11]), by_line
    assert sorted(by_line) == [5, 6, 7, 10, 11]


def test_each_aio_function_takes_its_tasks_parameters_and_timeout() -> None:
    """aio's functions are written out (mypy reads their parameters): each has exactly
    its task's parameters, same kinds, annotations and defaults, then ``timeout``."""
    import inspect

    from captcha_tasks import aio
    from captcha_tasks.worker.app import app

    names = [n for n in aio.__all__ if f"captcha_tasks.{n}" in app.tasks]
    assert len(names) == 23
    for name in names:
        task = app.tasks[f"captcha_tasks.{name}"]
        own = list(inspect.signature(task.run).parameters.values())
        theirs = list(inspect.signature(getattr(aio, name)).parameters.values())
        assert theirs[:-1] == own, name
        assert (theirs[-1].name, theirs[-1].default) == ("timeout", aio.DEFAULT_TIMEOUT)
        assert inspect.signature(getattr(aio, name)).return_annotation == (
            inspect.signature(task.run).return_annotation
        )
