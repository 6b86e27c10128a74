"""The MCP server on the ``mcp`` SDK: its tools, the agent behind each call, stdio and
streamable HTTP. The SDK is imported when a server is built, never at import time (the
package imports without the ``mcp`` extra).

No ``from __future__ import annotations`` here: the SDK reads the tools' annotations as
objects (the ``Context`` parameter is found by its class). A solve tool is built at run
time, so it states its parameters twice, alike: as ``__signature__`` (which
``inspect.signature`` reads: the SDK's argument model, and its ``Context`` lookup up to
mcp 1.13) and as ``__annotations__`` (which ``typing.get_type_hints`` reads: its
``Context`` lookup from mcp 1.14). Where the two disagree, the SDK takes ``ctx`` for an
argument every caller must send."""

import asyncio
import inspect
import logging
import re
import time
import typing
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from .. import aio, tracing
from ..errors import CaptchaTasksError, InvalidTaskInput
from ..settings import get_settings
from ..state.keys import Keys
from ..state.redis import async_redis_client
from ..worker.app import app
from .agents import Agent, BudgetExceeded, Budgets, agent_for_token
from .find import find_captchas
from .gate import Gate, bearer

__all__ = ["SOLVE_TOOLS", "ServerConfig", "build_server", "serve_http", "serve_stdio"]

log = logging.getLogger(__name__)

#: One tool per captcha family, each the ``aio`` call of the task of the same name (every
#: ``solve_*`` of :mod:`captcha_tasks.aio`): a flat schema per tool (agent frameworks fill
#: flat objects far more reliably than a ``oneOf`` union under one ``type`` argument, and
#: a tool's name already says what it solves).
SOLVE_TOOLS = tuple(name for name in aio.__all__ if name.startswith("solve_"))
#: Task parameters a tool does not offer: routing is the operator's, the wait the server's.
_HIDDEN = frozenset({"provider", "exclude", "timeout"})
#: Seconds between two progress notifications of a call that waits.
PROGRESS_INTERVAL = 2.0


@dataclass
class ServerConfig:
    """``agents``: over HTTP, the agents by token; ``stdio_agent``: the one agent of a stdio
    server. ``timeout``: seconds a call waits for its task (its budget slot's lease is a
    minute longer)."""

    agents: list[Agent] = field(default_factory=list)
    stdio_agent: Agent | None = None
    timeout: float = aio.DEFAULT_TIMEOUT
    host: str = "127.0.0.1"
    port: int = 8000


def _field_of(message: str, names: list[str]) -> str | None:
    """The parameter a validator's message names (``RecaptchaV2.sitekey: ...``)."""
    for match in re.finditer(r"\b(\w+)(?=\s*:|\s+must\b)", message):
        if match.group(1) in names:
            return match.group(1)
    return next((name for name in names if re.search(rf"\b{name}\b", message)), None)


