"""What the seam assumes about Celery, kombu and redis-py internals, one named
:class:`Assumption` each, checked where it is used.

Every touch point of the seam names the assumption it stands on. Code that relies on
one asks :func:`holds` first (once per process; the answer is cached). When an
assumption does not hold (an upstream release renamed a private method, changed a
signature), :func:`holds` answers False and logs once, at WARNING, what broke, on which
versions, and which public path the worker takes instead. The contract tests
(``tests/unit/test_celery_contracts.py``) run every check and fail with the same
message, before a release reaches a user.

A check only inspects: attributes, signatures and, where the assumption is about what
a function does with an object it is given, the function's source. Nothing here
changes upstream state.
"""

from __future__ import annotations

import importlib
import inspect
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = [
    "ASSUMPTIONS",
    "Assumption",
    "Broken",
    "check",
    "forget",
    "holds",
]

log = logging.getLogger("captcha_tasks.worker.celery_internals")


class Broken(Exception):  # a check's answer: caught by holds(), shown by the contract tests
    """An assumption about an upstream internal does not hold; the message names it."""


@dataclass(frozen=True)
class Assumption:
    """One thing the seam relies on that no public API promises."""

    #: Short name, used by :func:`holds` and in the log line.
    name: str
    #: What is relied on, in a sentence.
    relies_on: str
    #: The public path the worker takes when it does not hold.
    fallback: str
    #: Upstream issue or release that would let the touch point go.
    upstream: str
    #: Raises :class:`Broken` naming what is missing.
    check: Callable[[], None]


# -- helpers for the checks ------------------------------------------------------------


def _module(name: str) -> Any:
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise Broken(f"module `{name}` no longer imports ({exc})") from None


def _attr(owner: Any, name: str, what: str) -> Any:
    try:
        return getattr(owner, name)
    except AttributeError:
        raise Broken(f"{what} no longer has `{name}`") from None


def _has(owner: Any, names: str, what: str) -> None:
    for name in names.split():
        _attr(owner, name, what)


def _parameters(function: Any, names: str, what: str) -> None:
    """``function`` takes each of ``names`` (by name, or through ``**kwargs``)."""
    try:
        params = inspect.signature(function).parameters
    except (TypeError, ValueError):
        raise Broken(f"{what} has no signature to inspect") from None
    takes_kwargs = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    for name in names.split():
        if name == "**":
            if not takes_kwargs:
                raise Broken(f"{what} no longer takes **kwargs")
        elif name not in params and not takes_kwargs:
            raise Broken(f"{what} no longer takes `{name}`")


def _source_mentions(function: Any, text: str, what: str) -> None:
    try:
        source = inspect.getsource(function)
    except (OSError, TypeError):
        raise Broken(f"the source of {what} cannot be read") from None
    if text not in source:
        raise Broken(f"{what} no longer reads `{text}`")


# -- the checks ------------------------------------------------------------------------


def _kombu_redis_publish() -> None:
    redis = _module("kombu.transport.redis")
    virtual = _module("kombu.transport.virtual.base")
    channel = _attr(redis, "Channel", "kombu.transport.redis")
    what = "kombu's Redis channel"
    _parameters(_attr(channel, "_put", what), "queue message **", f"{what}'s `_put`")
    _has(channel, "_q_for_pri _get_message_priority priority_steps", what)
    _has(channel, "unacked_key unacked_index_key ack_emulation", what)
    _has(channel, "conn_or_acquire _create_client", what)
    qos = _attr(redis, "QoS", "kombu.transport.redis")
    what = "kombu's Redis QoS"
    _parameters(_attr(qos, "append", what), "message delivery_tag", f"{what}'s `append`")
    _parameters(
        _attr(qos, "restore_visible", what), "start num interval", f"{what}'s `restore_visible`"
    )
    _has(qos, "pipe_or_acquire visibility_timeout", what)
    # The sweep reads the timeout through a cached property: a value put in the
    # instance's __dict__ is the one it reads.
    probe = object.__new__(qos)
    probe.__dict__["visibility_timeout"] = 123
    if getattr(probe, "visibility_timeout", None) != 123:
        raise Broken(f"{what}'s `visibility_timeout` is no longer read from the instance")
    _source_mentions(qos.restore_visible, "time()", f"{what}'s `restore_visible`")
    _attr(redis, "time", "kombu.transport.redis")
    message = _attr(virtual, "Message", "kombu.transport.virtual.base")
    _source_mentions(message.__init__, "self._raw", "kombu's virtual `Message`")


