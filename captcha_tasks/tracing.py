"""OpenTelemetry traces of solves: one trace from the caller's send to the result, whatever
worker ends it.

Nothing here needs OpenTelemetry. Without its API installed, or with no tracer provider
set up, no span is made at all (:func:`enabled`): nothing is recorded and next to nothing
paid. :func:`setup` (a worker at start, and each pool
process after its fork) installs the SDK from the standard ``OTEL_*`` variables when
they name an exporter (``OTEL_TRACES_EXPORTER``, ``OTEL_EXPORTER_OTLP_ENDPOINT`` or
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``), unless a tracer provider is installed already
(``opentelemetry-instrument``, or the application's own).

A solve's trace context travels in the Celery message's headers from the caller
(:func:`inject_into`: the process's propagators, W3C ``traceparent`` and ``tracestate``
unless ``OTEL_PROPAGATORS`` says otherwise), then in the job's record in Redis from its
admission on (:func:`carrier`: the admission span's context, always as W3C's), so the
engine that submits, reads and ends it, on any worker and after any redelivery, adds
its spans to the same trace.

Attributes are the OpenTelemetry semantic conventions' where they exist (``messaging.*``
for the task, ``http.*``/``server.*`` for provider calls) and ``captcha_tasks.*``:
types, provider names, captcha ids, counts and costs. Never a key, a token, a cookie,
a proxy's credentials or a URL's query.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import json
import logging
import os
import threading
import types
import weakref
from collections.abc import Iterator, Mapping
from typing import Any, NamedTuple
from urllib.parse import urlsplit

__all__ = [
    "TRACER_NAME",
    "SpanOfSteps",
    "attached",
    "carrier",
    "current_trace_id",
    "emit",
    "event",
    "header_names",
    "http_reply",
    "inject_into",
    "install_log_trace_ids",
    "setup",
    "span",
    "to_ns",
]

log = logging.getLogger(__name__)

#: The instrumentation scope of every span here.
TRACER_NAME = "captcha_tasks"
#: The variables that ask for an exporter (any one of them set turns the SDK on).
EXPORTER_VARIABLES = (
    "OTEL_TRACES_EXPORTER",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
)

_setup_lock = threading.Lock()
#: OpenTelemetry's API modules once looked for (None: not installed; False: not yet).
_found: Any = False


def _api() -> Any:
    """OpenTelemetry's API (``.trace``, ``.propagate``, ``.context``), imported on first
    use so that an application that imports the tasks pays nothing for it until a span
    is made; None when the [otel] extra is not installed (every function is a no-op)."""
    global _found
    if _found is False:
        try:
            from opentelemetry import context, propagate, trace
        except ImportError:
            _found = None
        else:
            _found = types.SimpleNamespace(trace=trace, propagate=propagate, context=context)
    return _found


def enabled() -> bool:
    """Whether spans are recorded in this process: OpenTelemetry's API is installed and a
    tracer provider is set up (by :func:`setup`, ``opentelemetry-instrument`` or the
    application). Without one, :func:`span`, :func:`emit` and
    :meth:`SpanOfSteps.step` do nothing at all, not even a non-recording span."""
    return _in_force_now() is not None


class _InForce(NamedTuple):
    """What the spans here need of the tracer provider in force, found once per provider."""

    provider: Any
    #: Made once: the SDK makes a new tracer on every ``get_tracer`` call (a quarter of a
    #: span's cost, measured).
    tracer: Any
    #: Whether its sampler follows a parent's decision (the SDK's default, and every
    #: ``parentbased_*`` one).
    follows_parent: bool


_in_force: _InForce | None = None


def _in_force_now() -> _InForce | None:
    """The tracer provider in force, with what derives from it; None when spans are not
    recorded here (:func:`enabled`). One look at the global provider a span."""
    global _in_force
    api = _api()
    if api is None:
        return None
    provider = api.trace.get_tracer_provider()
    if _in_force is not None and _in_force.provider is provider:
        return _in_force
    if isinstance(provider, api.trace.ProxyTracerProvider):
        return None
    from .version import __version__

    try:
        from opentelemetry.sdk.trace.sampling import ParentBased
    except ImportError:  # a provider of another SDK: its sampler decides
        follows = False
    else:
        follows = isinstance(getattr(provider, "sampler", None), ParentBased)
    _in_force = _InForce(provider, provider.get_tracer(TRACER_NAME, __version__), follows)
    return _in_force


def _recording(parent: str | Mapping[str, Any] | None) -> Any:
    """The tracer to make a span under ``parent`` with; None when nothing is recorded
    here, or when the span would be dropped anyway: ``parent`` (a :func:`carrier`
    string) was not sampled and the sampler follows the parent's decision. Such spans
    are not made at all, so the solves a sampler leaves out cost next to nothing."""
    force = _in_force_now()
    if force is None:
        return None
    if force.follows_parent and isinstance(parent, str) and parent and not _sampled(parent):
        return None
    return force.tracer


@functools.lru_cache(maxsize=4096)
def _sampled(text: str) -> bool:
    """Whether the context a :func:`carrier` string keeps was sampled (True if it keeps
    none: the sampler decides)."""
    context = _context_of_text(text)
    found = None if context is None else _api().trace.get_current_span(context).get_span_context()
    if found is None or not found.is_valid:
        return True  # no parent: the sampler decides
    return bool(found.trace_flags.sampled)


def to_ns(epoch_seconds: float) -> int:
    """Epoch seconds as OpenTelemetry's nanoseconds."""
    return int(epoch_seconds * 1e9)


