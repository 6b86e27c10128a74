"""OpenTelemetry traces of solves, exported by real workers over OTLP/HTTP to a receiver
this test runs, decoded with the protocol's own classes.

The caller sends from inside a span of its own (the SDK's in-memory exporter keeps it);
worker A admits the solve and submits it, then stops (a warm shutdown, its spans
flushed); worker B's engine reads the captcha and stores the result. Everything is one
trace: the send, A's admission, A's wait for a thread and submit, B's reads and B's
result, parented through the job's record in Redis.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import pytest
import redis

from captcha_tasks import solve_recaptcha_v2
from captcha_tasks.session.proxies import ProxyPool
from captcha_tasks.settings import get_settings
from captcha_tasks.state import Keys, state_redis
from captcha_tasks_dev.otlp_receiver import OtlpReceiver, ReceivedSpan
from captcha_tasks_dev.procs import wait_until
from tests.support.otel_spans import memory_exporter
from tests.support.workers import worker_env

pytestmark = pytest.mark.integration

V2_KEY = "6Le-wvkSAAAAAPBMRTvw0Q4Muexq9bi0DJwx_mJ-"
PROXY_PASSWORD = "pr0xy-s3cret-9f2c"


@pytest.fixture
def receiver() -> Any:
    with OtlpReceiver() as running:
        yield running


@pytest.fixture
def caller_spans() -> Any:
    """This process's spans (the caller's send), in the SDK's in-memory exporter."""
    with memory_exporter() as exporter:
        yield exporter


def _traced_env(sandbox_url: str, receiver: OtlpReceiver, instance: str) -> dict[str, str]:
    return worker_env(
        sandbox_url,
        OTEL_EXPORTER_OTLP_ENDPOINT=receiver.url,
        OTEL_SERVICE_NAME="captcha-worker",
        OTEL_RESOURCE_ATTRIBUTES=f"service.instance.id={instance}",
        OTEL_BSP_SCHEDULE_DELAY="100",
    )


def _named(spans: list[ReceivedSpan], name: str) -> list[ReceivedSpan]:
    return [s for s in spans if s.name == name]


def _ended(spans: list[ReceivedSpan]) -> bool:
    """Whether the solve's result span and its last reads' span have come: an engine
    makes them after refilling the threads the answers freed, the reads' last."""
    reads = _named(spans, "captcha_tasks.reads")
    return bool(_named(spans, "captcha_tasks.result")) and any(
        r.attributes.get("captcha_tasks.answer") == "ready" for r in reads
    )