def _kombu_registries() -> None:
    connection = _module("kombu.connection")
    for name in ("resolve_aliases", "failover_strategies"):
        if not isinstance(_attr(connection, name, "kombu.connection"), dict):
            raise Broken(f"kombu.connection's `{name}` is no longer a dict")


def _celery_strategy() -> None:
    strategy = _module("celery.worker.strategy")
    default = _attr(strategy, "default", "celery.worker.strategy")
    _parameters(default, "task app consumer", "Celery's default strategy")
    _source_mentions(default, "consumer.on_task_request", "Celery's default strategy")
    state = _module("celery.worker.state")
    _attr(state, "task_ready", "celery.worker.state")
    request = _attr(_module("celery.worker.request"), "Request", "celery.worker.request")
    _has(request, "message request_dict eta acknowledge", "Celery's worker Request")


def _celery_redis_backend() -> None:
    redis = _module("celery.backends.redis")
    backend = _attr(redis, "RedisBackend", "celery.backends.redis")
    what = "Celery's Redis backend"
    _parameters(
        _attr(backend, "_store_result", what),
        "task_id result state traceback request",
        f"{what}'s `_store_result`",
    )
    _parameters(
        _attr(backend, "_get_result_meta", what),
        "result state traceback request",
        f"{what}'s `_get_result_meta`",
    )
    _parameters(
        _attr(backend, "_set_with_state", what), "key value state", f"{what}'s `_set_with_state`"
    )
    _has(backend, "ensure encode get_key_for_task on_task_call client", what)
    _attr(redis, "SentinelBackend", "celery.backends.redis")
    consumer = _attr(redis, "ResultConsumer", "celery.backends.redis")
    what = "Celery's Redis result consumer"
    _has(consumer, "cancel_for start", what)
    _parameters(_attr(consumer, "on_wait_for_pending", what), "result **", f"{what}'s wait hook")
    _parameters(
        _attr(consumer, "drain_events_until", what),
        "p timeout on_interval",
        f"{what}'s `drain_events_until`",
    )
    _source_mentions(consumer.start, "self._pubsub", f"{what}'s `start`")
    _source_mentions(consumer.__init__, "self.subscribed_to", f"{what}'s `__init__`")
    loader = _module("celery.loaders.base")
    _source_mentions(
        _attr(loader, "BaseLoader", "celery.loaders.base").config_from_object,
        "override_backends",
        "Celery's loader",
    )


def _celery_request_reprs() -> None:
    request = _attr(_module("celery.worker.request"), "Request", "celery.worker.request")
    what = "Celery's worker Request"
    for name in ("argsrepr", "kwargsrepr", "request_dict", "task", "args", "kwargs"):
        _source_mentions(_attr(request, name, what).fget, f"self._{name}", f"{what}'s `{name}`")
    _source_mentions(request.info, "self._argsrepr", f"{what}'s `info`")
    _has(request, "send_event info", what)


def _celery_result_cache() -> None:
    result = _attr(_module("celery.result"), "AsyncResult", "celery.result")
    what = "Celery's AsyncResult"
    _parameters(_attr(result, "_maybe_set_cache", what), "meta", f"{what}'s `_maybe_set_cache`")
    _parameters(_attr(result, "maybe_throw", what), "propagate", f"{what}'s `maybe_throw`")


def _celery_trace_log_success() -> None:
    trace = _module("celery.app.trace")
    line = _attr(trace, "LOG_SUCCESS", "celery.app.trace")
    if not isinstance(line, str) or "%(return_value)s" not in line:
        raise Broken("celery.app.trace's `LOG_SUCCESS` no longer shows `%(return_value)s`")
    _source_mentions(trace.build_tracer, "LOG_SUCCESS", "Celery's tracer")


def _celery_trace_exception_info() -> None:
    trace = _module("celery.app.trace")
    einfo = _module("billiard.einfo")
    info = _attr(trace, "ExceptionInfo", "celery.app.trace")
    if info is not _attr(einfo, "ExceptionInfo", "billiard.einfo"):
        raise Broken("celery.app.trace's `ExceptionInfo` is no longer billiard's")
    _attr(einfo, "ExceptionWithTraceback", "billiard.einfo")
    _source_mentions(trace.build_tracer, "ExceptionInfo(internal=True)", "Celery's tracer")


def _celery_sent_event() -> None:
    amqp = _attr(_module("celery.app.amqp"), "AMQP", "celery.app.amqp")
    task_message = _attr(_module("celery.app.amqp"), "task_message", "celery.app.amqp")
    _attr(amqp, "as_task_v2", "Celery's AMQP")
    for field in ("headers", "sent_event"):
        if field not in getattr(task_message, "_fields", ()):
            raise Broken(f"Celery's `task_message` no longer has `{field}`")