# -- the context --------------------------------------------------------------------


@functools.cache
def _w3c() -> Any:
    """W3C Trace Context's propagator: the job record's format, whatever propagators the
    process's messages use (``OTEL_PROPAGATORS``)."""
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    return TraceContextTextMapPropagator()


def carrier() -> str:
    """The running span's context as the job record keeps it (JSON of ``traceparent`` and
    ``tracestate``, W3C's, whatever the messages' propagators); "" when no span is
    recording."""
    if _api() is None or not _api().trace.get_current_span().get_span_context().is_valid:
        return ""
    headers: dict[str, str] = {}
    _w3c().inject(headers)
    return json.dumps(headers, separators=(",", ":")) if headers else ""


def _context_of(parent: str | Mapping[str, Any] | None) -> Any:
    """The context a :func:`carrier` string or a message's headers carry (None: none).
    Headers are read by the process's propagators (``OTEL_PROPAGATORS``, W3C's by
    default), as the sender wrote them."""
    if _api() is None or not parent:
        return None
    if isinstance(parent, str):
        return _context_of_text(parent)
    headers = {k: str(v) for k, v in parent.items() if isinstance(v, str | bytes) and v}
    return _api().propagate.extract(headers) if headers else None


@functools.lru_cache(maxsize=4096)
def _context_of_text(text: str) -> Any:
    """A job's kept context, parsed once for all its spans (contexts are immutable)."""
    try:
        parent = json.loads(text)
    except ValueError:
        return None
    if not isinstance(parent, dict):
        return None
    kept = {k: str(parent[k]) for k in ("traceparent", "tracestate") if parent.get(k)}
    return _w3c().extract(kept) if kept else None


def header_names() -> tuple[str, ...]:
    """The message headers the process's propagators read and write (``traceparent`` and
    ``tracestate`` by default; others under ``OTEL_PROPAGATORS``)."""
    if _api() is None:
        return ("traceparent", "tracestate")
    return tuple(sorted(_api().propagate.get_global_textmap().fields))


def inject_into(headers: dict[str, Any]) -> None:
    """Put the running span's context in a message's ``headers`` (``traceparent``)."""
    if _api() is not None:
        _api().propagate.inject(headers)


def current_trace_id() -> str:
    """The running span's trace id (32 hex digits), or "" when none is recording."""
    if _api() is None:
        return ""
    found = _api().trace.get_current_span().get_span_context()
    return format(found.trace_id, "032x") if found.is_valid else ""


# -- spans --------------------------------------------------------------------------


def _kind(kind: str) -> Any:
    return getattr(_api().trace.SpanKind, kind.upper())


def _clean(attributes: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in attributes.items() if v is not None and v != ""}


