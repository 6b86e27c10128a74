"""Where a solve's trace meets Celery: the send's producer span and the context in the
message, the admission's consumer span, and OpenTelemetry's SDK in each worker process
(:mod:`captcha_tasks.tracing` has the spans themselves).

With ``opentelemetry-instrumentation-celery`` on, its producer span is the send's: this
module then adds none of its own. The admission span is the child of the span current
when it starts (the stock run span, where the stock instrumentation sees the admitting
execution run), else of the context in the message (the producer span: an admission in
the worker's consumer, where it sees no run). Nothing is recorded twice, and the stock
spans of an admission (milliseconds) are not taken for the solve.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit

from celery import signals
from celery.exceptions import Ignore, Retry

from .. import tracing

__all__ = ["admission_span", "page_span"]

#: The tasks whose sends carry a trace (this application's).
_OURS = "captcha_tasks."
#: What a task raises to say how it goes on, not that it failed: it replaced itself
#: (``Ignore``: a page's solve and post follow), or is sent again (``Retry``: a page
#: parked for a host's lock).
_CONTROL_FLOW: tuple[type[BaseException], ...] = (Ignore, Retry)


@functools.cache
def _stock_instrumentor() -> Any:
    """``opentelemetry-instrumentation-celery``'s instrumentor class, None when it is not
    installed (looked for once: a failed import searches the whole path every time)."""
    try:
        from opentelemetry.instrumentation.celery import CeleryInstrumentor
    except ImportError:
        return None
    return CeleryInstrumentor


def _stock_celery_instrumented() -> bool:
    """Whether ``opentelemetry-instrumentation-celery`` is on in this process."""
    instrumentor = _stock_instrumentor()
    return instrumentor is not None and bool(instrumentor().is_instrumented_by_opentelemetry)


@signals.before_task_publish.connect  # type: ignore[untyped-decorator]
def _on_send(sender: str | None = None, headers: dict[str, Any] | None = None, **_: Any) -> None:
    """The caller's send: a producer span, its context in the message's headers."""
    if not tracing.enabled() or headers is None or not str(sender or "").startswith(_OURS):
        return
    # A context in the headers already (the trace's own headers, not its baggage).
    context_headers = set(tracing.header_names()) - {"tracestate", "baggage"}
    if any(name in headers for name in context_headers) or _stock_celery_instrumented():
        return  # the stock instrumentation's producer span carries the context
    with tracing.span(
        f"send {sender}",
        kind="producer",
        attributes={
            "messaging.system": "celery",
            "messaging.operation.type": "send",
            "messaging.operation.name": "send",
            "messaging.message.id": headers.get("id"),
            "messaging.destination.name": headers.get("task"),
        },
    ):
        tracing.inject_into(headers)


def _consumer_span(
    task: Any,
    name: str,
    attributes: dict[str, Any],
    passing: tuple[type[BaseException], ...] = _CONTROL_FLOW,
) -> Any:
    """A consumer span of ``task``'s message in the caller's trace: the child of the stock
    instrumentation's run span when one is current, else of the context the message's
    headers carry. ``attributes`` beside the messaging conventions' own."""
    if not tracing.enabled():
        return contextlib.nullcontext()
    request = task.request
    headers = {header: getattr(request, header, None) for header in tracing.header_names()}
    return tracing.span(
        name,
        parent=None if tracing.current_trace_id() else headers,
        kind="consumer",
        passing=passing,
        attributes={
            "messaging.system": "celery",
            "messaging.operation.type": "process",
            "messaging.operation.name": "process",
            "messaging.message.id": request.id,
            **attributes,
        },
    )


def admission_span(task: Any, captcha_type: str, route: Sequence[str]) -> Any:
    """The consumer span of a solve's admission, in the caller's trace: the parent of
    everything the engine does for it (its context is stored with the job)."""
    from .celery_internals.admit_inline import NotInline

    delivery = getattr(task.request, "delivery_info", None) or {}
    return _consumer_span(
        task,
        f"process {task.name}",
        {
            "messaging.destination.name": delivery.get("routing_key"),
            "messaging.consumer.group.name": task.request.hostname,
            "captcha_tasks.type": captcha_type,
            "captcha_tasks.route": ",".join(route),
        },
        # NotInline: a pooled token is the pool process's to take (admitted there).
        passing=(*_CONTROL_FLOW, NotInline),
    )


def page_span(task: Any, name: str, url: object, **attributes: Any) -> Any:
    """A step of a page's fetch (``fetch_page``, ``submit_challenge``) as a consumer
    span in the caller's trace: the solves it sends, and the steps after them, are its
    children through their messages. Only the page's host name, never its URL (a query
    or credentials in it are not ours to record)."""
    return _consumer_span(
        task,
        name,
        {
            "server.address": _hostname(url),
            # What the message carried, as far as it is well formed (the task checks it).
            **{
                f"captcha_tasks.{k}": v
                for k, v in attributes.items()
                if isinstance(v, bool | int | float | str)
            },
        },
    )


def _hostname(url: object) -> str:
    """``url``'s host name; "" for anything else (the step runs before the task checks
    its arguments: a malformed URL is the task's to refuse, with its typed error)."""
    if not isinstance(url, str):
        return ""
    try:
        return urlsplit(url).hostname or ""
    except ValueError:  # "http://[": an unclosed IPv6 literal
        return ""


@signals.celeryd_init.connect  # type: ignore[untyped-decorator]
def _on_celeryd_init(**_: Any) -> None:
    # Before the worker sets its logging up: every record carries the trace id that
    # the worker's log format shows.
    tracing.install_log_trace_ids()


@signals.worker_init.connect  # type: ignore[untyped-decorator]
def _on_worker_init(**_: Any) -> None:
    tracing.install_log_trace_ids()
    tracing.setup()


@signals.worker_process_init.connect  # type: ignore[untyped-decorator]
def _on_worker_process_init(**_: Any) -> None:
    # A pool process after its fork: the SDK's span processor restarts its thread in a
    # forked child itself; set up here if the parent had nothing to inherit.
    tracing.setup()


@signals.worker_process_shutdown.connect  # type: ignore[untyped-decorator]
@signals.worker_shutdown.connect  # type: ignore[untyped-decorator]
def _on_shutdown(**_: Any) -> None:
    tracing.flush()
