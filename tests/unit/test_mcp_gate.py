"""The gate in front of the MCP server's HTTP app, driven as an ASGI app with an app of
its own behind it (no server, no SDK): a token is required before anything is read, a
body is bounded as it arrives, deep nesting is refused before any parser sees it, and a
session id reaches the app only with the token of the agent it was issued to."""

from __future__ import annotations

import asyncio
import json
from collections.abc import MutableMapping
from dataclasses import dataclass, field
from typing import Any

import pytest

from captcha_tasks.mcp.agents import Agent
from captcha_tasks.mcp.gate import Gate, Sessions, nested_deeper_than

TOKEN_A = "agent-a-token-0123456789"
TOKEN_B = "agent-b-token-0123456789"
AGENTS = [Agent("a", TOKEN_A), Agent("b", TOKEN_B)]
ISSUED = "0123456789abcdef0123456789abcdef"


@dataclass
class Behind:
    """The app behind the gate: it reads the body as the SDK does, records what it got,
    and answers ``status``, with ``ISSUED`` as the session id when ``issue`` is set."""

    status: int = 200
    issue: bool = False
    seen: list[tuple[str, str | None, bytes]] = field(default_factory=list)

    async def __call__(self, scope: MutableMapping[str, Any], receive: Any, send: Any) -> None:
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        headers = dict(scope["headers"])
        session = headers.get(b"mcp-session-id")
        self.seen.append((scope["method"], session.decode() if session else None, body))
        answer = [(b"mcp-session-id", ISSUED.encode())] if self.issue else []
        await send({"type": "http.response.start", "status": self.status, "headers": answer})
        await send({"type": "http.response.body", "body": b"{}"})


@dataclass
class Answer:
    status: int
    body: Any
    reads: int


def _call(
    gate: Gate,
    token: str | None = TOKEN_A,
    *,
    method: str = "POST",
    chunks: list[bytes] | None = None,
    session: str | None = None,
    length: int | None = None,
) -> Answer:
    """One request through ``gate``: its answer, and how many messages of the body were
    read (``chunks``: the body as the client sends it; ``length``: a Content-Length)."""
    parts = list(chunks if chunks is not None else [b"{}"])
    headers = [(b"content-type", b"application/json")]
    if token is not None:
        headers.append((b"authorization", f"Bearer {token}".encode()))
    if session is not None:
        headers.append((b"mcp-session-id", session.encode()))
    if length is not None:
        headers.append((b"content-length", str(length).encode()))
    scope = {"type": "http", "method": method, "path": "/mcp", "headers": headers}
    reads = 0
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        nonlocal reads
        if reads >= len(parts):
            await asyncio.sleep(3600)  # the client waits for the answer
        reads += 1
        return {"type": "http.request", "body": parts[reads - 1], "more_body": reads < len(parts)}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    asyncio.run(gate(scope, receive, send))
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return Answer(sent[0]["status"], json.loads(body), reads)


@pytest.mark.parametrize(
    ("body", "deeper_than_3"),
    [
        (b'{"a": [1, {"b": [2]}]}', True),
        (b'{"a": [1, {"b": 2}]}', False),
        (b'{"a": "[[[[[[[[", "b": "{{{{{{{{"}', False),
        (b'{"a": "\\"[[[[[[\\"", "b": 1}', False),  # escaped quotes stay in the string
        (b'{"a": "x\\\\", "b": [[[[1]]]]}', True),  # an escaped backslash ends no string
        (b"]]]]][[[", False),
        (b"[" * 4, True),
        (b"[" * 3 + b"]" * 3 + b"[" * 3, False),
        ('{"é": ["ü", {"ß": []}]}'.encode(), True),
    ],
)
def test_nesting_is_counted_outside_strings(body: bytes, deeper_than_3: bool) -> None:
    assert nested_deeper_than(body, 3) is deeper_than_3


def test_a_deep_body_is_scanned_without_recursion() -> None:
    deep = b'{"x":' + b"[" * 50_000 + b"]" * 50_000 + b"}"
    assert nested_deeper_than(deep, 64)
    assert not nested_deeper_than(b"[" * 64 + b"]" * 64, 64)


def test_no_known_token_is_401_and_nothing_is_read() -> None:
    behind = Behind()
    gate = Gate(behind, AGENTS)
    for token in (None, "not-a-known-token-at-all"):
        answer = _call(gate, token)
        assert (answer.status, answer.body, answer.reads) == (
            401,
            {"error": "a known bearer token is required"},
            0,
        )
    assert behind.seen == []


def test_a_body_over_its_declared_limit_is_413_unread() -> None:
    behind = Behind()
    gate = Gate(behind, AGENTS, max_body_bytes=100)
    answer = _call(gate, chunks=[b"x" * 101], length=101)
    assert (answer.status, answer.body, answer.reads) == (
        413,
        {"error": "the body is over 100 bytes"},
        0,
    )
    assert behind.seen == []