@contextlib.contextmanager
def span(
    name: str,
    *,
    parent: str | Mapping[str, Any] | None = None,
    kind: str = "internal",
    attributes: Mapping[str, Any] | None = None,
    start_time: float | None = None,
    passing: tuple[type[BaseException], ...] = (),
    http: bool = False,
) -> Iterator[Any]:
    """A span, current inside the block (its trace id in log lines), the child of
    ``parent`` (a :func:`carrier` string or a message's headers; None: the running
    span). An exception leaving the block marks it failed (its type and code, status
    ERROR), but for the ``passing`` ones: a task's control flow (Celery's ``Ignore`` of
    a task that replaced itself, a retry) ends it as it is. ``http``: the block makes
    one request to a provider, whose method, address and status the span records
    (:func:`http_reply`); the stock HTTP instrumentations make no second span of it.
    Yields the span (None when nothing is recorded here: :func:`enabled`)."""
    tracer = _recording(parent)
    if tracer is None:
        yield None
        return
    context = _context_of(parent) if parent is not None else None
    with tracer.start_as_current_span(
        name,
        context=context,
        kind=_kind(kind),
        attributes=_clean(attributes or {}),
        start_time=None if start_time is None else to_ns(start_time),
        record_exception=False,
        set_status_on_exception=False,
    ) as current:
        token = _http_span.set(current) if http else None
        suppressed = _suppress_http() if http else None
        try:
            yield current
        except passing:
            raise
        except BaseException as exc:
            set_error(current, exc)
            raise
        finally:
            if suppressed is not None:
                _api().context.detach(suppressed)
            if token is not None:
                _http_span.reset(token)


#: The span of the provider request being made in this context (``span(http=True)``).
_http_span: contextvars.ContextVar[Any] = contextvars.ContextVar(
    "captcha_tasks_http_span", default=None
)


def _suppress_http() -> Any:
    """Tell the stock HTTP instrumentations (urllib3's, requests') to make no span of the
    request made inside: the span that asked for it is that request's client span, with
    its HTTP attributes, as an SDK's call span is in botocore's instrumentation. The
    context token to detach; None if this API has no such key."""
    key = getattr(_api().context, "_SUPPRESS_HTTP_INSTRUMENTATION_KEY", None)
    if key is None:
        return None
    return _api().context.attach(_api().context.set_value(key, True))


def http_reply(url: str, status: int, method: str = "POST") -> None:
    """A provider request to ``url`` got an answer with ``status`` (0: none came): the
    HTTP semantic conventions' attributes on the span that asked for them
    (``span(http=True)``), if any. The URL without its query or credentials: the
    provider's endpoint, never what was sent to it."""
    current = _http_span.get()
    if current is None:
        return
    parts = urlsplit(url)
    host = parts.hostname or ""
    netloc = (f"[{host}]" if ":" in host else host) + (f":{parts.port}" if parts.port else "")
    attributes: dict[str, Any] = {
        "http.request.method": method,
        "server.address": host,
        "server.port": parts.port or (443 if parts.scheme == "https" else 80),
        "url.full": f"{parts.scheme}://{netloc}{parts.path}",
    }
    if status:
        attributes["http.response.status_code"] = status
    current.set_attributes(attributes)


def emit(
    name: str,
    *,
    parent: str | Mapping[str, Any] | None,
    start: float,
    end: float,
    kind: str = "internal",
    attributes: Mapping[str, Any] | None = None,
    error: BaseException | str | None = None,
) -> None:
    """A span that already happened, from ``start`` to ``end`` (epoch seconds): a wait,
    or an outcome. ``error``: its status is ERROR with that description."""
    tracer = _recording(parent)
    if tracer is None:
        return
    done = tracer.start_span(
        name,
        context=_context_of(parent),
        kind=_kind(kind),
        attributes=_clean(attributes or {}),
        start_time=to_ns(start),
    )
    if error is not None:
        set_error(done, error)
    done.end(end_time=to_ns(max(start, end)))


def event(name: str, attributes: Mapping[str, Any] | None = None) -> None:
    """An event on the running span (a page loaded, a verdict), if one is recording."""
    if _api() is not None:
        _api().trace.get_current_span().add_event(name, _clean(attributes or {}))


