"""The door of the MCP server over HTTP: every request passes it before the SDK's app sees
it, and each is bounded there.

- **A known bearer token**, else ``401``; nothing of the request is read.
- **A bounded body**: over :data:`MAX_BODY_BYTES` (its ``Content-Length`` up front, a
  chunked body counted as it arrives) is ``413``, with nothing more read.
- **Bounded nesting**: a body whose brackets nest deeper than :data:`MAX_JSON_DEPTH` is
  ``400``, found by a scan of its bytes before any parser recurses into it.
- **Sessions bound to their agent**: the ``mcp-session-id`` the SDK gives in answer to a
  request is that request's agent's. A request carrying a session id of another agent, or
  one the gate does not hold (ended, expired, never issued), reaches the SDK with an id it
  never issued in its place, so it is answered exactly as an unknown session is (``404
  Session not found``): whether an id exists is not confirmed to an agent it is not
  theirs. At most :data:`MAX_SESSIONS` are held, each agent's equal share of them at most
  (``429`` for one more of an agent that holds its share: one agent's sessions never
  leave another without room); an id is forgotten when its agent deletes it or after
  :data:`SESSION_IDLE_SECONDS` with no request of it in flight, as the SDK ends an idle
  session.

Each refusal is a short JSON object, ``{"error": "..."}``, and a log line naming the agent,
never its token nor a session id.
"""

from __future__ import annotations

import json
import logging
import re
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable, Collection, Mapping, MutableMapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from .agents import Agent, agent_for_token

__all__ = [
    "MAX_BODY_BYTES",
    "MAX_JSON_DEPTH",
    "MAX_SESSIONS",
    "SESSION_IDLE_SECONDS",
    "Gate",
    "Sessions",
    "bearer",
    "nested_deeper_than",
]

log = logging.getLogger(__name__)

Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[MutableMapping[str, Any], Receive, Send], Awaitable[None]]

#: The largest request body read (4 MiB). The largest argument of any tool is an image:
#: at most ``MAX_IMAGE_BYTES_CEILING`` (1 MiB) decoded, about 1.4 MB as ``solve_image``'s
#: base64, or a page's HTML for ``find_captchas``, a few hundred kB for most pages. Four
#: MiB holds either with room for the JSON-RPC around it and its escapes; far more is
#: memory an agent could make the server hold for nothing.
MAX_BODY_BYTES = 4 * 1024 * 1024
#: The deepest nesting of arrays and objects a body may have. A tool's arguments are a
#: flat object (``fetch_page``'s ``form`` one level more) inside a JSON-RPC request, a
#: few levels in all; the SDK's parser recurses once per level.
MAX_JSON_DEPTH = 64
#: Sessions held at once, all agents together: the SDK's own cap (``DEFAULT_MAX_SESSIONS``).
MAX_SESSIONS = 10_000
#: Seconds a session with no request in flight is held: the SDK ends such a session after
#: as long (``DEFAULT_SESSION_IDLE_TIMEOUT``), after which its id answers ``404`` anyway.
SESSION_IDLE_SECONDS = 30 * 60

_SESSION_HEADER = "mcp-session-id"
#: The bytes the nesting scan looks at: brackets, and what starts, ends or escapes in a
#: string. Everything else (base64, most text) is skipped by the regex engine.
_STRUCTURE = re.compile(rb'[\[\]{}"\\]')


def bearer(headers: Mapping[str, str]) -> str:
    """The token of an ``Authorization: Bearer <token>`` header (lower-case keys), or ``""``."""
    value = str(headers.get("authorization") or "")
    scheme, _, token = value.partition(" ")
    return token.strip() if scheme.lower() == "bearer" else ""


def nested_deeper_than(body: bytes, limit: int) -> bool:
    """Whether arrays and objects in ``body`` (JSON, UTF-8) nest more than ``limit`` deep.

    Brackets inside strings do not count, nor does the character after a backslash in
    one. A body that is not JSON is scanned the same way and left to the parser to
    refuse; a multi-byte UTF-8 character never holds one of the bytes looked at."""
    depth = 0
    in_string = False
    escaped_at = -1
    for match in _STRUCTURE.finditer(body):
        at = match.start()
        if at == escaped_at:
            continue
        char = body[at]
        if in_string:
            if char == 0x5C:  # backslash: the next byte is the escaped character
                escaped_at = at + 1
            elif char == 0x22:
                in_string = False
        elif char == 0x22:
            in_string = True
        elif char in (0x5B, 0x7B):
            depth += 1
            if depth > limit:
                return True
        elif char in (0x5D, 0x7D):
            depth -= 1
    return False