class Tools:
    """What the tools do, apart from the SDK: the agent of a call, its budget, the task."""

    def __init__(self, config: ServerConfig) -> None:
        self.config = config
        settings = get_settings()
        self._settings = settings
        self._budgets: Budgets | None = None
        #: Calls whose caller gave up waiting: kept until their task ends and is counted.
        self._following: set[asyncio.Future[Any]] = set()

    def budgets(self) -> Budgets:
        if self._budgets is None:
            client = async_redis_client(self._settings, self._settings.state_url)
            self._budgets = Budgets(client, Keys(self._settings.key_prefix))
        return self._budgets

    def agent_of(self, ctx: Any) -> Agent:
        """The agent making this call: the bearer token's over HTTP, else the stdio one."""
        request = getattr(ctx.request_context, "request", None)
        if request is not None:
            agent = agent_for_token(self.config.agents, bearer(request.headers))
            if agent is None:  # the HTTP layer refused it already; never reached
                raise PermissionError("unknown bearer token")
            return agent
        if self.config.stdio_agent is None:
            raise PermissionError("no agent is configured for this transport")
        return self.config.stdio_agent

    async def run_task(
        self, ctx: Any, name: str, kwargs: dict[str, Any], fields: list[str]
    ) -> dict[str, Any]:
        """Send task ``name`` for the calling agent within its budget, report progress while
        it runs, and give its result (with its task id); a budget refusal or a task's
        error as the SDK's tool error, naming the argument it is about."""
        from mcp.server.fastmcp.exceptions import ToolError

        agent = self.agent_of(ctx)
        budgets = self.budgets()
        try:
            call_id = await budgets.acquire(agent, self.config.timeout + 60)
        except BudgetExceeded as exc:
            raise ToolError(str(exc)) from None
        try:
            sent: Any = aio.send(f"captcha_tasks.{name}", **kwargs)
        except InvalidTaskInput as exc:
            await budgets.release(agent, call_id, None)
            raise ToolError(self._invalid(exc.message, exc.code, fields)) from None
        except BaseException:
            await budgets.release(agent, call_id, None)
            raise
        log.info("MCP %s for agent %s: task %s", name, agent.name, sent.id)
        follow = asyncio.ensure_future(self._follow(agent, call_id, sent))
        self._following.add(follow)
        follow.add_done_callback(self._following.discard)
        started = time.monotonic()
        await ctx.report_progress(0, self.config.timeout, f"{name} sent as task {sent.id}")
        while True:
            # A cancelled call ends this wait only: the task goes on and is counted.
            done, _ = await asyncio.wait({follow}, timeout=PROGRESS_INTERVAL)
            if done:
                break
            waited = time.monotonic() - started
            await ctx.report_progress(waited, self.config.timeout, f"waiting for task {sent.id}")
        try:
            result = follow.result()
        except InvalidTaskInput as exc:
            raise ToolError(self._invalid(exc.message, exc.code, fields)) from None
        except CaptchaTasksError as exc:
            raise ToolError(f"{type(exc).__name__}: {exc}") from None
        except TimeoutError:
            raise ToolError(
                f"task {sent.id} did not end within {self.config.timeout:g} s; it goes on"
            ) from None
        return {"task_id": sent.id, **result}

    async def _follow(self, agent: Agent, call_id: str, sent: Any) -> Any:
        cost: object = None
        try:
            result = await aio.result(sent, timeout=self.config.timeout)
            cost = result.get("cost") if isinstance(result, dict) else None
            return result
        finally:
            await self.budgets().release(agent, call_id, cost)

    @staticmethod
    def _invalid(message: str, code: str | None, fields: list[str]) -> str:
        found = _field_of(message, fields)
        where = f"invalid argument {found!r}" if found else "invalid arguments"
        return f"{where} ({code or 'INVALID_INPUT'}): {message}"


def _solve_tool(
    tools: Tools, name: str, context_class: type
) -> tuple[Callable[..., Awaitable[dict[str, Any]]], str]:
    """The tool for task ``name``: the ``aio`` call's parameters (types resolved, those of
    :data:`_HIDDEN` left out) as its signature, and the task's docstring."""
    awaiting = getattr(aio, name)
    hints = typing.get_type_hints(awaiting)
    params = [
        param.replace(annotation=hints[param.name], kind=inspect.Parameter.KEYWORD_ONLY)
        for param in inspect.signature(awaiting).parameters.values()
        if param.name not in _HIDDEN
    ]
    fields = [param.name for param in params]

    async def tool(ctx: Any, **kwargs: Any) -> dict[str, Any]:
        given = {k: v for k, v in kwargs.items() if v is not None}
        # The call in the solve's trace: the task's send and the solve are its children.
        # The agent by its name only, never its token.
        with tracing.span(
            f"tools/call {name}",
            kind="server",
            attributes={
                "mcp.method.name": "tools/call",
                "gen_ai.tool.name": name,
                "captcha_tasks.agent": tools.agent_of(ctx).name,
            },
        ):
            return await tools.run_task(ctx, name, given, fields)

    ctx_param = inspect.Parameter("ctx", inspect.Parameter.KEYWORD_ONLY, annotation=context_class)
    signature = inspect.Signature([*params, ctx_param], return_annotation=dict[str, Any])
    tool.__signature__ = signature  # type: ignore[attr-defined]
    tool.__annotations__ = {
        **{param.name: param.annotation for param in signature.parameters.values()},
        "return": signature.return_annotation,
    }
    tool.__name__ = name
    task = app.tasks.get(f"captcha_tasks.{name}")
    doc = inspect.getdoc(task.run) if task is not None else inspect.getdoc(awaiting)
    return tool, doc or name