def _celery_connection_info() -> None:
    connection = _module("celery.worker.consumer.connection")
    step = _attr(connection, "Connection", "celery.worker.consumer.connection")
    _parameters(_attr(step, "info", "Celery's consumer Connection step"), "c", "its `info`")
    _attr(_module("celery.app.utils"), "filter_hidden_settings", "celery.app.utils")


def _celery_consumer_log() -> None:
    consumer = _module("celery.worker.consumer.consumer")
    retry = _attr(consumer, "CONNECTION_RETRY", "celery.worker.consumer.consumer")
    error = _attr(consumer, "CONNECTION_ERROR", "celery.worker.consumer.consumer")
    if not str(retry).startswith("consumer: Connection to broker lost"):
        raise Broken("Celery's CONNECTION_RETRY no longer starts 'consumer: Connection to'")
    if not str(error).startswith("consumer: Cannot connect to"):
        raise Broken("Celery's CONNECTION_ERROR no longer starts 'consumer: Cannot connect'")
    step = _attr(
        _module("celery.worker.consumer.connection"), "Connection", "celery.worker.consumer"
    )
    _source_mentions(step.start, "'Connected to %s'", "Celery's consumer Connection step")


def _kombu_redis_purge() -> None:
    virtual = _module("kombu.transport.virtual.base")
    channel = _attr(virtual, "Channel", "kombu.transport.virtual.base")
    _source_mentions(
        _attr(channel, "queue_purge", "kombu's virtual Channel"),
        "self._purge(",
        "kombu's `queue_purge`",
    )
    redis_channel = _attr(_module("kombu.transport.redis"), "Channel", "kombu.transport.redis")
    _parameters(_attr(redis_channel, "_purge", "kombu's Redis Channel"), "queue", "its `_purge`")


def _celery_revoke_command() -> None:
    control = _module("celery.worker.control")
    panel = _attr(control, "Panel", "celery.worker.control")
    handlers = _attr(panel, "data", "Celery's control Panel")
    if not isinstance(handlers, dict) or not callable(handlers.get("revoke")):
        raise Broken("Celery's control Panel no longer keeps its `revoke` handler in `data`")
    _parameters(handlers["revoke"], "state task_id terminate signal", "Celery's `revoke` handler")
    revoked = _attr(_module("celery.worker.state"), "revoked", "celery.worker.state")
    if not callable(getattr(revoked, "update", None)):
        raise Broken("celery.worker.state.revoked is no longer a set of ids")
    pidbox = _attr(_module("celery.worker.pidbox"), "Pidbox", "celery.worker.pidbox")
    _source_mentions(pidbox.__init__, "Panel.data", "Celery's Pidbox")


