"""The modules generated from the captcha kinds' declarations: current, and what their
declarations say (``captcha-tasks-dev generate``, ``make generate``)."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from captcha_tasks import aio
from captcha_tasks.provider import CAPTCHA_CLASSES
from captcha_tasks.provider.kind import REQUIRED, parameters
from captcha_tasks.worker import kind_tasks
from captcha_tasks_dev import generate

KINDS = generate.generated_kinds()


def test_every_generated_file_is_what_the_declarations_generate() -> None:
    assert generate.stale() == []  # else: make generate, and commit what it wrote


def test_a_changed_declaration_makes_its_file_stale(tmp_path: Path) -> None:
    for name, text in generate.render().items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text.replace("Prosopo", "Other").replace("Tencent", "X"))
    assert sorted(generate.stale(tmp_path)) == sorted(generate.GENERATED)
    assert sorted(generate.write(tmp_path)) == sorted(generate.GENERATED)
    assert generate.stale(tmp_path) == []


def test_only_altcha_has_a_task_of_its_own() -> None:
    assert {cls.type for cls in CAPTCHA_CLASSES.values()} - {cls.type for cls in KINDS} == {
        "altcha"
    }


@pytest.mark.parametrize("kind", KINDS, ids=lambda cls: cls.type)
def test_each_kinds_task_and_aio_function_take_its_declared_parameters(kind: type) -> None:
    declared = [
        (p.name, inspect.Parameter.empty if p.default is REQUIRED else p.default)
        for p in parameters(kind)
    ]
    task = getattr(kind_tasks, f"solve_{kind.type}")
    assert task.name == f"captcha_tasks.solve_{kind.type}" and task.kind is kind
    taken = [(p.name, p.default) for p in inspect.signature(task.run).parameters.values()]
    assert taken == declared
    awaited = inspect.signature(getattr(aio, f"solve_{kind.type}")).parameters.values()
    assert [(p.name, p.default) for p in awaited] == [*declared, ("timeout", aio.DEFAULT_TIMEOUT)]
    assert task.__doc__ == inspect.cleandoc(kind.solve_call.doc) or task.__doc__.startswith(
        kind.solve_call.doc.split("\n", 1)[0]
    )