def test_a_chunked_body_is_counted_as_it_arrives() -> None:
    behind = Behind()
    gate = Gate(behind, AGENTS, max_body_bytes=100)
    answer = _call(gate, chunks=[b"x" * 40] * 10)
    # Refused at the third chunk (120 bytes); the other seven are never read.
    assert (answer.status, answer.reads) == (413, 3)
    assert behind.seen == []
    # At the limit exactly, the body reaches the app whole, as one message.
    answer = _call(gate, chunks=[b"[" + b" " * 49, b" " * 49 + b"]"])
    assert answer.status == 200
    assert behind.seen == [("POST", None, b"[" + b" " * 98 + b"]")]


def test_deep_json_is_400_before_the_app() -> None:
    behind = Behind()
    gate = Gate(behind, AGENTS, max_json_depth=64)
    deep = b'{"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"x": '
    deep += b"[" * 50_000 + b"]" * 50_000 + b"}}"
    answer = _call(gate, chunks=[deep])
    assert (answer.status, answer.body) == (400, {"error": "JSON nested deeper than 64 levels"})
    assert behind.seen == []
    assert _call(gate, chunks=[b"[" * 63 + b"]" * 63]).status == 200


def test_a_session_is_its_agents_only() -> None:
    behind = Behind(issue=True)
    gate = Gate(behind, AGENTS)
    assert _call(gate).status == 200  # a's initialize: the app issues ISSUED
    behind.issue = False
    assert len(gate.sessions) == 1 and gate.sessions.owner(ISSUED) == "a"

    # b with a's session id: the app sees another id (which it answers as unknown).
    _call(gate, TOKEN_B, session=ISSUED)
    _call(gate, TOKEN_B, method="DELETE", session=ISSUED)
    (post, delete) = behind.seen[1:]
    assert post[0] == "POST" and post[1] != ISSUED and len(post[1] or "") == 32
    assert delete[0] == "DELETE" and delete[1] not in (ISSUED, post[1])
    assert gate.sessions.owner(ISSUED) == "a"  # b's DELETE ended nothing

    # a's own requests keep its id; its DELETE ends the session, whose id then never
    # reaches the app again.
    _call(gate, TOKEN_A, session=ISSUED)
    assert behind.seen[-1][1] == ISSUED
    _call(gate, TOKEN_A, method="DELETE", session=ISSUED)
    assert behind.seen[-1] == ("DELETE", ISSUED, b"{}") and len(gate.sessions) == 0
    _call(gate, TOKEN_A, session=ISSUED)
    assert behind.seen[-1][1] != ISSUED


def test_only_an_answered_session_id_is_bound() -> None:
    behind = Behind(status=400, issue=True)
    gate = Gate(behind, AGENTS)
    _call(gate)
    assert len(gate.sessions) == 0
    _call(gate, session=ISSUED)
    assert behind.seen[-1][1] != ISSUED


def test_sessions_are_capped_and_idle_ones_forgotten() -> None:
    now = [1000.0]
    sessions = Sessions(cap=4, idle_seconds=60, clock=lambda: now[0])
    gate = Gate(Behind(), AGENTS, sessions=sessions)  # two agents: two places each
    sessions.bind("s1", "a")
    sessions.bind("s2", "a")
    assert _call(gate).status == 429

    # s1 has a request in flight (a stream): however long, it is not idle.
    sessions.enter("s1")
    now[0] += 61
    assert _call(gate).status == 200  # s2 was idle too long: forgotten, its place free
    assert (sessions.owner("s1"), sessions.owner("s2")) == ("a", None)
    sessions.leave("s1")
    now[0] += 60
    assert sessions.owner("s1") == "a"
    now[0] += 1
    assert sessions.owner("s1") is None and len(sessions) == 0


def test_no_agent_holds_more_than_its_share_of_the_sessions() -> None:
    # Two agents share a cap of 4: two places each. a, holding its two, is refused a
    # third; b, whose places a cannot take, still opens its own.
    sessions = Sessions(cap=4, idle_seconds=60)
    gate = Gate(Behind(), AGENTS, sessions=sessions)
    sessions.bind("a1", "a")
    sessions.bind("a2", "a")
    answer = _call(gate, TOKEN_A)
    assert answer.status == 429
    assert answer.body == {"error": "this agent holds its share of the sessions (2 of 4)"}
    assert _call(gate, TOKEN_B).status == 200

    # A session a ends gives its place back to a.
    _call(gate, TOKEN_A, method="DELETE", session="a1")
    assert _call(gate, TOKEN_A).status == 200


def test_an_agents_share_counts_the_sessions_it_is_opening() -> None:
    sessions = Sessions(cap=2, idle_seconds=60)
    sessions.share(["a", "b"])
    assert sessions.reserve("a")  # its initialize is being answered
    assert not sessions.reserve("a")
    assert sessions.reserve("b")
    sessions.release("a")
    assert sessions.reserve("a")


def test_the_lifespan_passes_through() -> None:
    seen: list[str] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        seen.append(scope["type"])

    asyncio.run(Gate(app, AGENTS)({"type": "lifespan"}, None, None))  # type: ignore[arg-type]
    assert seen == ["lifespan"]