def test_a_solve_admitted_on_one_worker_and_ended_on_another_is_one_trace(
    celery_app: Any,
    redis_url: str,
    sandbox_factory: Any,
    worker_factory: Any,
    receiver: OtlpReceiver,
    caller_spans: Any,
) -> None:
    from opentelemetry import trace

    # 100 s solves at the tests' time scale: 5 s, time for A to stop after its submit.
    sandbox = sandbox_factory(latency={"recaptcha_v2": 100.0}, jitter=0.0)
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    keys = Keys(get_settings().key_prefix)
    a = worker_factory(_traced_env(sandbox.url, receiver, "a"), name="trace-a@127.0.0.1")
    # Solved through a pool proxy: its password goes to the provider, never to a span.
    settings = get_settings()
    proxy_id = ProxyPool(state_redis(settings), settings).add(
        f"http://traceuser:{PROXY_PASSWORD}@127.0.0.1:3128"
    )
    with trace.get_tracer("test").start_as_current_span("caller") as caller:
        result = solve_recaptcha_v2.delay(V2_KEY, "https://example.com/traced", proxy_id=proxy_id)
    trace_id = format(caller.get_span_context().trace_id, "032x")
    wait_until(
        lambda: client.hget(keys.job(result.id), "state") == "polling",
        timeout=30,
        interval=0.05,
        what="worker A's submit",
    )
    a.proc.send_signal(signal.SIGTERM)  # a warm shutdown: its engine stops, spans flushed
    a.proc.wait(timeout=30)
    b = worker_factory(_traced_env(sandbox.url, receiver, "b"), name="trace-b@127.0.0.1")
    solved = result.get(timeout=60)
    wait_until(
        lambda: _ended(receiver.spans),
        timeout=15,
        interval=0.05,
        what="the result's span and the last reads' span",
    )

    (send,) = [s for s in caller_spans.get_finished_spans() if s.name.startswith("send ")]
    assert format(send.context.trace_id, "032x") == trace_id
    assert send.kind == trace.SpanKind.PRODUCER
    assert send.attributes["messaging.message.id"] == result.id

    spans = [s for s in receiver.spans if s.trace_id == trace_id]
    assert {s.trace_id for s in receiver.spans} == {trace_id}  # nothing outside the trace
    (admit,) = [s for s in spans if s.kind == "consumer"]
    assert admit.name == "process captcha_tasks.solve_recaptcha_v2"
    assert admit.parent_id == format(send.context.span_id, "016x")
    assert admit.attributes["messaging.message.id"] == result.id
    assert admit.attributes["captcha_tasks.outcome"] == "admitted"
    assert admit.resource["service.instance.id"] == "a"
    assert admit.resource["service.name"] == "captcha-worker"

    (wait,) = _named(spans, "captcha_tasks.wait_for_thread")
    (submit,) = _named(spans, "captcha_tasks.submit")
    reads = sorted(_named(spans, "captcha_tasks.reads"), key=lambda s: s.start_ns)
    (end,) = _named(spans, "captcha_tasks.result")
    # The engine's spans are the admission's children, whichever worker made them.
    assert {s.parent_id for s in (wait, submit, *reads, end)} == {admit.span_id}
    assert (wait.resource["service.instance.id"], submit.resource["service.instance.id"]) == (
        "a",
        "a",
    )
    # A may have read once before it stopped; the answer was B's to read and store.
    assert (reads[-1].resource["service.instance.id"], end.resource["service.instance.id"]) == (
        "b",
        "b",
    )
    # In order: admitted, waited, sent, read until the answer, ended.
    starts = [admit.start_ns, wait.end_ns, submit.start_ns, reads[0].start_ns, end.start_ns]
    assert starts == sorted(starts)
    assert submit.kind == "client"
    assert submit.attributes["captcha_tasks.captcha_id"] == solved["captcha_id"]
    assert submit.attributes["captcha_tasks.provider"] == solved["provider"]
    # The provider request, as the HTTP semantic conventions say: its endpoint, no query.
    sandbox_at = sandbox.url.split("//")[1]
    assert submit.attributes["http.request.method"] == "POST"
    assert submit.attributes["http.response.status_code"] == 200
    assert submit.attributes["url.full"] == f"http://{sandbox_at}/in.php"
    assert f"{submit.attributes['server.address']}:{submit.attributes['server.port']}" == (
        sandbox_at
    )
    # Each engine's reads of it: one span, each read's end and batch size in arrays; the
    # last read found the answer.
    assert [r.attributes["captcha_tasks.answer"] for r in reads][-1] == "ready"
    counts = [r.attributes["captcha_tasks.steps"] for r in reads]
    for r in reads:
        ends = r.attributes["captcha_tasks.step_ends_ms"]
        assert len(ends) == len(r.attributes["captcha_tasks.batch_sizes"])
        assert len(ends) == r.attributes["captcha_tasks.steps"]
        assert ends == sorted(ends)
        assert ends[-1] == pytest.approx((r.end_ns - r.start_ns) / 1e6, abs=1)
    assert end.attributes["captcha_tasks.outcome"] == "solved"
    assert end.attributes["captcha_tasks.reads"] == solved["polls"] == sum(counts)
    assert end.status != 2

    picture = os.environ.get("CAPTCHA_TASKS_TRACE_PICTURE")
    if picture:  # the monitoring guide's picture, drawn from these spans
        from captcha_tasks_dev.trace_picture import draw_trace

        title = "solve_recaptcha_v2: admitted by worker a, read and ended by worker b"
        draw_trace(spans, Path(picture), title=title)

    # The worker's log lines of the solve lead to its trace.
    admitted = [line for line in a.log().splitlines() if f"[{result.id}] admitted" in line]
    assert admitted and f"trace={trace_id}" in admitted[0]
    # Logged once the result is stored (and the caller's get() may have returned).
    wait_until(
        lambda: f"[{result.id}] succeeded" in b.log(), timeout=10, interval=0.05, what="B's line"
    )
    ended = [line for line in b.log().splitlines() if f"[{result.id}] succeeded" in line]
    assert f"trace={trace_id}" in ended[0]

    # No secret in anything exported: the provider key, the token.
    from captcha_tasks_sandbox import DEV_API_KEY

    exported = receiver.raw
    assert sandbox.stats()["submitted"] == 1
    for secret in (DEV_API_KEY, str(solved["solution"]), PROXY_PASSWORD):
        assert secret.encode() not in exported
        assert secret not in a.log() and secret not in b.log()


