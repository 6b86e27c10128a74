"""The agents an MCP server serves, and each one's budget, enforced in Redis.

An agent is a name, a bearer token (HTTP; none over stdio) and two caps: solves in
flight and spend per hour (USD). The configuration is JSON, from a file (``--agents-file``,
``CAPTCHA_TASKS_MCP_AGENTS_FILE``) or an environment variable (``CAPTCHA_TASKS_MCP_AGENTS``)::

    {"agents": [
      {"name": "crawler", "token": "...", "max_in_flight": 4, "max_spend_per_hour": "2.50"},
      {"name": "triage", "token": "..."}
    ]}

A cap left out is the server's default (``--max-in-flight``, ``--max-spend-per-hour``,
their ``CAPTCHA_TASKS_MCP_*`` settings);
``0`` lifts it. Redis keys carry the agent's name only; the token is compared in
constant time and never logged, stored or sent with a task.
"""

from __future__ import annotations

import hmac
import json
import time
import uuid
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

import redis.asyncio as aioredis

from ..errors import ConfigurationError
from ..settings import Settings
from ..settings.parsing import AGENT_NAME_RE as NAME_RE
from ..state.keys import MCP_SPEND_TTL, Keys
from ..state.scripts import source

__all__ = [
    "Agent",
    "BudgetExceeded",
    "Budgets",
    "agent_for_token",
    "load_agents",
    "nano_usd",
]

#: The shortest token an agent may have.
MIN_TOKEN_LENGTH = 16
#: The spend cap's window.
WINDOW_SECONDS = 3600


@dataclass(frozen=True)
class Agent:
    """One agent: its name, its token (``""`` over stdio) and its caps (``0``: none)."""

    name: str
    token: str = ""
    max_in_flight: int = 0
    max_spend_per_hour: Decimal = Decimal(0)

    def __repr__(self) -> str:  # the token stays out of every repr and log line
        return (
            f"Agent(name={self.name!r}, max_in_flight={self.max_in_flight}, "
            f"max_spend_per_hour={self.max_spend_per_hour})"
        )


def _cap(value: object, what: str, default: Any, kind: type) -> Any:
    if value is None:
        return default
    if isinstance(value, bool):  # JSON true/false are not numbers here
        raise ConfigurationError(f"{what} must be a number >= 0, got {value!r}")
    try:
        parsed = kind(str(value)) if kind is Decimal else kind(value)
    except (ValueError, TypeError, InvalidOperation):
        raise ConfigurationError(f"{what} must be a number >= 0, got {value!r:.40}") from None
    if kind is int and parsed != value:
        raise ConfigurationError(f"{what} must be a whole number >= 0, got {value!r:.40}")
    if (kind is Decimal and not parsed.is_finite()) or parsed < 0:
        raise ConfigurationError(f"{what} must be a number >= 0, got {value!r:.40}")
    return parsed


def load_agents(
    text: str,
    *,
    source: str = "MCP agents",
    default_in_flight: int = 0,
    default_spend: Decimal = Decimal(0),
) -> list[Agent]:
    """The agents of a JSON configuration (see the module's docstring), checked: names
    unique and key-safe, tokens unique and at least :data:`MIN_TOKEN_LENGTH` characters,
    caps numbers ``>= 0``. Anything else is a :class:`ConfigurationError` that starts
    with ``source`` (the variable or file it came from) and names the agent or entry at
    fault, never a token."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigurationError(
            f"{source}: not JSON ({exc.msg} at line {exc.lineno} column {exc.colno})"
        ) from None
    entries = data.get("agents") if isinstance(data, dict) else None
    if not isinstance(entries, list) or not entries:
        raise ConfigurationError(
            f'{source}: expected {{"agents": [{{"name": ..., "token": ...}}, ...]}}'
        )
    agents: list[Agent] = []
    for n, entry in enumerate(entries):
        if not isinstance(entry, dict):
            raise ConfigurationError(f"{source}: agents[{n}] is not an object")
        name, token = entry.get("name"), entry.get("token")
        if not isinstance(name, str) or not NAME_RE.fullmatch(name):
            raise ConfigurationError(
                f"{source}: agents[{n}]: name must be 1-64 letters, digits, '_', '.' or '-'"
            )
        if not isinstance(token, str) or len(token) < MIN_TOKEN_LENGTH:
            got = f"{len(token)} characters" if isinstance(token, str) else "no token"
            raise ConfigurationError(
                f"{source}: agent {name}: its token must be {MIN_TOKEN_LENGTH} characters "
                f"or more, got {got}"
            )
        unknown = set(entry) - {"name", "token", "max_in_flight", "max_spend_per_hour"}
        if unknown:
            raise ConfigurationError(
                f"{source}: agent {name}: unknown field(s) {', '.join(sorted(unknown))}"
            )
        for other in agents:
            if other.name == name:
                raise ConfigurationError(f"{source}: two agents are named {name}")
            if hmac.compare_digest(other.token.encode(), token.encode()):
                raise ConfigurationError(
                    f"{source}: agents {other.name} and {name} have the same token"
                )
        agents.append(
            Agent(
                name,
                token,
                _cap(
                    entry.get("max_in_flight"),
                    f"{source}: agent {name}: max_in_flight",
                    default_in_flight,
                    int,
                ),
                _cap(
                    entry.get("max_spend_per_hour"),
                    f"{source}: agent {name}: max_spend_per_hour",
                    default_spend,
                    Decimal,
                ),
            )
        )
    return agents


def read_agents_config(path: str | None, settings: Settings) -> tuple[str, str]:
    """The agents' JSON and where it comes from: the file at ``path`` (``--agents-file``),
    else ``CAPTCHA_TASKS_MCP_AGENTS_FILE``'s, else ``CAPTCHA_TASKS_MCP_AGENTS`` itself;
    :class:`ConfigurationError` when there is none."""
    path = path or settings.mcp_agents_file
    if path:
        try:
            return Path(path).read_text(encoding="utf-8"), f"MCP agents file {path}"
        except OSError as exc:
            raise ConfigurationError(f"MCP agents file {path}: {exc.strerror}") from None
    if settings.mcp_agents:
        return settings.mcp_agents, "CAPTCHA_TASKS_MCP_AGENTS"
    raise ConfigurationError(
        "--transport http needs its agents: --agents-file, CAPTCHA_TASKS_MCP_AGENTS_FILE "
        "(a JSON file) or CAPTCHA_TASKS_MCP_AGENTS (the JSON itself)"
    )


def agent_for_token(agents: list[Agent], token: str) -> Agent | None:
    """The agent whose token this is (each compared in constant time), or ``None``."""
    found = None
    for agent in agents:
        if hmac.compare_digest(agent.token.encode(), token.encode()):
            found = agent
    return found


def nano_usd(cost: object) -> int:
    """A result's ``cost`` (a decimal string, or ``None``) in nano-USD."""
    try:
        value = Decimal(str(cost))
    except InvalidOperation:
        return 0
    return int(value * 1_000_000_000) if value.is_finite() and value > 0 else 0


