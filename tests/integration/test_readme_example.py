"""The README's first example runs as written against `make run`'s stack.

The stack is `captcha-tasks-dev dev` under `make`, as `make run` starts it (the helper of
test_dev_run.py); the example is the README's first ``python`` block, run by bash
after ``source .run/env``, as the README tells a reader to. Its output must have the
shape the README shows under it.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.test_dev_run import dev_under_make
from tests.support.workers import ROOT

pytestmark = [pytest.mark.integration, pytest.mark.long]

README = ROOT / "README.md"


def _blocks(language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```$", README.read_text(), re.S | re.M)


def test_the_readme_is_a_front_door() -> None:
    text = README.read_text()
    assert len(text.splitlines()) < 200
    assert "pip install" in text
    assert "celery -A captcha_tasks worker" in text
    assert "make run" in text and "make test" in text
    example = _blocks("python")[0]
    assert len(example.splitlines()) < 10


def test_the_first_example_runs_as_written_against_make_run(tmp_path: Path) -> None:
    example = _blocks("python")[0]
    # The output block right after the example.
    shown = re.search(r"^```python\n.*?^```$.*?^```\n(.*?)^```$", README.read_text(), re.S | re.M)
    assert shown, "README.md shows no output under its first example"
    script = tmp_path / "example.py"
    script.write_text(example)
    with dev_under_make(tmp_path) as run:
        env_file = tmp_path / "run" / "env"
        assert env_file.exists(), run.out()
        done = subprocess.run(
            [
                "bash",
                "-c",
                f"source {shlex.quote(str(env_file))} && "
                f"{shlex.quote(sys.executable)} {shlex.quote(str(script))}",
            ],
            env={k: v for k, v in run.env.items() if not k.startswith("CAPTCHA")},
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    assert done.returncode == 0, done.stderr
    printed = done.stdout.splitlines()
    expected = shown.group(1).strip().splitlines()
    assert len(printed) == len(expected), done.stdout
    # The token and the captcha id differ at each run; their shapes and the rest do not.
    assert re.fullmatch(r"03AFcWeA[\w-]{16}\.\.\.", printed[0]), printed[0]
    words, shown_words = printed[1].split(), expected[1].split()
    assert words[:2] == shown_words[:2] == ["recaptcha_v2", "captchaai"]
    assert words[2].isdigit() and float(words[3]) > 0