def test_with_the_stock_instrumentations_nothing_is_twice_and_parents_hold(
    celery_app: Any,
    sandbox_factory: Any,
    worker_factory: Any,
    receiver: OtlpReceiver,
    caller_spans: Any,
) -> None:
    from opentelemetry import trace

    # Not in the [otel] extra: the dev set has them; `make compat`'s rows have not.
    celery_instrumentation = pytest.importorskip("opentelemetry.instrumentation.celery")
    pytest.importorskip("opentelemetry.instrumentation.urllib3")
    pytest.importorskip("opentelemetry.instrumentation.redis")
    CeleryInstrumentor = celery_instrumentation.CeleryInstrumentor

    sandbox = sandbox_factory()
    worker_factory(
        _traced_env(sandbox.url, receiver, "a"),
        name="stock-a@127.0.0.1",
        extra_args=["--include", "tests.support.otel_stock"],
    )
    CeleryInstrumentor().instrument()  # the caller's side too, as an application would
    try:
        with trace.get_tracer("test").start_as_current_span("caller") as caller:
            result = solve_recaptcha_v2.delay(V2_KEY, "https://example.com/stock")
        result.get(timeout=60)
    finally:
        CeleryInstrumentor().uninstrument()
    trace_id = format(caller.get_span_context().trace_id, "032x")
    wait_until(
        lambda: _ended(receiver.spans),
        timeout=15,
        interval=0.05,
        what="the result's span and the last reads' span",
    )

    # The send: the stock producer span only, no second one of ours.
    sends = [s for s in caller_spans.get_finished_spans() if s.kind == trace.SpanKind.PRODUCER]
    assert [s.name for s in sends] == ["apply_async/captcha_tasks.solve_recaptcha_v2"]
    spans = [s for s in receiver.spans if s.trace_id == trace_id]
    by_id = {s.span_id: s for s in spans}
    (admit,) = [s for s in spans if s.name == "process captcha_tasks.solve_recaptcha_v2"]
    # The worker admits a solve in its consumer (worker.celery_internals.admit_inline),
    # where the stock instrumentation sees no run: the admission is the child of the
    # stock producer span, and the only consumer span.
    assert admit.parent_id == format(sends[0].context.span_id, "016x")
    assert [s.name for s in spans if s.kind == "consumer"] == [admit.name]
    engine = [s for s in spans if s.name.startswith("captcha_tasks.")]
    assert {s.name for s in engine} >= {
        "captcha_tasks.wait_for_thread",
        "captcha_tasks.submit",
        "captcha_tasks.reads",
        "captcha_tasks.result",
    }
    assert {s.parent_id for s in engine} == {admit.span_id}
    # redis-py's spans of the admission's commands are its children; every span of the
    # trace has its parent in it (or is the caller's).
    redis_spans = [s for s in spans if s.attributes.get("db.system") == "redis"]
    assert redis_spans and {s.parent_id for s in redis_spans} <= set(by_id)
    assert any(s.parent_id == admit.span_id for s in redis_spans)
    assert all(s.parent_id in by_id for s in spans if s is not admit)
    # The submit is the provider request's one client span: urllib3's made none under it.
    (submit,) = _named(spans, "captcha_tasks.submit")
    assert submit.attributes["http.response.status_code"] == 200
    assert not [s for s in spans if s.parent_id == submit.span_id]
    http_spans = [s for s in spans if s.kind == "client" and s.name in ("POST", "GET")]
    assert not http_spans
    ours = [s.name for s in spans if s not in redis_spans]
    assert len(ours) == len(set(ours))  # nothing recorded twice