#: Every assumption of the seam, by name.
ASSUMPTIONS: dict[str, Assumption] = {
    a.name: a
    for a in (
        Assumption(
            "kombu-redis-publish",
            "kombu's Redis channel publishes through `_put(queue, message, **kwargs)`, names "
            "priority queues with `_q_for_pri`, and records unacknowledged messages in "
            "`unacked`/`unacked_index` from `Message._raw`",
            "kombu's own Redis transport (a task message taken by a worker SIGKILLed "
            "before it recorded it can be lost)",
            "celery/kombu#305, celery/celery#7950",
            _kombu_redis_publish,
        ),
        Assumption(
            "kombu-registries",
            "kombu.connection's `resolve_aliases` and `failover_strategies` are dicts kombu "
            "reads by name",
            "the broker URL shown under its transport's path; a sentinel:// list fails "
            "over with kombu's round robin",
            "celery/kombu#357",
            _kombu_registries,
        ),
        Assumption(
            "celery-strategy",
            "Celery's default execution strategy hands each ready request to "
            "`consumer.on_task_request`, and `celery.worker.state.task_ready` ends a request",
            "solves are admitted in the pool, as any task runs",
            "celery/celery#8337",
            _celery_strategy,
        ),
        Assumption(
            "celery-redis-backend",
            "Celery's Redis backend stores every state through `_store_result` / "
            "`_set_with_state`, and its result consumer keeps `_pubsub` and `subscribed_to`",
            "Celery's own Redis result backend (a redelivered task's STARTED can replace "
            "a FAILURE; get() of a finished task can wait up to a second)",
            "celery/celery#6090 (guards SUCCESS only), celery/celery#7052, "
            "celery/celery#10477 (fixed by #10497, after 5.6.3)",
            _celery_redis_backend,
        ),
        Assumption(
            "celery-request-reprs",
            "Celery's worker Request keeps its reprs in `_argsrepr`/`_kwargsrepr`, read by "
            "`info()` and its events, and its task and arguments in `_task`/`_args`/`_kwargs`",
            "the worker shows the reprs the sender computed (redacted for every call made "
            "through captcha_tasks, not for another client's send_task)",
            "celery/celery#6595 (a task_args_repr_function setting)",
            _celery_request_reprs,
        ),
        Assumption(
            "celery-result-cache",
            "Celery's AsyncResult takes a stored meta through `_maybe_set_cache(meta)`",
            "the meta is read through the backend's public decoding (no remote traceback)",
            "none: would need a public `AsyncResult.from_meta`",
            _celery_result_cache,
        ),
        Assumption(
            "celery-log-success",
            "Celery's tracer logs a task's success with `celery.app.trace.LOG_SUCCESS`, a "
            "format that shows `%(return_value)s`",
            "a filter on Celery's tracer logger hides the return value of every success line",
            "none: would need a setting for the success line",
            _celery_trace_log_success,
        ),
        Assumption(
            "celery-exception-info",
            "Celery's tracer records an ending exception through the module global "
            "`celery.app.trace.ExceptionInfo` (billiard's)",
            "Celery's own record of `Ignore` (its traceback formatted and pickled: slower "
            "admissions in the pool)",
            "none: would need Ignore to skip the traceback",
            _celery_trace_exception_info,
        ),
        Assumption(
            "celery-sent-event",
            "Celery's `AMQP.as_task_v2` returns a `task_message` whose `sent_event` it sends",
            "task-sent events carry the task's real name, not the name it was sent as",
            "celery/celery#4347",
            _celery_sent_event,
        ),
        Assumption(
            "celery-consumer-log",
            "Celery's consumer logs a lost broker and each failed reconnection with its "
            "`CONNECTION_RETRY` and `CONNECTION_ERROR` texts, and 'Connected to' when back",
            "Celery's own lines: a warning when the connection is lost and an error at each "
            "failed reconnection, besides the worker's one outage report",
            "none: would need a signal on connection loss and recovery",
            _celery_consumer_log,
        ),
        Assumption(
            "kombu-redis-purge",
            "kombu's `queue_purge` (`celery purge`, `app.control.purge()`) empties a queue "
            "through its channel's `_purge(queue)`",
            "a purge empties the broker's queue only: `captcha-tasks purge` ends the solves "
            "waiting for a thread",
            "none: kombu has no hook around a purge",
            _kombu_redis_purge,
        ),
        Assumption(
            "celery-revoke-command",
            "Celery's workers answer remote-control commands from `Panel.data`, the dict "
            "their Pidbox hands its mailbox, where `revoke(state, task_id, terminate, "
            "signal)` is kept under its name, and flags ids in `celery.worker.state.revoked`",
            "`revoke()` reaches only what Celery itself holds: a solve already admitted runs "
            "on (`captcha-tasks purge` ends every solve waiting for a thread)",
            "none: would need a signal when a worker receives a revoke",
            _celery_revoke_command,
        ),
        Assumption(
            "celery-connection-info",
            "Celery's consumer Connection step answers `inspect stats` through `info(c)`",
            "`inspect stats` and Flower show the broker entry as Celery builds it",
            "celery/celery#10484 (fixed by #10485, after 5.6.3, for `alternates` only)",
            _celery_connection_info,
        ),
    )
}

_answers: dict[str, bool] = {}
_lock = threading.Lock()


def check(name: str) -> None:
    """Run the named assumption's check: raises :class:`Broken` if it does not hold."""
    ASSUMPTIONS[name].check()


def holds(name: str) -> bool:
    """Whether the named assumption holds here; the first False is logged, once."""
    answer = _answers.get(name)
    if answer is not None:
        return answer
    with _lock:
        answer = _answers.get(name)
        if answer is None:
            assumption = ASSUMPTIONS[name]
            try:
                assumption.check()
            except Broken as exc:
                answer = False
                log.warning(
                    "captcha_tasks: %s (on %s): falling back to %s. Upstream: %s.",
                    exc,
                    _versions(),
                    assumption.fallback,
                    assumption.upstream,
                )
            else:
                answer = True
            _answers[name] = answer
    return answer


def forget() -> None:
    """Forget every answer (tests that break an assumption on purpose)."""
    with _lock:
        _answers.clear()


def _versions() -> str:
    from .versions import installed

    return ", ".join(f"{name} {version}" for name, version in installed().items())