class BudgetExceeded(Exception):
    """An agent is at one of its caps: which (``in_flight`` or ``spend``), its value and
    its cap, and when it frees (epoch seconds)."""

    def __init__(self, agent: str, cap: str, current: str, limit: str, frees_at: float) -> None:
        self.agent, self.cap, self.current, self.limit = agent, cap, current, limit
        self.frees_at = frees_at
        when = time.strftime("%H:%M:%S UTC", time.gmtime(frees_at))
        wait = max(0, round(frees_at - time.time()))
        if cap == "in_flight":
            what = (
                f"agent {agent} is at its cap of {limit} solves in flight; a slot frees when "
                f"one of them ends (at the latest {when}, in {wait} s)"
            )
        else:
            what = (
                f"agent {agent} spent {current} USD in the last hour, its cap is {limit} USD "
                f"per hour; it frees at {when} (in {wait} s)"
            )
        super().__init__(f"BUDGET_{cap.upper()}: {what}")


class Budgets:
    """The agents' caps, cluster-wide: every server sharing this Redis counts the same
    solves in flight and the same spend for an agent of the same name."""

    def __init__(self, client: aioredis.Redis, keys: Keys) -> None:
        self._client = client
        self._keys = keys
        self._acquire = client.register_script(source("mcp_acquire"))
        self._release = client.register_script(source("mcp_release"))

    async def acquire(self, agent: Agent, lease_seconds: float) -> str:
        """A slot for one solve of ``agent``: its call id, to :meth:`release` with; or
        :class:`BudgetExceeded`. The slot's lease ends it if the server dies first."""
        call_id = uuid.uuid4().hex
        spend_cap = nano_usd(agent.max_spend_per_hour)
        answer = await self._acquire(
            keys=[self._keys.mcp_in_flight(agent.name), self._keys.mcp_spend(agent.name)],
            args=[
                int(time.time() * 1000),
                call_id,
                int(lease_seconds * 1000),
                agent.max_in_flight,
                spend_cap,
                WINDOW_SECONDS * 1000,
                MCP_SPEND_TTL,
            ],
        )
        status = [x.decode() if isinstance(x, bytes) else str(x) for x in answer]
        if status[0] == "ok":
            return call_id
        cap, current, frees_ms = status
        if cap == "in_flight":
            limit = str(agent.max_in_flight)
        else:
            limit = str(agent.max_spend_per_hour)
            current = str(Decimal(current) / 1_000_000_000)
        raise BudgetExceeded(agent.name, cap, current, limit, float(frees_ms) / 1000)

    async def release(self, agent: Agent, call_id: str, cost: object) -> None:
        """The solve ``call_id`` ended: its slot is free, its ``cost`` counted."""
        await self._release(
            keys=[self._keys.mcp_in_flight(agent.name), self._keys.mcp_spend(agent.name)],
            args=[int(time.time() * 1000), call_id, nano_usd(cost), MCP_SPEND_TTL],
        )

    async def spent(self, agent: Agent) -> Decimal:
        """What ``agent``'s solves cost in the last hour (USD)."""
        since = int((time.time() - WINDOW_SECONDS) * 1000)
        members = await self._client.zrangebyscore(self._keys.mcp_spend(agent.name), since, "+inf")
        total = 0
        for member in members:
            text = member.decode() if isinstance(member, bytes) else str(member)
            total += int(text.rpartition(":")[2] or 0)
        return Decimal(total) / 1_000_000_000

    async def in_flight(self, agent: Agent) -> int:
        now = int(time.time() * 1000)
        return int(await self._client.zcount(self._keys.mcp_in_flight(agent.name), now, "+inf"))