def test_a_page_whose_first_token_is_refused_is_one_trace_with_its_retry(
    celery_app: Any, sandbox_factory: Any, worker_factory: Any, receiver: OtlpReceiver
) -> None:
    from captcha_tasks.worker.page_tasks import fetch_page
    from tests.integration.test_acceptance import _two_providers
    from tests.integration.test_page_retry import _strict_pair

    a, b = _strict_pair(sandbox_factory)  # main's tokens all refused, backup's accepted
    env = _two_providers(a, b)
    env.update(_traced_env(a.url, receiver, "a"))
    env.pop("CAPTCHA_TASKS_SOLVER_URL", None)
    env.pop("CAPTCHAAI_API_KEY", None)
    worker_factory(env, concurrency=2)
    page = fetch_page.delay(f"{a.demo_url}/page/traced", isolated=True).get(timeout=120)
    assert (page["status"], page["attempts"]) == (200, 2)
    # Each worker process exports on its own: the pool process's posts may arrive before
    # the engine's (main process) result spans.
    wait_until(
        lambda: (
            [
                len(_named(receiver.spans, name))
                for name in ("captcha_tasks.submit_challenge", "captcha_tasks.result")
            ]
            == [2, 2]
        ),
        timeout=15,
        interval=0.05,
        what="both posts' and both solves' spans",
    )
    spans = receiver.spans
    (fetch,) = _named(spans, "captcha_tasks.fetch_page")
    assert {s.trace_id for s in spans} == {fetch.trace_id}  # the page is one trace
    assert fetch.attributes["server.address"] == a.demo_url.split("//")[1].split(":")[0]
    loads = [e for e in fetch.events if e["name"] == "page loaded"]
    assert [e["attributes"]["captcha_tasks.challenge"] for e in loads] == ["recaptcha_v2"]
    by_id = {s.span_id: s for s in spans}

    def ancestors(span: ReceivedSpan) -> list[str]:
        out = []
        while span.parent_id in by_id:
            span = by_id[span.parent_id]
            out.append(span.name)
        return out

    # Two solves, each admitted as a child of the page's trace: main's (refused), then
    # backup's for the fresh form.
    admissions = sorted(
        (s for s in spans if s.name == "process captcha_tasks.solve_recaptcha_v2"),
        key=lambda s: s.start_ns,
    )
    assert len(admissions) == 2
    assert all("captcha_tasks.fetch_page" in ancestors(s) for s in admissions)
    results = sorted(_named(spans, "captcha_tasks.result"), key=lambda s: s.start_ns)
    assert [r.attributes["captcha_tasks.provider"] for r in results] == ["main", "backup"]
    steps = sorted(_named(spans, "captcha_tasks.submit_challenge"), key=lambda s: s.start_ns)
    assert [s.attributes["captcha_tasks.attempt"] for s in steps] == [1, 2]
    verdicts = [[e["name"] for e in s.events if e["name"].startswith("token")] for s in steps]
    assert verdicts == [["token refused"], ["token accepted"]]
    # A step that replaced itself (the solve and the post follow) did not fail.
    assert [s.status for s in (fetch, *steps)] == [0, 0, 0]
    # Each post comes after its own solve: the step is the child of that solve's trace.
    assert "process captcha_tasks.solve_recaptcha_v2" in ancestors(steps[0])
    assert ancestors(steps[1])[-1] == "captcha_tasks.fetch_page"
    # No secret: neither provider's key, nor the site's session cookie.
    from captcha_tasks_sandbox import dev_api_key

    exported = receiver.raw
    for secret in (dev_api_key("2captcha"), dev_api_key("captchaai")):
        assert secret.encode() not in exported
    assert b"Cookie" not in exported and b"cookie=" not in exported


