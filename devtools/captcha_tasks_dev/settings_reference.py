"""The settings reference of the documentation site, generated from the code.

Every variable :class:`captcha_tasks.settings.Settings` reads is a ``_SOURCES`` entry; its
meaning is the ``#:`` comment above the field in settings.py (read with :mod:`ast` and
:mod:`tokenize` from the module's source, so nothing is copied by hand), its default the
field's. The provider's variables are :class:`~captcha_tasks.settings.providers.ProviderConfig`'s
fields, read the same way: the ``default`` provider's single-provider variables
(:data:`~captcha_tasks.settings.providers.DEFAULT_VARIABLES`), then each named provider's
suffixes, described by that module's docstring. A few variables that are no field (an
alias, a file variant, the version, test aids) are described in :data:`OTHER_VARIABLES`;
:data:`NOTES` adds what a one-line comment leaves out (formats, exit codes, interactions).

:data:`SECTIONS` puts every variable in one section of the page.
:func:`undocumented` lists what lacks a description or a section, which a unit test
keeps empty; :func:`render` writes the page (markdown), read by the site's build hook.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import io
import re
import tokenize
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from captcha_tasks import settings
from captcha_tasks.settings import providers as provider_config

__all__ = [
    "NOTES",
    "OTHER_VARIABLES",
    "SECTIONS",
    "Entry",
    "entries",
    "provider_entries",
    "render",
    "undocumented",
]

#: Section title -> (the variables it lists, its introduction). Order is the page's.
SECTIONS: dict[str, tuple[tuple[str, ...], str]] = {
    "Provider": (
        (
            "CAPTCHA_TASKS_API_KEY",
            "CAPTCHAAI_API_KEY",
            "CAPTCHA_TASKS_PROVIDER",
            "CAPTCHA_TASKS_SOLVER_URL",
            "CAPTCHA_TASKS_THREADS",
            "CAPTCHA_TASKS_PRICES",
            "CAPTCHA_TASKS_BALANCE_FLOOR",
        ),
        "One provider, named `default`. With `CAPTCHA_TASKS_PROVIDERS` set, these variables "
        "are refused (one line naming them): use each named provider's below.",
    ),
    "Several providers": (
        ("CAPTCHA_TASKS_PROVIDERS",),
        "`CAPTCHA_TASKS_PROVIDERS=main,backup` names the providers in order of preference; "
        "each name `N` (upper-cased) has the variables of the next table. See "
        "[Several providers](../guides/providers.md).",
    ),
    "Redis": (
        (
            "CAPTCHA_TASKS_REDIS_URL",
            "CAPTCHA_TASKS_BROKER_URL",
            "CAPTCHA_TASKS_RESULT_BACKEND",
            "CAPTCHA_TASKS_STATE_URL",
            "CAPTCHA_TASKS_REDIS_CA_CERTS",
            "CAPTCHA_TASKS_REDIS_SENTINEL_MASTER",
            "CAPTCHA_TASKS_REDIS_SENTINEL_PASSWORD",
            "CAPTCHA_TASKS_REDIS_SENTINEL_TIMEOUT",
            "CAPTCHA_TASKS_REDIS_SENTINEL_WAIT",
            "CAPTCHA_TASKS_KEY_PREFIX",
            "CAPTCHA_TASKS_RESULT_EXPIRES",
            "CAPTCHA_TASKS_VISIBILITY_TIMEOUT",
        ),
        "URLs are `redis://`, `rediss://` (the server certificate is always verified), "
        "`unix://`, or a `;`-separated list of `sentinel://` URLs "
        "([Redis Sentinel and ACL users](../guides/redis.md)).",
    ),
    "Solve engine": (
        (
            "CAPTCHA_TASKS_HTTP_TIMEOUT",
            "CAPTCHA_TASKS_STARTUP_TIMEOUT",
            "CAPTCHA_TASKS_ENGINE_THREADS",
            "CAPTCHA_TASKS_READERS",
            "CAPTCHA_TASKS_MAX_IMAGE_BYTES",
            "CAPTCHA_TASKS_ALTCHA_MAX_NUMBER",
            "CAPTCHA_TASKS_ALTCHA_MAX_SECONDS",
            "CAPTCHA_TASKS_ALTCHA_MAX_MEMORY_MIB",
            "CAPTCHA_TASKS_ALTCHA_SOLVER",
            "CAPTCHA_TASKS_QUEUE_TIMEOUT",
            "CAPTCHA_TASKS_REPORT_WINDOW",
            "CAPTCHA_TASKS_ACCEPTANCE_WINDOW",
            "CAPTCHA_TASKS_ACCEPTANCE_HOSTS",
            "CAPTCHA_TASKS_ROUTING",
            "CAPTCHA_TASKS_BATCH_POLL",
            "CAPTCHA_TASKS_POLL_INTERVAL",
            "CAPTCHA_TASKS_POLL_READS",
        ),
        "How each worker's engine talks to the providers "
        "([How a solve runs](../explanation/how-a-solve-runs.md)).",
    ),
    "Callbacks": (
        (
            "CAPTCHA_TASKS_CALLBACK_URL",
            "CAPTCHA_TASKS_CALLBACK_TOKEN",
            "CAPTCHA_TASKS_CALLBACK_TOKEN_FILE",
            "CAPTCHA_TASKS_CALLBACK_PORT",
            "CAPTCHA_TASKS_CALLBACK_ADDRESS",
        ),
        "Providers push answers instead of being polled ([Callbacks](../CALLBACKS.md)).",
    ),
    "Pages and sessions": (
        (
            "CAPTCHA_TASKS_ALLOWED_DOMAINS",
            "CAPTCHA_TASKS_PAGE_ATTEMPTS",
            "CAPTCHA_TASKS_MAX_PAGE_BYTES",
            "CAPTCHA_TASKS_PAGE_DEADLINE",
            "CAPTCHA_TASKS_POOL_MIN_LIFE",
            "CAPTCHA_TASKS_LOCK_TTL",
            "CAPTCHA_TASKS_PROXY_LEASE_TTL",
            "CAPTCHA_TASKS_PROXY_COOLDOWN",
        ),
        "Page tasks, token pools, session locks and the proxy pool "
        "([Shared session state](../guides/sessions.md)).",
    ),
    "MCP server": (
        (
            "CAPTCHA_TASKS_MCP_AGENTS_FILE",
            "CAPTCHA_TASKS_MCP_AGENTS",
            "CAPTCHA_TASKS_MCP_AGENT",
            "CAPTCHA_TASKS_MCP_MAX_IN_FLIGHT",
            "CAPTCHA_TASKS_MCP_MAX_SPEND_PER_HOUR",
            "CAPTCHA_TASKS_MCP_TIMEOUT",
        ),
        "`captcha-tasks mcp`, the Model Context Protocol server for AI agents; each "
        "variable is the default of the command's option of the same name "
        "([AI agents (MCP server)](../guides/mcp.md)).",
    ),
    "Monitoring and fleet": (
        (
            "CAPTCHA_TASKS_METRICS_PORT",
            "CAPTCHA_TASKS_METRICS_ADDRESS",
            "PROMETHEUS_MULTIPROC_DIR",
            "CAPTCHA_TASKS_HEARTBEAT_INTERVAL",
            "CAPTCHA_TASKS_HEARTBEAT_FILE",
            "CAPTCHA_TASKS_VERSION",
            "FLOWER_BASIC_AUTH",
        ),
        "Metrics, liveness and rolling updates ([Monitoring](../guides/monitoring.md), "
        "[Rolling updates](../guides/rolling-updates.md)).",
    ),
    "Sandbox and testing": (
        ("CAPTCHA_TASKS_TIME_SCALE", "CAPTCHA_TASKS_TEST_CLOCK_OFFSET"),
        "Knobs for the sandbox, the tests and the benchmarks, not for a production "
        "deployment ([The solver sandbox](../guides/sandbox.md)).",
    ),
}

#: Variables read outside :class:`Settings`: variable -> (default, meaning).
OTHER_VARIABLES: dict[str, tuple[str, str]] = {
    "CAPTCHAAI_API_KEY": (
        "(none)",
        "another name of `CAPTCHA_TASKS_API_KEY`, read when that one is unset.",
    ),
    "CAPTCHA_TASKS_CALLBACK_TOKEN_FILE": (
        "(none)",
        "a file holding `CAPTCHA_TASKS_CALLBACK_TOKEN` (read once, at start-up, stripped).",
    ),
    "CAPTCHA_TASKS_VERSION": (
        "the package's version",
        "the version a worker reports (`inspect fleet_version`, the heartbeat); read at "
        "each report, so a restarted worker's value is current.",
    ),
    "PROMETHEUS_MULTIPROC_DIR": (
        "a private temporary directory per worker",
        "where a worker's processes keep their metric values (prometheus_client's "
        "multiprocess mode). If you set it, give each worker its own directory: the "
        "worker deletes the value files in it at start.",
    ),
    "FLOWER_BASIC_AUTH": (
        "(none)",
        "`user:password` (comma-separated for several) that Flower reads itself; "
        "`make flower` refuses to start without it, `make run` makes one up.",
    ),
    "CAPTCHA_TASKS_TEST_CLOCK_OFFSET": (
        "`0`",
        "seconds added to every read of the host's clock in the package "
        "(`state/clock.local_time`): a test aid for the fault suite's skewed-clock row, "
        "not a setting.",
    ),
}

#: Facts a field's one-line comment leaves out, shown after it: variable -> markdown.
NOTES: dict[str, str] = {
    "CAPTCHA_TASKS_API_KEY": "Formats: 32 letters and digits; CapSolver `CAP-` + 32 or 64 hex "
    "digits; CapMonster may add `__options`. Never in task arguments or results.",
    "CAPTCHA_TASKS_PROVIDER": "`captchaai`, `2captcha` (classic `in.php`/`res.php`; decides "
    'whether `ERROR_ZERO_BALANCE` means "no free threads", retried, or "no funds"), '
    "`2captcha-v2`, `anticaptcha`, `capsolver`, `capmonster` (JSON task API); "
    "`api.2captcha` in the URL means `2captcha-v2`.",
    "CAPTCHA_TASKS_PRICES": "`type=usd_per_1000,...`, e.g. `recaptcha_v2=2.99,image=0.7,"
    "turnstile=1.45` (types as in results' `type`): the result's `cost` with "
    '`cost_source: "configured"`, counted in the spend.',
    "CAPTCHA_TASKS_BALANCE_FLOOR": "Set, it turns on the balance watch: one worker at a time "
    "checks the balance once a minute, cluster-wide (`ct:balance:{provider}`); a balance "
    "below the floor logs one warning per crossing and shows in `status` and in "
    "`captcha_tasks_provider_balance_low`. Unset: no balance checks.",
    "CAPTCHA_TASKS_REDIS_URL": "`redis://`, `rediss://`, `unix://`, or a list of sentinels "
    "(`sentinel://h1:26379/0;sentinel://h2:26379;...`, as for the three overrides below).",
    "CAPTCHA_TASKS_STATE_URL": "Default: `CAPTCHA_TASKS_REDIS_URL`. Holds the thread budget, "
    "cookies, tokens, locks and proxies.",
    "CAPTCHA_TASKS_REDIS_SENTINEL_TIMEOUT": "A sentinel that does not answer is passed over "
    "for the next.",
    "CAPTCHA_TASKS_REDIS_SENTINEL_WAIT": "0-5. Not acknowledged in time: not sent, queued "
    "again. `0`: no wait (a failover may then send a job twice). Sentinel state URLs only.",
    "CAPTCHA_TASKS_STARTUP_TIMEOUT": "1-600. A Redis still unreachable then stops the worker "
    "(exit 69) with one line naming the variable and the masked URL; a provider that "
    "refuses its key is taken out of that worker, and with none left it exits 78.",
    "CAPTCHA_TASKS_MAX_IMAGE_BYTES": "No provider documents more than 1048576. Callers check "
    "images against their own value: set it for callers too when you raise it.",
    "CAPTCHA_TASKS_VISIBILITY_TIMEOUT": "Countdowns are capped at a quarter of it (at least 10 s).",
    "CAPTCHA_TASKS_REPORT_WINDOW": "With the queue timeout and the solve's deadline it "
    "makes up each job's TTL.",
    "CAPTCHA_TASKS_POLL_INTERVAL": "Halved from 50 captchas of a provider in flight; never "
    "closer than the provider's own read rules.",
    "CAPTCHA_TASKS_POLL_READS": "Mean delay after the answer is ready: 15 % of the spread of "
    "ready times at 2 reads, 9 % at 3, 6 % at 4 "
    "([Poll placement](../design/poll-placement.md)). The provider's own limits (2Captcha's "
    "first read after 5 s, CapMonster's 2 s between reads, read caps) hold whatever it says.",
    "CAPTCHA_TASKS_CALLBACK_URL": "Set with a token, every submit asks for a callback.",
    "CAPTCHA_TASKS_CALLBACK_TOKEN": "32-128 of `A-Za-z0-9_-`; masked everywhere.",
    "CAPTCHA_TASKS_CALLBACK_PORT": "Set: every worker runs the callback receiver on this "
    "port (`SO_REUSEPORT`: workers of one host share it).",
    "CAPTCHA_TASKS_CALLBACK_ADDRESS": "Put a TLS proxy in front (`deploy/callbacks/`).",
    "CAPTCHA_TASKS_METRICS_PORT": "`0` picks a free port and logs it (`metrics: serving "
    "http://127.0.0.1:PORT/metrics`). Workers on one host need a port each.",
    "CAPTCHA_TASKS_METRICS_ADDRESS": "The endpoint has no authentication: bind a wider "
    "address (`0.0.0.0`) only for a Prometheus on another machine, behind a firewall.",
    "CAPTCHA_TASKS_MCP_AGENTS_FILE": 'JSON: `{"agents": [{"name": ..., "token": ..., '
    '"max_in_flight": ..., "max_spend_per_hour": ...}]}`; names are 1-64 of '
    "`A-Za-z0-9_.-`, tokens 16 characters or more, both unique.",
    "CAPTCHA_TASKS_TIME_SCALE": "The sandbox honours it too, so tests and benchmarks run the "
    "same logic faster; the queue timeout and the report window are not scaled.",
}


@dataclass(frozen=True)
class Entry:
    """One variable of the reference."""

    variable: str
    default: str
    meaning: str
    field: str | None = None


def _comments(module: Any = settings, class_name: str = "Settings") -> dict[str, str]:
    """Each field's ``#:`` comment in ``class_name`` of ``module``, joined into one
    paragraph."""
    source = inspect.getsource(module)
    comment_lines: dict[int, str] = {}
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT and token.string.startswith("#:"):
            comment_lines[token.start[0]] = token.string[2:].strip()
    found: dict[str, str] = {}
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.ClassDef) and node.name == class_name):
            continue
        for statement in node.body:
            if isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name):
                number = statement.lineno - 1
                block: list[str] = []
                while number in comment_lines:
                    block.insert(0, comment_lines[number])
                    number -= 1
                if block:
                    found[statement.target.id] = " ".join(block)
    return found


def _markdown(text: str) -> str:
    """reST-flavoured comment text as markdown: ````x```` to ```x```, roles dropped."""
    text = re.sub(r":(?:data|mod|class|meth|func|attr):`~?([^`]+)`", r"`\1`", text)
    return text.replace("``", "`")


def _meaning(comment: str) -> str:
    """The comment without its leading variable name(s) (everything before the first
    ``": "`` of a comment that starts with a variable), as markdown."""
    text = _markdown(comment).strip()
    if not text.startswith("`"):
        return text
    _head, colon, rest = text.partition(": ")
    if not colon:  # the variable's name and nothing else
        return "" if re.fullmatch(r"`[A-Z0-9_]+`", text) else text
    return rest.strip()


def _default(field: dataclasses.Field[Any]) -> str:
    if field.default is dataclasses.MISSING:
        return "(none)"
    value = field.default
    if value is None or value == "" or value == ():
        return "(none)"
    return f"`{value}`"


def _provider_default(name: str, field: dataclasses.Field[Any]) -> str:
    if name == "url":
        return "the protocol's own"
    return _default(field)


def entries() -> list[Entry]:
    """The ``default`` provider's variables, every variable of ``_SOURCES``, then
    :data:`OTHER_VARIABLES` and ``CAPTCHA_TASKS_PROVIDERS``."""
    out: list[Entry] = []
    provider_comments = _comments(provider_config, "ProviderConfig")
    provider_fields = {f.name: f for f in dataclasses.fields(provider_config.ProviderConfig)}
    for variable in provider_config.DEFAULT_VARIABLES.values():
        named = [
            name
            for name, comment in provider_comments.items()
            if comment.startswith(f"``{variable}``")
        ]
        name = named[0] if named else None
        comment = provider_comments.get(name, "") if name else ""
        default = _provider_default(name, provider_fields[name]) if name else "(none)"
        out.append(Entry(variable, default, _meaning(comment), name))
    comments = _comments()
    fields = {field.name: field for field in dataclasses.fields(settings.Settings)}
    for name, (variable, _parse) in settings._SOURCES.items():
        field = fields.get(name)
        default = _default(field) if field is not None else "(none)"
        meaning = _meaning(comments.get(name, ""))
        out.append(Entry(variable, default, meaning, name))
    out = [
        dataclasses.replace(entry, meaning=f"{entry.meaning} {NOTES[entry.variable]}")
        if entry.meaning and entry.variable in NOTES
        else entry
        for entry in out
    ]
    for variable, (default, meaning) in OTHER_VARIABLES.items():
        out.append(Entry(variable, default, meaning))
    comment = comments.get("provider_configs", "")
    out.append(
        Entry(
            provider_config.PROVIDERS_VARIABLE,
            "(none)",
            _meaning(comment),
            "provider_configs",
        )
    )
    return out


def _suffixes() -> tuple[str, ...]:
    return tuple(getattr(provider_config, "_SUFFIXES", ()))


def provider_entries() -> list[Entry]:
    """Each named provider's variables (``N`` stands for the name), described by the
    bullets of provider_config's docstring."""
    doc = (provider_config.__doc__ or "").split("\n\n")
    bullets = [
        " ".join(bullet.split())
        for paragraph in doc
        for bullet in re.split(r"(?:^|\n)- ", paragraph)[1:]
    ]
    out: list[Entry] = []
    for suffix in _suffixes():
        variable = f"CAPTCHA_TASKS_N_{suffix}"
        meaning = ""
        for bullet in bullets:
            head, colon, rest = bullet.partition(": ")
            if not colon:
                head, rest = bullet, bullet
            if variable in re.findall(r"``(CAPTCHA_TASKS_N_[A-Z_]+)``", head):
                if rest is not head and len(re.findall(r"``CAPTCHA_TASKS_N_", head)) > 1:
                    rest = f"{head}: {rest}"
                meaning = _markdown(rest.strip().rstrip(";.")) + "."
                break
        out.append(Entry(variable, "", meaning))
    return out