@contextlib.contextmanager
def attached(parent: str | Mapping[str, Any] | None) -> Iterator[None]:
    """Inside, ``parent`` (a :func:`carrier` string) is the running context: what is
    logged carries its trace id, and spans started are its children."""
    context = _context_of(parent)
    if context is None:
        yield
        return
    token = _api().context.attach(context)
    try:
        yield
    finally:
        _api().context.detach(token)


def set_error(current: Any, error: BaseException | str) -> None:
    """Mark ``current`` failed with ``error`` (its type and code as attributes)."""
    if current is None or _api() is None:
        return
    from opentelemetry.trace import Status, StatusCode

    if isinstance(error, BaseException):
        current.set_attribute("error.type", type(error).__name__)
        code = getattr(error, "code", None)
        if code:
            current.set_attribute("captcha_tasks.error_code", str(code))
        description = f"{type(error).__name__}: {getattr(error, 'code', '') or ''}".rstrip(": ")
    else:
        current.set_attribute("error.type", error)
        description = error
    current.set_status(Status(StatusCode.ERROR, description))


class SpanOfSteps:
    """Repeated steps of one job (its reads) as one span, its steps kept as arrays of
    the span's attributes rather than an event each: ``captcha_tasks.steps`` (how
    many), ``captcha_tasks.step_ends_ms`` (when each ended, in ms from the span's
    start) and each of the steps' ``figures`` (one element a step, in order). A job
    read ten times costs one span and a few attributes; an event per read would cost
    a worker more than the rest of the solve's spans together (``bench solve
    --traces``).

    A job's span is made when a step is its last here (``final``: answered, failed),
    when it holds :data:`MAX_STEPS`, or once it has had no step for :data:`IDLE_S`
    seconds (another engine reads it now, or it ended elsewhere), and on
    :func:`flush` (a worker stopping)."""

    #: Steps per span at most, and seconds without a step before a job's span is made.
    MAX_STEPS = 100
    IDLE_S = 30.0

    def __init__(self, name: str, kind: str = "client") -> None:
        self.name, self.kind = name, kind
        self._open: dict[str, _Steps] = {}
        self._lock = threading.Lock()
        self._swept = 0.0
        _buffers.add(self)

    def step(
        self,
        key: str,
        parent: str,
        *,
        start: float,
        end: float,
        attributes: Mapping[str, Any],
        figures: Mapping[str, int | float | str | bool] | None = None,
        final: bool = False,
        error: BaseException | str | None = None,
    ) -> None:
        """One step of ``key``'s job (``parent``: its :func:`carrier`), from ``start`` to
        ``end``: ``figures`` its numbers, ``attributes`` the span's (the last step's
        win)."""
        tracer = _recording(parent)
        if tracer is None:
            return
        done: list[_Steps] = []
        with self._lock:
            steps = self._open.get(key)
            if steps is None:
                steps = self._open[key] = _Steps(tracer, parent, start)
            steps.add(end, attributes, figures or {}, error)
            if final or error is not None or len(steps.ends) >= self.MAX_STEPS:
                done.append(self._open.pop(key))
            if end - self._swept > self.IDLE_S:
                self._swept = end
                idle = [k for k, v in self._open.items() if end - v.end > self.IDLE_S]
                done += [self._open.pop(k) for k in idle]
        for steps in done:
            steps.emit(self.name, self.kind)

    def flush(self) -> None:
        with self._lock:
            done, self._open = list(self._open.values()), {}
        for steps in done:
            steps.emit(self.name, self.kind)


class _Steps:
    def __init__(self, tracer: Any, parent: str, start: float) -> None:
        self.tracer, self.parent, self.start, self.end = tracer, parent, start, start
        self.attributes: dict[str, Any] = {}
        self.ends: list[float] = []
        self.figures: dict[str, list[Any]] = {}
        self.error: BaseException | str | None = None

    def add(
        self,
        end: float,
        attributes: Mapping[str, Any],
        figures: Mapping[str, Any],
        error: BaseException | str | None,
    ) -> None:
        self.end = max(self.end, end)
        self.attributes.update(attributes)
        self.ends.append(end)
        for name, value in figures.items():
            self.figures.setdefault(name, []).append(value)
        self.error = error if error is not None else self.error

    def emit(self, name: str, kind: str) -> None:
        attributes = {
            **self.attributes,
            **self.figures,
            "captcha_tasks.steps": len(self.ends),
            "captcha_tasks.step_ends_ms": [round((at - self.start) * 1000) for at in self.ends],
        }
        done = self.tracer.start_span(
            name,
            context=_context_of(self.parent),
            kind=_kind(kind),
            attributes=_clean(attributes),
            start_time=to_ns(self.start),
        )
        if self.error is not None:
            set_error(done, self.error)
        done.end(end_time=to_ns(self.end))


