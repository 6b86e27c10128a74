"""The ``captcha-tasks`` command."""

from __future__ import annotations

import ast
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import json
import math
import sys
from collections.abc import Callable, Iterator, Mapping, MutableMapping
from gettext import gettext as _
from typing import Any

import click

from ..errors import ConfigurationError
from ..settings import get_settings
from ..version import worker_version
from .errors import EXTRA_OF_MODULE, MissingExtra

__all__ = ["LAZY_COMMANDS", "LazyGroup", "docstring_of", "finite_floats", "main"]

#: The subcommands defined in other modules, imported only when one is run (or asked for
#: its ``--help``): name -> "module:function". ``captcha-tasks --help`` lists them with
#: their docstrings read from the source (:func:`docstring_of`), importing nothing.
LAZY_COMMANDS: dict[str, str] = {
    "sessions": "captcha_tasks.cli.sessions:sessions_group",
    "pool": "captcha_tasks.cli.pool:pool_group",
    "proxies": "captcha_tasks.cli.proxies:proxies_group",
    "watch": "captcha_tasks.cli.monitor:watch_command",
    "status": "captcha_tasks.cli.monitor:status_command",
    "purge": "captcha_tasks.cli.purge:purge_command",
    "rollout": "captcha_tasks.cli.fleet:rollout_command",
    "check": "captcha_tasks.cli.fleet:check_command",
    "bridge": "captcha_tasks.cli.bridge:bridge_group",
    "acl": "captcha_tasks.cli.acl:acl_command",
    "mcp": "captcha_tasks.mcp.cli:mcp_command",
}


def docstring_of(target: str) -> str:
    """The docstring of ``"module:function"``, read from the module's source: neither
    the module nor its packages are imported (a package's ``__init__`` may import what
    the command needs, the commands import Celery). Empty when there is no source."""
    module_name, _, attribute = target.partition(":")
    top, *parts = module_name.split(".")
    spec = importlib.util.find_spec(top)
    for depth in range(1, len(parts) + 1):
        if spec is None or not spec.submodule_search_locations:
            return ""
        name = ".".join([top, *parts[:depth]])
        spec = importlib.machinery.PathFinder.find_spec(name, spec.submodule_search_locations)
    loader = None if spec is None else spec.loader
    if spec is None or not isinstance(loader, importlib.abc.InspectLoader):
        return ""
    source = loader.get_source(spec.name)
    for node in ast.parse(source or "").body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == attribute:
            return ast.get_docstring(node) or ""
    return ""


class _LazyCommands(MutableMapping[str, click.Command]):
    """A group's commands: those added, and those of a table imported on first access.

    Names and membership never import anything; reading a command (``[name]``,
    ``get``, ``items``, ``values``) imports its module, runs ``on_load`` on it once
    and keeps it. A module that fails on a missing optional package is
    :class:`MissingExtra` (one line naming the extra), not a traceback.
    """

    def __init__(
        self,
        loaded: Mapping[str, click.Command],
        table: Mapping[str, str],
        on_load: Callable[[click.Command], None],
    ) -> None:
        self._loaded = dict(loaded)
        self._table = {name: spec for name, spec in table.items() if name not in self._loaded}
        self._on_load = on_load

    def pending(self, name: str) -> bool:
        """The command is in the table and not imported yet."""
        return name in self._table and name not in self._loaded

    def short_help(self, name: str) -> str:
        return docstring_of(self._table[name])

    def loaded(self) -> list[click.Command]:
        """The commands imported so far (and those added)."""
        return list(self._loaded.values())

    def __getitem__(self, name: str) -> click.Command:
        if name in self._loaded:
            return self._loaded[name]
        target = self._table[name]
        module_name, _, attribute = target.partition(":")
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            extra = EXTRA_OF_MODULE.get((exc.name or "").partition(".")[0])
            if extra is None:
                raise
            raise MissingExtra(name, extra) from None
        command = getattr(module, attribute)
        if not isinstance(command, click.Command):
            raise TypeError(f"{target} is not a click command")
        self._on_load(command)
        self._loaded[name] = command
        return command

    def __setitem__(self, name: str, command: click.Command) -> None:
        self._loaded[name] = command
        self._table.pop(name, None)

    def __delitem__(self, name: str) -> None:
        if name not in self:
            raise KeyError(name)
        self._loaded.pop(name, None)
        self._table.pop(name, None)

    def __contains__(self, name: object) -> bool:
        return name in self._loaded or name in self._table

    def __iter__(self) -> Iterator[str]:
        yield from self._loaded
        yield from (name for name in self._table if name not in self._loaded)

    def __len__(self) -> int:
        return len(self._loaded.keys() | self._table.keys())


