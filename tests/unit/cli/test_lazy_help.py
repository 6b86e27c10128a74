"""``captcha-tasks --help`` lists the lazy subcommands without importing them, each with
the short help the command itself shows once imported."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import click
from click.testing import CliRunner

from captcha_tasks.cli.main import LAZY_COMMANDS, LazyGroup, docstring_of, main

LISTING = """
import json, sys
from click.testing import CliRunner
from captcha_tasks.cli.main import LAZY_COMMANDS, main
out = CliRunner().invoke(main, ["--help"], terminal_width=80).output
modules = {target.partition(":")[0] for target in LAZY_COMMANDS.values()}
print(json.dumps({"help": out, "imported": sorted(modules & set(sys.modules))}))
"""


def test_help_lists_every_command_as_it_would_show_itself_without_importing_it() -> None:
    env = {**os.environ, "COLUMNS": "80"}
    done = subprocess.run(
        [sys.executable, "-c", LISTING],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    lazy = json.loads(done.stdout)
    assert lazy["imported"] == []
    for name in LAZY_COMMANDS:  # imports every command: the listing then uses their own help
        main.commands[name]
    loaded = CliRunner().invoke(main, ["--help"], terminal_width=80).output
    assert lazy["help"] == loaded
    for name in LAZY_COMMANDS:
        assert f"\n  {name} " in loaded


def test_the_short_help_is_the_docstring_shortened_as_click_shortens_it() -> None:
    for name, target in LAZY_COMMANDS.items():
        command = main.commands[name]
        assert docstring_of(target), target
        for limit in (30, 45, 80, 200):
            stand_in = click.Command(name, help=docstring_of(target))
            assert stand_in.get_short_help_str(limit) == command.get_short_help_str(limit), name


def test_a_command_without_a_source_is_listed_without_help() -> None:
    group = LazyGroup(name="g", lazy_commands={"gone": "captcha_tasks.cli.nowhere:command"})
    out = CliRunner().invoke(group, ["--help"]).output
    assert "  gone" in out and docstring_of("captcha_tasks.cli.nowhere:command") == ""
