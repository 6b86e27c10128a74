"""Property-based checks of the ``captcha-tasks`` and ``captcha-tasks-dev`` command lines
against bad input.

Whatever the arguments, the command ends with a usage error (exit 2) or one clear
``Error:`` line (exit 1), never a Python traceback. Everything runs through the
installed entry points, :func:`captcha_tasks.cli.main.run` and
:func:`captcha_tasks_dev.cli.run` (which turn configuration errors into exit 2), under
click's ``CliRunner``; the two groups' command names are distinct, so the first argument
says which.

Two kinds of runs:

- parse-time properties call every command with its callback replaced by a recorder:
  a bad value must be refused before the command would start anything (the dev stack,
  a benchmark, a rollout);
- commands that read or write shared state run for real against a Redis URL on a
  closed loopback port: they must fail at once with one line.
"""

from __future__ import annotations

import contextlib
import json
import math
import string
import sys
import time
from collections.abc import Iterator
from typing import Any
from unittest import mock

import click
import pytest
from click.testing import CliRunner, Result
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from captcha_tasks.cli.main import main, run
from captcha_tasks.settings import get_settings
from captcha_tasks_dev.cli import main as dev_main
from captcha_tasks_dev.cli import run as dev_run
from captcha_tasks_dev.procs import free_port

PROPS = settings(derandomize=True, database=None, max_examples=100, deadline=None)
#: Properties whose examples open (refused) connections or parse a whole command tree.
SLOW_PROPS = settings(PROPS, max_examples=60)
#: Longest a command may take to give up on a closed Redis port.
FAIL_FAST_SECONDS = 10.0

PASSWORD = "Pw!s3cret-Proxy"


class EntryPoint:
    """``captcha-tasks`` as installed (``run()`` reading ``sys.argv``), for CliRunner; a
    command of ``captcha-tasks-dev`` through that one's entry point."""

    name = "captcha-tasks"

    def main(self, args: Any = (), prog_name: str = "captcha-tasks", **extra: Any) -> None:
        get_settings.cache_clear()  # the environment CliRunner set for this call
        args = list(args)
        dev = bool(args) and args[0] in DEV_COMMANDS
        try:
            argv = ["captcha-tasks-dev" if dev else prog_name, *args]
            with mock.patch.object(sys, "argv", argv):
                (dev_run if dev else run)()
        finally:
            get_settings.cache_clear()


def invoke(args: list[str], env: dict[str, str] | None = None, stdin: str | None = None) -> Result:
    started = time.monotonic()
    result = CliRunner().invoke(EntryPoint(), args, env=env, input=stdin)  # type: ignore[arg-type]
    result.elapsed = time.monotonic() - started  # type: ignore[attr-defined]
    return result


def assert_clean_failure(result: Result, codes: tuple[int, ...] = (1, 2)) -> None:
    """Exit 1 or 2 with exactly one ``Error:`` line and no traceback."""
    shown = f"exit {result.exit_code}:\n{result.output}"
    assert result.exception is None or isinstance(result.exception, SystemExit), (
        f"{result.exception!r}\n{shown}"
    )
    assert "Traceback" not in result.output, shown
    assert result.exit_code in codes, shown
    errors = [
        line
        for line in result.output.splitlines()
        if line.startswith(("Error:", "captcha-tasks: ", "captcha-tasks-dev: "))
    ]
    assert len(errors) == 1, shown
    if result.exit_code == 1:
        assert result.output.strip() == errors[0], shown  # the one line, nothing else


# -- the command tree -----------------------------------------------------------------


def _walk(
    command: click.Command, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], click.Command]]:
    yield path, command
    for name, sub in sorted(getattr(command, "commands", {}).items()):
        yield from _walk(sub, (*path, name))


DEV_COMMANDS = set(dev_main.list_commands(click.Context(dev_main)))
assert not DEV_COMMANDS & set(main.list_commands(click.Context(main)))
COMMANDS = [(path, command) for group in (main, dev_main) for path, command in _walk(group) if path]
LEAVES = [(path, command) for path, command in COMMANDS if not isinstance(command, click.Group)]


@contextlib.contextmanager
def parse_only() -> Iterator[list[tuple[str, ...]]]:
    """Every command's callback replaced by a recorder of the commands that ran."""
    ran: list[tuple[str, ...]] = []
    with contextlib.ExitStack() as stack:
        for path, command in LEAVES:
            record = (lambda _path: lambda *args, **kwargs: ran.append(_path))(path)
            stack.enter_context(mock.patch.object(command, "callback", record))
        yield ran