class LazyGroup(click.Group):
    """A click group whose subcommands of ``lazy_commands`` are imported on demand
    (click's "lazily loading subcommands" pattern): ``--help`` lists them with the short
    help of their docstrings, and running one imports only its module, so a command needing
    an optional package fails alone, in one line, when that package is missing."""

    def __init__(
        self,
        *args: Any,
        lazy_commands: Mapping[str, str] | None = None,
        on_load: Callable[[click.Command], None] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self._lazy = _LazyCommands(self.commands, lazy_commands or {}, on_load or (lambda c: None))
        self.commands = self._lazy

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """As click's, with the docstrings of the commands not imported yet."""
        shown: list[tuple[str, click.Command]] = []
        for name in self.list_commands(ctx):
            if self._lazy.pending(name):
                # A stand-in with the docstring: shortened as click shortens help.
                shown.append((name, click.Command(name, help=self._lazy.short_help(name))))
                continue
            command = self.get_command(ctx, name)
            if command is not None and not command.hidden:
                shown.append((name, command))
        if not shown:
            return
        limit = formatter.width - 6 - max(len(name) for name, _command in shown)
        rows = [(name, command.get_short_help_str(limit)) for name, command in shown]
        with formatter.section(_("Commands")):
            formatter.write_dl(rows)


def _on_load(command: click.Command) -> None:
    finite_floats(command)


@click.group(
    cls=LazyGroup,
    lazy_commands=LAZY_COMMANDS,
    on_load=_on_load,
    context_settings={"help_option_names": ["-h", "--help"]},
)
@click.version_option(worker_version(), prog_name="captcha-tasks")
def main() -> None:
    """Run CAPTCHA solving at scale on Celery and Redis.

    Workers are plain Celery workers: celery -A captcha_tasks worker -c 4.
    """


@main.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def settings(as_json: bool) -> None:
    """Show the settings read from the environment, by variable (secrets masked)."""
    current = get_settings()
    if as_json:
        click.echo(json.dumps(current.describe(), indent=2))
        return
    shown = current.variables()
    width = max(map(len, shown))
    for name, value in shown.items():
        click.echo(f"{name:{width}}  {_plain(value, 'all' if name.endswith('_TYPES') else '-')}")


def _plain(value: object, empty: str = "-") -> str:
    """A setting's value as its variable would spell it: ``image,turnstile``,
    ``image:0.5``; ``empty`` when unset or empty (a provider's types: ``all``)."""
    if isinstance(value, list | tuple):
        return ",".join(map(str, value)) or empty
    if isinstance(value, dict):
        return ",".join(f"{k}:{v}" for k, v in value.items()) or empty
    return empty if value is None or value == "" else str(value)


class _FiniteFloat(click.types.FloatParamType):
    """A float option that refuses nan and inf (``float()`` reads both)."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number.", param, ctx)
        return number


class _FiniteFloatRange(click.FloatRange):
    """A FloatRange that refuses nan (which passes every bound: each comparison with it
    is false) and inf."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number.", param, ctx)
        return number


def finite_floats(command: click.Command) -> None:
    """Every float option of the command and its subcommands refuses nan and inf."""
    for param in command.params:
        kind = param.type
        if isinstance(kind, click.FloatRange) and not isinstance(kind, _FiniteFloatRange):
            param.type = _FiniteFloatRange(
                kind.min, kind.max, min_open=kind.min_open, max_open=kind.max_open, clamp=kind.clamp
            )
        elif type(kind) is click.types.FloatParamType:
            param.type = _FiniteFloat()
    commands = getattr(command, "commands", {})
    # Not yet imported subcommands get it when they are (LazyGroup's on_load).
    subs = commands.loaded() if isinstance(commands, _LazyCommands) else commands.values()
    for sub in subs:
        finite_floats(sub)


finite_floats(main)


def run() -> None:
    """Entry point that turns configuration errors into one clear line and exit code 2."""
    try:
        main(standalone_mode=True)
    except ConfigurationError as exc:
        click.echo(f"captcha-tasks: configuration error: {exc}", err=True)
        sys.exit(2)


if __name__ == "__main__":
    run()