_buffers: weakref.WeakSet[SpanOfSteps] = weakref.WeakSet()


# -- the SDK ------------------------------------------------------------------------


def setup() -> bool:
    """Install OpenTelemetry's SDK from the ``OTEL_*`` variables if they name an exporter
    and nothing is installed yet; True if this call installed it. Call it in each process
    that records spans, after any fork (a worker's main process and each pool process)."""
    if _api() is None or os.environ.get("OTEL_SDK_DISABLED", "").lower() == "true":
        return False
    if not any(os.environ.get(name) for name in EXPORTER_VARIABLES):
        return False
    with _setup_lock:
        if not isinstance(_api().trace.get_tracer_provider(), _api().trace.ProxyTracerProvider):
            return False  # installed already: by opentelemetry-instrument, or by us
        try:
            provider = _sdk_provider()
        except ImportError as exc:
            log.warning("OpenTelemetry: %s; no traces (pip install 'captcha_tasks[otel]')", exc)
            return False
        if provider is None:
            return False
        _api().trace.set_tracer_provider(provider)
    return True


def _sdk_provider() -> Any:
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter

    names = [
        name.strip()
        for name in os.environ.get("OTEL_TRACES_EXPORTER", "otlp").split(",")
        if name.strip()
    ]
    exporters: list[Any] = []
    for name in names:
        if name in ("otlp", "otlp_proto_http"):
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            exporters.append(OTLPSpanExporter())
        elif name == "console":
            exporters.append(ConsoleSpanExporter())
        elif name != "none":
            log.warning("OpenTelemetry: no exporter named %r here (otlp, console, none)", name)
    if not exporters:
        return None
    defaults = {} if os.environ.get("OTEL_SERVICE_NAME") else {SERVICE_NAME: "captcha_tasks"}
    # The sampler comes from OTEL_TRACES_SAMPLER(_ARG), the resource's other attributes
    # from OTEL_RESOURCE_ATTRIBUTES: the SDK reads them itself.
    provider = TracerProvider(resource=Resource.create(defaults))
    for exporter in exporters:
        provider.add_span_processor(BatchSpanProcessor(exporter))
    return provider


def flush(timeout_s: float = 5.0) -> None:
    """Make the spans of steps still open (:class:`SpanOfSteps`) and export what is
    buffered (a process about to end)."""
    if _api() is None:
        return
    for buffer in list(_buffers):
        buffer.flush()
    provider = _api().trace.get_tracer_provider()
    force_flush = getattr(provider, "force_flush", None)
    if force_flush is not None:
        force_flush(int(timeout_s * 1000))


# -- log lines ----------------------------------------------------------------------


def install_log_trace_ids() -> None:
    """Every log record made from now on carries ``otelTraceID`` and ``otelSpanID`` (the
    names OpenTelemetry's logging instrumentation uses; "0" when no span is recording)
    and ``trace``: `` trace=<id>`` inside a span, else "" (the worker's log format
    shows it)."""
    if getattr(logging.getLogRecordFactory(), "_captcha_tasks_traces", False):
        return
    make = logging.getLogRecordFactory()

    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = make(*args, **kwargs)
        context = _api().trace.get_current_span().get_span_context() if _api() is not None else None
        if context is not None and context.is_valid:
            trace_id = format(context.trace_id, "032x")
            span_id = format(context.span_id, "016x")
            shown = f" trace={trace_id}"
        else:
            trace_id = span_id = "0"
            shown = ""
        record.__dict__.update(otelTraceID=trace_id, otelSpanID=span_id, trace=shown)
        return record

    factory._captcha_tasks_traces = True  # type: ignore[attr-defined]
    logging.setLogRecordFactory(factory)