def _required_args(command: click.Command) -> list[str]:
    """Placeholders for the command's required arguments and options."""
    args: list[str] = []
    for param in command.params:
        if not param.required:
            continue
        value = param.type.choices[0] if isinstance(param.type, click.Choice) else "1"
        if isinstance(param, click.Option):
            args += [param.opts[0], str(value)]
        else:
            args.append(str(value))
    return args


def _checked_options() -> list[tuple[tuple[str, ...], click.Option]]:
    """Every option whose type can refuse a value: numbers, ranges, choices."""
    found = []
    for path, command in LEAVES:
        for param in command.params:
            if not isinstance(param, click.Option) or param.is_flag or param.hidden:
                continue
            if isinstance(param.type, click.types._NumberParamTypeBase | click.Choice):
                found.append((path, param))
    return found


CHECKED_OPTIONS = _checked_options()
NO_DIGITS = st.text(string.ascii_letters + string.punctuation.replace("-", "") + " é²", max_size=12)


def _refused_values(param: click.Option) -> st.SearchStrategy[str]:
    """Values the option's type must refuse."""
    kind = param.type
    if isinstance(kind, click.Choice):
        choices = {str(c) if kind.case_sensitive else str(c).lower() for c in kind.choices}
        fold = (lambda v: v) if kind.case_sensitive else str.lower
        return st.text(max_size=15).filter(lambda v: fold(v) not in choices)
    bad = [
        NO_DIGITS.filter(lambda v: v.strip() != ""),
        st.sampled_from(["", " ", "1e", "--", "0x10"]),
    ]
    if isinstance(kind, click.types.FloatParamType):
        bad.append(st.sampled_from(["nan", "NaN", "inf", "-inf", "Infinity", "1e999"]))
    else:
        bad.append(st.sampled_from(["1.5", "nan", "1e3", str(2**70) + ".0"]))
    low, high = getattr(kind, "min", None), getattr(kind, "max", None)
    if low is not None:
        edge = [str(low)] if getattr(kind, "min_open", False) else []
        bad.append(st.sampled_from([str(low - 1), str(low - 1000), *edge]))
    if high is not None:
        edge = [str(high)] if getattr(kind, "max_open", False) else []
        bad.append(st.sampled_from([str(high + 1), str(high * 1000 + 1), *edge]))
    return st.one_of(bad)


# -- parse time: every command --------------------------------------------------------


def test_every_command_has_help() -> None:
    with parse_only() as ran:
        for path, _ in COMMANDS:
            result = invoke([*path, "--help"])
            assert result.exit_code == 0 and "Usage:" in result.output, (path, result.output)
    assert ran == []


@SLOW_PROPS
@given(
    command=st.sampled_from(COMMANDS),
    junk=st.lists(st.text(min_size=1, max_size=10), min_size=1, max_size=3),
)
def test_unknown_options_and_extra_arguments_are_usage_errors(
    command: tuple[tuple[str, ...], click.Command], junk: list[str]
) -> None:
    path, cmd = command
    option = "--" + "".join(c for c in junk[0] if c.isalnum()) + "-no-such-option"
    with parse_only() as ran:
        result = invoke([*path, *_required_args(cmd), option, *junk[1:]])
    assert_clean_failure(result, codes=(2,))
    assert "No such option" in result.output
    assert ran == []


@SLOW_PROPS
@given(
    group=st.sampled_from(
        [(p, c) for p, c in COMMANDS if isinstance(c, click.Group)] + [((), main)]
    ),
    name=st.text(min_size=1, max_size=12),
)
def test_unknown_subcommands_are_usage_errors(
    group: tuple[tuple[str, ...], click.Group], name: str
) -> None:
    path, cmd = group
    assume(name not in cmd.commands and not name.startswith("-"))
    with parse_only() as ran:
        result = invoke([*path, name])
    assert_clean_failure(result, codes=(2,))
    assert ran == []


@PROPS
@given(data=st.data(), target=st.sampled_from(CHECKED_OPTIONS))
def test_bad_option_values_are_refused_before_the_command_runs(
    data: Any, target: tuple[tuple[str, ...], click.Option]
) -> None:
    path, option = target
    value = data.draw(_refused_values(option), label="value")
    assert_refused_at_parse_time(path, option, value)


def assert_refused_at_parse_time(path: tuple[str, ...], option: click.Option, value: str) -> None:
    command = dict(LEAVES)[path]
    with parse_only() as ran:
        result = invoke([*path, *_required_args(command), option.opts[0], value])
    assert_clean_failure(result, codes=(2,))
    assert option.opts[0] in result.output or option.name.upper() in result.output, result.output
    assert ran == []


