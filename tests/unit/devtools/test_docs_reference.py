"""The reference pages generated from the code are complete: every setting has its
documentation and a section, every command its help text, every captcha kind a row of
the provider matrix; and the site's link checker finds what is broken."""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
import pytest

from captcha_tasks import settings
from captcha_tasks.cli.main import main
from captcha_tasks.provider.offers import offer_matrix
from captcha_tasks.settings import PROVIDERS
from captcha_tasks.settings import providers as provider_config
from captcha_tasks_dev import docs_check, docs_site, settings_reference


def test_every_setting_has_its_documentation_and_a_section() -> None:
    assert settings_reference.undocumented() == []


def test_every_settings_variable_is_on_the_page() -> None:
    page = settings_reference.render()
    for variable, _parse in settings._SOURCES.values():
        assert f"| `{variable}` |" in page
    for suffix in provider_config._SUFFIXES:
        assert f"| `CAPTCHA_TASKS_N_{suffix}` |" in page


def test_a_setting_without_a_comment_or_section_is_reported(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sources = dict(settings._SOURCES)
    sources["no_such_field"] = ("CAPTCHA_TASKS_NO_SUCH_FIELD", sources["lock_ttl"][1])
    monkeypatch.setattr(settings, "_SOURCES", sources)
    problems = settings_reference.undocumented()
    assert "CAPTCHA_TASKS_NO_SUCH_FIELD: no #: comment on its field" in problems
    assert any(p.startswith("CAPTCHA_TASKS_NO_SUCH_FIELD: in no section") for p in problems)
    assert "| `CAPTCHA_TASKS_NO_SUCH_FIELD` |" in settings_reference.render()  # under Other


def test_a_provider_variable_without_a_description_is_reported(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(provider_config, "_SUFFIXES", (*provider_config._SUFFIXES, "COLOUR"))
    assert "CAPTCHA_TASKS_N_COLOUR: not described in provider_config's docstring" in (
        settings_reference.undocumented()
    )


def test_the_comment_of_a_field_is_its_meaning() -> None:
    by_variable = {entry.variable: entry for entry in settings_reference.entries()}
    threads = by_variable["CAPTCHA_TASKS_THREADS"]
    assert threads.default == "`5`"
    assert threads.meaning.startswith("its thread budget")
    assert "``" not in by_variable["CAPTCHA_TASKS_BATCH_POLL"].meaning  # markdown, not reST


def _commands() -> Iterator[tuple[str, click.Command]]:
    def walk(command: click.Command, ctx: click.Context, path: str) -> Iterator[Any]:
        yield path, command
        if isinstance(command, click.Group):
            for name in command.list_commands(ctx):
                sub = command.get_command(ctx, name)
                assert sub is not None, f"{path} {name} does not load"
                yield from walk(
                    sub, click.Context(sub, parent=ctx, info_name=name), f"{path} {name}"
                )

    yield from walk(main, click.Context(main, info_name="captcha-tasks"), "captcha-tasks")


def test_every_command_has_help_text() -> None:
    commands = list(_commands())
    assert len(commands) > 20
    missing = [path for path, command in commands if not (command.help or "").strip()]
    assert missing == []
    options = [
        f"{path} {option.opts[-1]}"
        for path, command in commands
        for option in command.params
        if isinstance(option, click.Option) and not (option.help or "").strip()
    ]
    assert options == []


def test_the_cli_page_lists_every_command() -> None:
    page = docs_site.cli_reference()
    for path, _command in _commands():
        assert f"# {path.split()[-1]}\n" in page, path
    assert "Sentinel.UNSET" not in page  # click's "no default", shown as none


def test_every_kind_has_a_row_of_the_matrix() -> None:
    kinds = {kind for row in offer_matrix().values() for kind in row}
    assert kinds == set(docs_site.LABELS)
    matrix, sources = docs_site.offers_table().split("\n\n")
    assert matrix.count("\n") == len(docs_site.LABELS) + 2
    assert all(f"`{provider}`" in matrix.splitlines()[0] for provider in PROVIDERS)
    # One row per cell, each with its state and its source.
    assert sources.count("\n") == len(docs_site.LABELS) * len(PROVIDERS) + 1
    assert "| `anticaptcha` | hCaptcha | withdrawn | anti-captcha/anticaptcha-python#6" in sources
    assert "| hCaptcha | yes | withdrawn |" in matrix


def test_a_cell_says_what_the_dialect_says() -> None:
    assert docs_site.offer_cell("turnstile", "AntiTurnstileTaskProxyLess / -") == "yes, no proxy"
    assert docs_site.offer_cell("image", "ImageToTextTask / -") == "yes"
    assert docs_site.offer_cell("hcaptcha", "not offered") == "—"
    assert docs_site.offer_cell("recaptcha_v2", "RecaptchaV2Task / RecaptchaV2Task") == "yes"
    assert docs_site.offer_cell("geetest", "- / GeeTestTask") == "proxy only"


def test_the_error_tree_has_every_error_class_once() -> None:
    from captcha_tasks import errors

    tree = docs_site.errors_tree()
    for name, obj in vars(errors).items():
        if isinstance(obj, type) and issubclass(obj, errors.CaptchaTasksError):
            assert tree.count(f"**`{name}`**") == 1, name
    assert tree.splitlines()[0].startswith("- **`CaptchaTasksError`**")
    assert "    - **`SubmitUncertain`**" in tree  # nested under its parents


def test_the_redis_key_table_has_every_key_of_keys_py() -> None:
    table = docs_site.redis_keys_table()
    for key in ("ct:job:{task_id}", "ct:solve:budget", "ct:dev:checkout", "ct:lock:parked:{host}"):
        assert f"| `{key}` |" in table
    assert "| `SPEND_TTL` | 7200 |" in table


def _site(root: Path, pages: dict[str, str]) -> Path:
    for name, html in pages.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(html)
    return root


def test_the_link_check_finds_a_missing_page_and_anchor(tmp_path: Path) -> None:
    site = _site(
        tmp_path,
        {
            "index.html": '<a href="guide/">g</a><a href="guide/#there">ok</a>'
            '<a href="guide/#nowhere">bad anchor</a><a href="gone/">bad page</a>'
            '<img src="pic.png"><a href="https://example.com/">out</a>',
            "guide/index.html": '<h2 id="there">x</h2><a href="../index.html#top">up</a>',
            "pic.png": "",
        },
    )
    report = docs_check.Report()
    docs_check.check_links(site, report)
    assert report.pages == 2
    assert report.links == 6
    assert sorted(report.problems) == [
        "guide/index.html: link '../index.html#top': no such anchor",
        "index.html: link 'gone/': no such file in the site",
        "index.html: link 'guide/#nowhere': no such anchor",
    ]


def test_the_path_check_finds_a_cited_file_that_is_not_there(tmp_path: Path) -> None:
    (tmp_path / "page.md").write_text(
        "See `captcha_tasks/errors.py`, `provider/offers.py`, `deploy/k8s/` and\n"
        "`docs/PROTOCOL.md`; not `.run/env`, `/usr/bin/chromium` or `myapp.py`.\n"
        "```\nnot/a/citation.py\n```\n"
    )
    report = docs_check.Report()
    docs_check.check_paths(tmp_path, report)
    assert report.paths == 4
    assert report.problems == ["page.md: cites 'docs/PROTOCOL.md', not in the repository"]


def test_the_tasks_page_shows_a_task_as_its_caller_calls_it() -> None:
    griffe = pytest.importorskip("griffe")
    root = Path(__file__).parents[3]
    spec = importlib.util.spec_from_file_location(
        "caller_view", root / "docs/griffe_caller_view.py"
    )
    assert spec is not None and spec.loader is not None
    caller_view = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(caller_view)
    CallerView, as_markdown = caller_view.CallerView, caller_view.as_markdown

    loaded = griffe.load(
        "captcha_tasks.worker.kind_tasks",
        search_paths=[str(root)],
        extensions=griffe.load_extensions(CallerView),
    )
    task = loaded["solve_recaptcha_v2"]
    names = [parameter.name for parameter in task.parameters]
    assert names[:2] == ["sitekey", "pageurl"] and "provider" in names
    assert task.docstring is not None and ":func:" not in task.docstring.value
    assert as_markdown(":func:`~a.solve` or :class:`a.B`, ``x``") == "`solve` or `a.B`, `x`"