def _section_of() -> dict[str, str]:
    return {
        variable: title for title, (variables, _intro) in SECTIONS.items() for variable in variables
    }


def undocumented() -> list[str]:
    """What lacks its documentation or its section (empty when the page is complete)."""
    where = _section_of()
    problems: list[str] = []
    for entry in entries():
        if not entry.meaning:
            problems.append(f"{entry.variable}: no #: comment on its field")
        if entry.variable not in where:
            problems.append(f"{entry.variable}: in no section of settings_reference.SECTIONS")
    for entry in provider_entries():
        if not entry.meaning:
            problems.append(f"{entry.variable}: not described in provider_config's docstring")
    known = {entry.variable for entry in entries()}
    problems.extend(
        f"{variable}: in SECTIONS but read nowhere" for variable in where if variable not in known
    )
    problems.extend(
        f"{variable}: in NOTES but read nowhere" for variable in NOTES if variable not in known
    )
    return problems


def _table(rows: Iterator[Entry] | list[Entry], default: bool = True) -> list[str]:
    if default:
        lines = ["| variable | default | meaning |", "|---|---|---|"]
    else:
        lines = ["| variable | meaning |", "|---|---|"]
    for entry in rows:
        meaning = entry.meaning.replace("|", "\\|")
        if default:
            lines.append(f"| `{entry.variable}` | {entry.default} | {meaning} |")
        else:
            lines.append(f"| `{entry.variable}` | {meaning} |")
    return lines


def render() -> str:
    """The settings reference page, markdown."""
    by_variable = {entry.variable: entry for entry in entries()}
    where = _section_of()
    lines = [
        "# Settings",
        "",
        "One typed object, `captcha_tasks.settings.Settings`, reads these environment "
        "variables; their names are a public contract. This page is generated from that "
        "object (each field's documentation comment and default) and from "
        "`captcha_tasks.settings.providers`. A malformed value stops the process at start-up "
        "with one line naming the variable.",
        "",
        "`captcha-tasks settings` prints the effective values with secrets masked, one line "
        "per variable under its own name (`-`: unset; with `CAPTCHA_TASKS_PROVIDERS`, each "
        "named provider's variables after it); `--json` prints them by `Settings` field.",
        "",
    ]
    for title, (variables, intro) in SECTIONS.items():
        lines += [f"## {title}", "", intro, ""]
        lines += _table([by_variable[v] for v in variables if v in by_variable])
        lines.append("")
        if title == "Several providers":
            lines += _table(provider_entries(), default=False)
            lines.append("")
    unplaced = [entry for entry in entries() if entry.variable not in where]
    if unplaced:
        lines += ["## Other", ""]
        lines += _table(unplaced)
        lines.append("")
    return "\n".join(lines)