FLOAT_OPTIONS = [
    (p, o) for p, o in CHECKED_OPTIONS if isinstance(o.type, click.types.FloatParamType)
]


@pytest.mark.parametrize("value", ["nan", "inf", "-inf"])
@pytest.mark.parametrize(
    "target", FLOAT_OPTIONS, ids=[" ".join(p) + " " + o.opts[0] for p, o in FLOAT_OPTIONS]
)
def test_no_float_option_takes_nan_or_inf(
    target: tuple[tuple[str, ...], click.Option], value: str
) -> None:
    """Found by the property above: click's FloatRange lets nan through (every comparison
    with it is false) and inf through open bounds (``check --max-age nan``: never stale)."""
    assert_refused_at_parse_time(*target, value)


@PROPS
@given(
    values=st.lists(
        st.one_of(
            st.text(max_size=12),
            st.sampled_from(
                ["=", "image=", "=5", "image=nan", "image=inf", "image=-1", "nope=1", "image=1=2"]
            ),
        ),
        min_size=1,
        max_size=3,
    )
)
def test_sandbox_latency_pairs_are_parsed_or_refused(values: list[str]) -> None:
    args = ["sandbox"]
    for value in values:
        args += ["--latency", value]
    with parse_only() as ran:
        result = invoke(args)
    if result.exit_code == 0:
        assert ran == [("sandbox",)]
        return
    assert_clean_failure(result, codes=(2,))
    assert ran == []


# -- commands that use Redis, against a closed port -----------------------------------


@pytest.fixture(scope="module")
def closed_redis() -> dict[str, str]:
    """An environment whose Redis is a loopback port nothing listens on."""
    url = f"redis://127.0.0.1:{free_port()}/0"
    return {"CAPTCHA_TASKS_REDIS_URL": url, "CAPTCHA_TASKS_STATE_URL": url}


def assert_fails_fast(result: Result) -> None:
    assert_clean_failure(result)
    assert result.elapsed < FAIL_FAST_SECONDS, result.elapsed  # type: ignore[attr-defined]


TEXT = st.one_of(
    st.text(max_size=30).filter(lambda v: "\x00" not in v),
    st.sampled_from(["", " ", "-", "--", "-x", "https://example.com/", "http://[::1", "é" * 300]),
)


SITEKEYS = {
    "recaptcha_v2": "6Le-wvkSAAAAAPBMRTvw0Q4Muexq9bi0DJwx_mJ-",
    "recaptcha_v3": "6Le-wvkSAAAAAPBMRTvw0Q4Muexq9bi0DJwx_mJ-",
    "turnstile": "0x4AAAAAAABkMYinukE8nzY",
    "hcaptcha": "a5f74b19-9e45-40e0-b45d-47ff91b7a6c2",
}
POOL_OPTIONS = [
    ["--min-score", "nan"],
    ["--min-score", "7"],
    ["--min-score", "0.5"],
    ["--target", "3"],
    ["--target", "3"],
    ["--target", "-1"],
    ["--adaptive"],
    ["--action", ""],
    ["--action", "a b"],
]


@SLOW_PROPS
@given(
    kind=st.one_of(st.sampled_from(sorted(SITEKEYS)), TEXT),
    sitekey=st.none() | TEXT,  # None: the kind's own valid sitekey
    pageurl=st.one_of(st.just("https://example.com/login"), TEXT),
    options=st.lists(st.sampled_from(POOL_OPTIONS), max_size=3),
)
@example(
    kind="turnstile", sitekey=None, pageurl="https://example.com/", options=[["--target", "3"]]
)
def test_pool_fill_refuses_bad_input_or_fails_fast_on_redis(
    closed_redis: dict[str, str],
    kind: str,
    sitekey: str | None,
    pageurl: str,
    options: list[list[str]],
) -> None:
    sitekey = SITEKEYS.get(kind, "x") if sitekey is None else sitekey
    args = ["pool", "fill", kind, sitekey, pageurl] + [
        part for option in options for part in option
    ]
    assert_fails_fast(invoke(args, env=closed_redis))


def test_pool_status_fails_fast_on_redis(closed_redis: dict[str, str]) -> None:
    assert_fails_fast(invoke(["pool", "status"], env=closed_redis))