def build_server(config: ServerConfig) -> Any:
    """The ``FastMCP`` server with every tool."""
    from mcp.server.fastmcp import Context, FastMCP
    from mcp.server.fastmcp.exceptions import ToolError

    app.loader.import_default_modules()
    server = FastMCP(
        "captcha-tasks",
        instructions=(
            "Solve CAPTCHAs on a captcha_tasks cluster. find_captchas reads a page's HTML "
            "and names the solve tool and arguments for each captcha on it; each solve_* "
            "tool returns the answer in 'solution'. A result with 'user_agent' (and "
            "'proxy_id') is bound to that browser identity: send the token with them."
        ),
        host=config.host,
        port=config.port,
    )
    tools = Tools(config)
    for name in SOLVE_TOOLS:
        fn, doc = _solve_tool(tools, name, Context)
        server.add_tool(fn, name=name, description=doc, structured_output=False)

    async def find_captchas_tool(html: str, url: str, status: int = 200) -> dict[str, Any]:
        """The captchas in a page's HTML (``url``: the address it was served at; ``status``:
        its HTTP status, 403 for DataDome's captcha page): for each, ``tool`` (the solve
        tool to call), ``arguments`` (what to call it with), ``token_field`` (the form
        field its token goes in) and ``form`` (the form's action URL and hidden fields).
        Nothing is sent anywhere."""
        if not url.startswith(("http://", "https://")):
            raise ToolError("invalid argument 'url': must be an http:// or https:// URL")
        return {"captchas": find_captchas(html, url, status)}

    server.add_tool(find_captchas_tool, name="find_captchas", structured_output=False)

    async def fetch_page(
        url: str,
        ctx: Context,  # type: ignore[type-arg]
        form: dict[str, str] | None = None,
        isolated: bool = False,
    ) -> dict[str, Any]:
        """Load a page of a host the operator allows, through the cluster's workers: with
        the cluster's shared cookies (``isolated``: a fresh visitor), solving the captcha
        it finds and submitting it (``form``: fields to POST). Returns the answer's
        ``status`` and final ``url``, whether a captcha was solved on the way
        (``solved``, ``source``) and how many tokens were submitted (``attempts``); not
        the page's text."""
        kwargs: dict[str, Any] = {"url": url, "isolated": isolated}
        if form is not None:
            kwargs["form"] = form
        return await tools.run_task(ctx, "fetch_page", kwargs, ["url", "form", "isolated"])

    server.add_tool(fetch_page, name="fetch_page", structured_output=False)

    async def get_balance(provider: str | None = None) -> dict[str, Any]:
        """A provider account's balance (``provider``: a configured provider's name;
        default the preferred one): ``balance`` (a decimal string), ``provider``,
        ``protocol``."""
        try:
            result = await aio.get_balance(provider, timeout=60)
        except CaptchaTasksError as exc:
            raise ToolError(f"{type(exc).__name__}: {exc}") from None
        return dict(result)

    server.add_tool(get_balance, name="get_balance", structured_output=False)

    async def get_spend(ctx: Context) -> dict[str, Any]:  # type: ignore[type-arg]
        """This agent's budget: ``agent``, ``spent_last_hour`` (USD, decimal string),
        ``max_spend_per_hour``, ``in_flight``, ``max_in_flight`` (``"0"``/``0``: no
        cap)."""
        agent = tools.agent_of(ctx)
        budgets = tools.budgets()
        return {
            "agent": agent.name,
            "spent_last_hour": str(await budgets.spent(agent)),
            "max_spend_per_hour": str(agent.max_spend_per_hour),
            "in_flight": await budgets.in_flight(agent),
            "max_in_flight": agent.max_in_flight,
        }

    server.add_tool(get_spend, name="get_spend", structured_output=False)
    return server


async def serve_stdio(config: ServerConfig) -> None:
    await build_server(config).run_stdio_async()


async def serve_http(config: ServerConfig, on_ready: Callable[[str], None] | None = None) -> None:
    """Streamable HTTP at ``http://host:port/mcp``, behind the :class:`~.gate.Gate`: the
    agents' bearer tokens, bounded bodies, and each session its agent's only."""
    import uvicorn

    server = build_server(config)
    app = Gate(server.streamable_http_app(), config.agents)
    uv = uvicorn.Server(
        uvicorn.Config(app, host=config.host, port=config.port, log_level="warning", lifespan="on")
    )
    if on_ready is not None:
        task = asyncio.ensure_future(uv.serve())
        while not uv.started and not task.done():
            await asyncio.sleep(0.05)
        if uv.started:
            on_ready(f"http://{config.host}:{config.port}/mcp")
        await task
        return
    await uv.serve()