def test_an_agents_call_over_mcp_is_one_trace_that_never_holds_its_token(
    celery_app: Any, tmp_path: Path, sandbox_factory: Any, worker_factory: Any, receiver: Any
) -> None:
    pytest.importorskip("mcp")
    import json

    from captcha_tasks_dev.procs import free_port, logged, spawn, stop_process, wait_ready
    from tests.integration.test_mcp import COMMAND, SITEKEY, _http, _json, _run
    from tests.support.workers import ROOT

    token = "agent-trace-token-5e1f0c7a9b"
    sandbox = sandbox_factory()
    worker = worker_factory(_traced_env(sandbox.url, receiver, "w"), name="mcp-w@127.0.0.1")
    agents_file = tmp_path / "agents.json"
    agents_file.write_text(json.dumps({"agents": [{"name": "tracer", "token": token}]}))
    port = free_port()
    server_env = {
        **os.environ,
        **_traced_env(sandbox.url, receiver, "mcp"),
        "CAPTCHA_TASKS_MCP_AGENTS_FILE": str(agents_file),
    }
    argv = [COMMAND, "mcp", "--transport", "http", "--port", str(port)]
    server = spawn("mcp", argv, tmp_path / "mcp.log", env=server_env, cwd=ROOT)
    try:
        wait_ready(server, logged(server, "/mcp for tracer"), timeout=60, what="mcp server")

        async def call() -> Any:
            async with _http(f"http://127.0.0.1:{port}/mcp", token) as session:
                arguments = {"sitekey": SITEKEY, "pageurl": "https://example.com/agent"}
                return _json(await session.call_tool("solve_recaptcha_v2", arguments))

        solved = _run(call())
        wait_until(
            lambda: bool(_named(receiver.spans, "captcha_tasks.result")),
            timeout=15,
            interval=0.05,
            what="the result's span",
        )
    finally:
        stop_process(server.proc)  # its spans are flushed as it exits
    wait_until(
        lambda: bool(_named(receiver.spans, "tools/call solve_recaptcha_v2")),
        timeout=15,
        interval=0.05,
        what="the server's span of the call",
    )

    spans = receiver.spans
    (call_span,) = _named(spans, "tools/call solve_recaptcha_v2")
    assert call_span.kind == "server"
    assert call_span.attributes["captcha_tasks.agent"] == "tracer"
    # One trace: the call, its task's send, the admission, the engine's spans.
    assert {s.trace_id for s in spans} == {call_span.trace_id}
    by_id = {s.span_id: s for s in spans}
    (send,) = [s for s in spans if s.kind == "producer"]
    assert send.parent_id == call_span.span_id
    (admit,) = [s for s in spans if s.kind == "consumer"]
    assert by_id[admit.parent_id] is send
    (end,) = _named(spans, "captcha_tasks.result")
    assert end.attributes["messaging.message.id"] == solved["task_id"]
    # The agent's token is in no exported byte and no log line, nor the provider's key.
    from captcha_tasks_sandbox import DEV_API_KEY

    exported = receiver.raw
    for secret in (token, DEV_API_KEY, str(solved["solution"])):
        assert secret.encode() not in exported
        assert secret not in server.output() and secret not in worker.log()