#: (proxy text, the password in it or None)
PROXY_TEXTS = st.one_of(
    TEXT.map(lambda text: (text, None)),
    st.builds(
        lambda scheme, user, host, port: (f"{scheme}{user}:{PASSWORD}@{host}:{port}", PASSWORD),
        st.sampled_from(["", "http://", "socks5://", "gopher://"]),
        st.sampled_from(["alice", "", "a:b", "al ice"]),
        st.sampled_from(["proxy.example.com", "10.0.0.1", "[::1]", "bad_host!", ""]),
        st.sampled_from(["8080", "0", "99999", "²", "x", ""]),
    ),
    st.builds(
        lambda host, port: (f"{host}:{port}:alice:{PASSWORD}", PASSWORD),
        st.sampled_from(["proxy.example.com", "bad host"]),
        st.sampled_from(["3128", "٣١٢٨", "1²"]),
    ),
)


@SLOW_PROPS
@given(
    text_and_password=PROXY_TEXTS,
    kind=st.one_of(st.none(), st.sampled_from(["http", "SOCKS5", "gopher", ""])),
    stdin=st.booleans(),
)
@example(text_and_password=("proxy.example.com:²", None), kind=None, stdin=False)
def test_proxies_add_refuses_bad_urls_or_fails_fast_and_never_shows_the_password(
    closed_redis: dict[str, str],
    text_and_password: tuple[str, str | None],
    kind: str | None,
    stdin: bool,
) -> None:
    text, password = text_and_password
    assume(not stdin or "\n" not in text)
    args = ["proxies", "add", "-" if stdin else text] + (
        ["--type", kind] if kind is not None else []
    )
    result = invoke(args, env=closed_redis, stdin=text + "\n" if stdin else None)
    assert_fails_fast(result)
    if password is not None:
        assert password not in result.output


@SLOW_PROPS
@given(
    command=st.sampled_from(
        [
            ["proxies", "list"],
            ["proxies", "list", "--json"],
            ["proxies", "remove"],
            ["proxies", "report-bad"],
            ["sessions", "show"],
            ["sessions", "clear"],
            ["sessions", "export"],
            ["sessions", "show", "--playwright"],
        ]
    ),
    argument=TEXT,
    reason=st.none() | TEXT,
)
def test_state_commands_fail_fast_with_one_line(
    closed_redis: dict[str, str], command: list[str], argument: str, reason: str | None
) -> None:
    args = list(command)
    if command[-1] not in ("list", "--json"):
        args.insert(2, argument)
    if command[-1] == "report-bad" and reason is not None:
        args += ["--reason", reason]
    assert_fails_fast(invoke(args, env=closed_redis))


JSON_JUNK = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=10),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(
            st.sampled_from(
                [
                    "name",
                    "value",
                    "domain",
                    "url",
                    "path",
                    "expires",
                    "secure",
                    "httpOnly",
                    "sameSite",
                    "cookies",
                    "x",
                ]
            ),
            inner,
            max_size=5,
        )
    ),
    max_leaves=10,
)


@SLOW_PROPS
@given(
    host=st.one_of(st.just("example.com"), TEXT),
    document=st.one_of(JSON_JUNK.map(json.dumps), TEXT),
)
def test_sessions_import_refuses_any_document_with_one_line(
    closed_redis: dict[str, str], host: str, document: str
) -> None:
    assert_fails_fast(invoke(["sessions", "import", host, "-"], env=closed_redis, stdin=document))


@SLOW_PROPS
@given(
    template=st.one_of(
        TEXT,
        st.sampled_from(
            [
                "{worker.x}",
                "{worker[x]}",
                "{0}",
                "{}",
                "{worker!z}",
                "{worker:{version}}",
                "{nope}",
                "{worker.__class__}",
                "restart {worker} {version}",
                "{",
                "}",
            ]
        ),
    ),
    drain=st.one_of(
        st.sampled_from(["auto", "AUTO", "nan", "inf", "-1", "-inf", "", "soon"]), TEXT
    ),
)
@example(template="{worker.upper}", drain="nan")  # nan seconds accepted: the rollout ran
@example(template="{worker.nope}", drain="-1")  # AttributeError escaped the template check
@example(template="{worker[x]}", drain="-1")  # TypeError escaped the template check
@example(template="restart {worker}", drain="auto")  # redis ConnectionError: a traceback
def test_rollout_refuses_bad_templates_and_drain_timeouts_before_anything_runs(
    closed_redis: dict[str, str], template: str, drain: str
) -> None:
    try:
        seconds = float(drain)
    except ValueError:
        seconds = None
    # Real seconds would start a rollout: only values that must be refused, and "auto"
    # (which reads Redis: here a closed port).
    assume(seconds is None or not (math.isfinite(seconds) and seconds >= 0))
    ran: list[str] = []

    def run_rollout(self: Any) -> dict[str, Any]:
        ran.append("run")
        return {"status": "completed"}

    with mock.patch("captcha_tasks.fleet.rollout.Rollout.run", run_rollout):
        result = invoke(
            ["rollout", "--to", "v2", "--restart", template, "--drain-timeout", drain],
            env=closed_redis,
        )
    assert_fails_fast(result)
    assert ran == []