@dataclass
class _Session:
    agent: str
    in_flight: int = 0
    idle_since: float = 0.0


class Sessions:
    """The MCP session ids the SDK issued, each with the agent it was issued to, at most
    ``cap`` of them, and at most :attr:`per_agent` of one agent's (:meth:`share`); one
    with no request in flight for ``idle_seconds`` is forgotten."""

    def __init__(
        self,
        cap: int = MAX_SESSIONS,
        idle_seconds: float = SESSION_IDLE_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.cap = cap
        self.idle_seconds = idle_seconds
        #: The sessions one agent may hold, those it is opening included.
        self.per_agent = cap
        self._clock = clock
        self._held: dict[str, _Session] = {}
        #: Requests that may open a session, each holding a place until it is answered,
        #: and each agent's sessions, held and being opened.
        self._opening = 0
        self._of_agent: Counter[str] = Counter()

    def __len__(self) -> int:
        return len(self._held)

    def share(self, agents: Collection[str]) -> None:
        """Give each of ``agents`` an equal share of the cap, the shares together no
        more than it: however many sessions one agent opens, each other agent still has
        room for its own."""
        self.per_agent = max(1, self.cap // max(1, len(agents)))

    def owner(self, session_id: str) -> str | None:
        """The agent ``session_id`` was issued to, or ``None`` (never issued, ended, or
        idle too long)."""
        session = self._held.get(session_id)
        if session is None:
            return None
        if session.in_flight == 0 and self._clock() - session.idle_since > self.idle_seconds:
            self.forget(session_id)
            return None
        return session.agent

    def reserve(self, agent: str) -> bool:
        """A place for one more session of ``agent``, held until :meth:`release`;
        ``False`` at the cap or at the agent's share (once the sessions idle too long are
        forgotten)."""
        if not self._room_for(agent):
            self._expire()
        if not self._room_for(agent):
            return False
        self._opening += 1
        self._of_agent[agent] += 1
        return True

    def release(self, agent: str) -> None:
        """The request of ``agent`` that held a place has been answered (it may have
        opened a session, which :meth:`bind` counted)."""
        self._opening -= 1
        self._of_agent[agent] -= 1

    def bind(self, session_id: str, agent: str) -> None:
        """The SDK issued ``session_id`` in answer to a request of ``agent``."""
        self.forget(session_id)
        self._held[session_id] = _Session(agent, idle_since=self._clock())
        self._of_agent[agent] += 1

    def enter(self, session_id: str) -> None:
        """A request of ``session_id`` is being served: it is not idle meanwhile."""
        session = self._held.get(session_id)
        if session is not None:
            session.in_flight += 1

    def leave(self, session_id: str) -> None:
        """A request of ``session_id`` has been served: its idle time starts now."""
        session = self._held.get(session_id)
        if session is not None:
            session.in_flight -= 1
            session.idle_since = self._clock()

    def forget(self, session_id: str) -> None:
        """``session_id`` ended (its agent deleted it, or it was idle too long)."""
        session = self._held.pop(session_id, None)
        if session is not None:
            self._of_agent[session.agent] -= 1

    def _room_for(self, agent: str) -> bool:
        return len(self._held) + self._opening < self.cap and self._of_agent[agent] < self.per_agent

    def _expire(self) -> None:
        for session_id in list(self._held):
            self.owner(session_id)


class _Refusal(NamedTuple):
    """A request the gate answers itself: its status and the error it names."""

    status: int
    error: str


class Gate:
    """``app`` (the SDK's streamable HTTP app) behind the agents' bearer tokens, with each
    request's body and nesting bounded and each session bound to its agent (see the
    module's docstring). Scopes other than HTTP (the lifespan) pass through."""

    def __init__(
        self,
        app: App,
        agents: list[Agent],
        *,
        max_body_bytes: int = MAX_BODY_BYTES,
        max_json_depth: int = MAX_JSON_DEPTH,
        sessions: Sessions | None = None,
    ) -> None:
        self.app = app
        self.agents = agents
        self.max_body_bytes = max_body_bytes
        self.max_json_depth = max_json_depth
        self.sessions = sessions if sessions is not None else Sessions()
        self.sessions.share([agent.name for agent in agents])

    async def __call__(self, scope: MutableMapping[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        agent = agent_for_token(self.agents, bearer(headers))
        if agent is None:
            await _answer(
                send,
                401,
                "a known bearer token is required",
                [(b"www-authenticate", b'Bearer realm="captcha-tasks"')],
            )
            return
        body = await self._body(headers, receive)
        if body is None:  # the client went away while sending it
            return
        if not isinstance(body, _Refusal) and nested_deeper_than(body, self.max_json_depth):
            body = _Refusal(400, f"JSON nested deeper than {self.max_json_depth} levels")
        if isinstance(body, _Refusal):
            log.warning("MCP request of agent %s refused: %s", agent.name, body.error)
            await _answer(send, body.status, body.error)
            return
        replay = _replaying(body, receive)
        session_id = headers.get(_SESSION_HEADER)
        if session_id is None:
            await self._opening(scope, replay, send, agent)
        else:
            await self._in_session(scope, replay, send, agent, session_id)

    async def _body(self, headers: Mapping[str, str], receive: Receive) -> bytes | _Refusal | None:
        """The whole body; a ``413`` once it is known to be over :attr:`max_body_bytes`
        (from its ``Content-Length``, or as it arrives), with no more of it read; ``None``
        when the client went away."""
        too_large = _Refusal(413, f"the body is over {self.max_body_bytes} bytes")
        declared = headers.get("content-length", "")
        if declared.isdigit() and int(declared) > self.max_body_bytes:
            return too_large
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return None
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body_bytes:
                return too_large
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)

    async def _opening(
        self, scope: MutableMapping[str, Any], receive: Receive, send: Send, agent: Agent
    ) -> None:
        """A request without a session id, which may open one: the id the SDK answers with
        is bound to ``agent``."""
        if not self.sessions.reserve(agent.name):
            # The agents' shares together are at most the cap: a refusal is a share held.
            share, cap = self.sessions.per_agent, self.sessions.cap
            log.warning(
                "MCP session for agent %s refused: it holds its share, %d", agent.name, share
            )
            await _answer(
                send, 429, f"this agent holds its share of the sessions ({share} of {cap})"
            )
            return

        async def binding(message: Message) -> None:
            if message["type"] == "http.response.start" and 200 <= message["status"] < 300:
                for name, value in message.get("headers", ()):
                    if name.decode("latin-1").lower() == _SESSION_HEADER:
                        self.sessions.bind(value.decode("latin-1"), agent.name)
            await send(message)

        try:
            await self.app(scope, receive, binding)
        finally:
            self.sessions.release(agent.name)

    async def _in_session(
        self,
        scope: MutableMapping[str, Any],
        receive: Receive,
        send: Send,
        agent: Agent,
        session_id: str,
    ) -> None:
        """A request of session ``session_id``: served in it if it is ``agent``'s, else
        with an id the SDK never issued in its place."""
        if self.sessions.owner(session_id) != agent.name:
            log.warning("MCP request of agent %s for a session not its own", agent.name)
            await self.app(_with_session(scope, uuid.uuid4().hex), receive, send)
            return
        status = 0

        async def watching(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        self.sessions.enter(session_id)
        try:
            await self.app(scope, receive, watching)
        finally:
            self.sessions.leave(session_id)
        if scope.get("method") == "DELETE" and 200 <= status < 300:
            self.sessions.forget(session_id)


def _replaying(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that gives ``body`` whole, then what ``receive`` gives (the client's
    disconnect, which the SDK waits for on a stream)."""
    given = False

    async def replay() -> Message:
        nonlocal given
        if not given:
            given = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


def _with_session(scope: MutableMapping[str, Any], session_id: str) -> MutableMapping[str, Any]:
    header = _SESSION_HEADER.encode()
    headers = [(k, v) for k, v in scope["headers"] if k.lower() != header]
    return {**scope, "headers": [*headers, (header, session_id.encode())]}


async def _answer(
    send: Send, status: int, error: str, headers: list[tuple[bytes, bytes]] | None = None
) -> None:
    body = json.dumps({"error": error}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                *(headers or []),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