@SLOW_PROPS
@given(
    options=st.lists(
        st.sampled_from(
            [
                ["--max-age", "0.5"],
                ["--max-age", "1e300"],
                ["--timeout", "0.2"],
                ["--worker", "celery@x"],
                ["--worker", ""],
                ["--json"],
                ["--file", "/nonexistent/beat.json"],
                ["--file", "/"],
            ]
        ),
        max_size=3,
    ),
)
def test_check_reports_not_ok_at_once_without_a_broker(
    closed_redis: dict[str, str], options: list[list[str]]
) -> None:
    args = ["check"] + [part for option in options for part in option]
    result = invoke(args, env=closed_redis)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    assert "Traceback" not in result.output
    assert result.exit_code == 1 and result.elapsed < FAIL_FAST_SECONDS  # type: ignore[attr-defined]


def test_status_fails_fast_on_redis(closed_redis: dict[str, str]) -> None:
    result = invoke(
        ["status", "--workers-timeout", "0", "--balance-timeout", "0.5"], env=closed_redis
    )
    assert_fails_fast(result)


# -- the environment ------------------------------------------------------------------

SETTINGS_VARIABLES = [
    "CAPTCHA_TASKS_REDIS_URL",
    "CAPTCHA_TASKS_TIME_SCALE",
    "CAPTCHA_TASKS_THREADS",
    "CAPTCHA_TASKS_KEY_PREFIX",
    "CAPTCHA_TASKS_ALLOWED_DOMAINS",
    "CAPTCHA_TASKS_SOLVER_URL",
    "CAPTCHA_TASKS_HTTP_TIMEOUT",
    "CAPTCHA_TASKS_MAX_IMAGE_BYTES",
    "CAPTCHAAI_API_KEY",
]


@PROPS
@given(
    variable=st.sampled_from(SETTINGS_VARIABLES),
    value=st.one_of(
        st.text(max_size=30).filter(lambda v: "\x00" not in v),
        st.sampled_from(
            [
                "nan",
                "-1",
                "0",
                "1e999",
                "redis://:pw@h:6379/x",
                "rediss://",
                "x" * 300,
                "redis://[",
                "http://[::1",
                "redis://:pw@host:99999/0",
                "https://h:99999/",
            ]
        ),
    ),
)
def test_a_malformed_setting_is_one_line_naming_the_variable(variable: str, value: str) -> None:
    result = invoke(["settings"], env={variable: value})
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(
        result.exception
    )
    assert "Traceback" not in result.output
    if result.exit_code == 2:
        assert result.output.startswith("captcha-tasks: configuration error:"), result.output
        assert len(result.output.strip().splitlines()) == 1, result.output
        assert variable in result.output
    else:
        assert result.exit_code == 0, result.output
        if variable == "CAPTCHAAI_API_KEY" and len(value.strip()) >= 8:
            assert value.strip() not in result.output  # shown masked


@pytest.mark.parametrize("variable", ["CAPTCHA_TASKS_REDIS_URL", "CAPTCHA_TASKS_SOLVER_URL"])
@pytest.mark.parametrize("value", ["redis://[", "http://:pw@host:99999/0"])
def test_a_malformed_url_is_a_configuration_error(variable: str, value: str) -> None:
    """Found by the property above: urlsplit()'s ValueError escaped as a traceback."""
    result = invoke(["settings"], env={variable: value})
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    assert result.exit_code == 2 and variable in result.output
    assert ":pw@" not in result.output


@pytest.mark.parametrize("variable", ["CAPTCHA_TASKS_TIME_SCALE", "CAPTCHA_TASKS_HTTP_TIMEOUT"])
@pytest.mark.parametrize("value", ["inf", "1e999"])
def test_an_infinite_setting_is_a_configuration_error(variable: str, value: str) -> None:
    result = invoke(["settings"], env={variable: value})
    assert result.exit_code == 2 and variable in result.output, result.output
