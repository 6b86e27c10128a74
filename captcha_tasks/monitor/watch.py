"""A live results collector fed by Celery task events (``captcha-tasks watch``).

Workers send task events (``worker_send_task_events``), and the solve engine sends
``task-succeeded`` / ``task-failed`` itself for the solves it ends.
:class:`ResultsCollector` counts them with no broker in sight (feed it event dicts);
:func:`captcha_tasks.cli.events.consume` wires it to an ``app.events.Receiver``.

Events carry secrets: ``task-received`` has the task's arguments and a pooled
token's ``task-succeeded`` has the token in its ``result`` repr. So nothing from an
event is shown as such: only the task id and name, and a few fields picked out by
strict patterns (captcha type, ``source``, ``provider``: the configured name, the error code).
"""

from __future__ import annotations

import dataclasses
import json
import re
import time
from collections import Counter, OrderedDict, deque
from collections.abc import Callable, Mapping
from typing import Any

from ..state.clock import local_time

__all__ = [
    "EVENT_TYPES",
    "Result",
    "ResultsCollector",
    "error_code",
    "render",
    "task_type",
]

#: Event types the collector listens to.
EVENT_TYPES = (
    "task-sent",
    "task-received",
    "task-started",
    "task-succeeded",
    "task-failed",
    "task-retried",
    "task-revoked",
    "worker-online",
    "worker-heartbeat",
    "worker-offline",
)
#: A worker counts as alive this long after its last event (heartbeats come every 2 s).
WORKER_ALIVE_SECONDS = 10.0

_CODE_KWARG = re.compile(r"\bcode=['\"]([A-Za-z][A-Za-z0-9_]{1,63})['\"]")
# ``SomeError('ERROR_CAPTCHA_UNSOLVABLE: ...')``: a message that starts with the code.
_CODE_LEADING = re.compile(r"^[A-Za-z_][\w.]*\(\s*['\"]([A-Z][A-Z0-9_]{2,63})(?::|['\"])")
_EXC_CLASS = re.compile(r"^(?:[A-Za-z_]\w*\.)*([A-Za-z_]\w{0,63})(?:\(|$)")
_SOURCE = re.compile(r"['\"]source['\"]:\s*['\"]([a-z][a-z0-9_]{0,15})['\"]")
# The configured provider's name: ``main``, ``backup``, ``default``. A result names it
# ``provider`` next to its ``protocol``; a 0.2 worker's, ``provider_name`` (its
# ``provider`` was the protocol).
_PROVIDER = re.compile(r"['\"]provider['\"]:\s*['\"]([a-z0-9_]{1,32})['\"]")
_PROTOCOL = re.compile(r"['\"]protocol['\"]:")
_PROVIDER_NAME = re.compile(r"['\"]provider_name['\"]:\s*['\"]([a-z0-9_]{1,32})['\"]")
_RESULT_TYPE = re.compile(r"['\"]type['\"]:\s*['\"]([a-z][a-z0-9_]{0,31})['\"]")
_TYPE = re.compile(r"^[a-z][a-z0-9_]{0,31}$")


def task_type(name: str) -> str:
    """``captcha_tasks.solve_recaptcha_v2`` -> ``recaptcha_v2``; ``captcha_tasks.fetch_page``
    -> ``fetch_page``: the last part of the task name, without ``solve_``."""
    short = name.rsplit(".", 1)[-1]
    return short.removeprefix("solve_") or short


def error_code(exception: str) -> str:
    """The error code in an exception repr: ``code='...'`` (our errors), else a message
    that starts with one (``Err('ERROR_X: ...')``), else the exception's class name."""
    for pattern in (_CODE_KWARG, _CODE_LEADING, _EXC_CLASS):
        found = pattern.search(exception.strip())
        if found:
            return found.group(1)
    return "UNKNOWN"


@dataclasses.dataclass(frozen=True)
class Result:
    """One finished task, as ``watch --json`` prints it (one JSON object per line)."""

    task_id: str
    name: str | None
    type: str
    state: str  # SUCCESS, FAILURE or REVOKED
    code: str | None
    runtime: float | None
    timestamp: float
    source: str | None
    #: The configured provider that solved it (results of solves at a provider).
    provider_name: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.as_dict(), separators=(",", ":"))


@dataclasses.dataclass
class TypeCounts:
    solved: int = 0
    failed: int = 0
    runtime_total: float = 0.0
    runtime_count: int = 0

    @property
    def avg_runtime(self) -> float | None:
        return self.runtime_total / self.runtime_count if self.runtime_count else None


def _remember(table: OrderedDict[str, Any], key: str, value: Any, limit: int) -> None:
    table[key] = value
    table.move_to_end(key)
    while len(table) > limit:
        table.popitem(last=False)


class ResultsCollector:
    """Counts finished tasks from Celery event dicts: solved, failed, a per-minute rate
    over a sliding ``window`` of seconds, by task type, by error code and by source.

    ``type_lookup(task_id)`` names the type of a task whose name no event told (a
    solve ended by the engine of a watch started after it was received); ``clock`` is
    when an event arrived (injectable for tests). A task is counted once even if its
    end is reported twice; at most ``max_tracked`` task ids are remembered.
    """

    def __init__(
        self,
        *,
        window: float = 60.0,
        clock: Callable[[], float] = local_time,
        type_lookup: Callable[[str], str | None] | None = None,
        max_tracked: int = 10_000,
    ) -> None:
        self.window = float(window)
        self._clock = clock
        self._type_lookup = type_lookup
        self._max = max_tracked
        self.started_at = clock()
        self.solved = 0
        self.failed = 0
        self.retried = 0
        self.by_type: dict[str, TypeCounts] = {}
        self.by_code: Counter[str] = Counter()
        self.by_source: Counter[str] = Counter()
        self.by_provider: Counter[str] = Counter()
        self.recent: deque[Result] = deque(maxlen=8)
        self._workers: dict[str, float] = {}
        self._names: OrderedDict[str, str] = OrderedDict()
        self._open: OrderedDict[str, None] = OrderedDict()
        self._finished: OrderedDict[str, None] = OrderedDict()
        self._ends: deque[tuple[float, bool]] = deque()

    # -- feeding ------------------------------------------------------------------------

    def feed(self, event: Mapping[str, Any]) -> Result | None:
        """Account for one event; the :class:`Result` if it ended a task, else None."""
        kind = str(event.get("type", ""))
        now = self._clock()
        hostname = event.get("hostname")
        if kind.startswith("worker-"):
            if isinstance(hostname, str) and hostname:
                if kind == "worker-offline":
                    self._workers.pop(hostname, None)
                else:
                    self._workers[hostname] = now
            return None
        if kind != "task-sent" and isinstance(hostname, str) and hostname:
            self._workers[hostname] = now  # a task event proves its worker alive too
        task_id = event.get("uuid")
        if not isinstance(task_id, str) or not task_id:
            return None
        name = event.get("name")
        # The first name wins: a task that replaces itself keeps its id, not its name.
        if isinstance(name, str) and name and task_id not in self._names:
            _remember(self._names, task_id, name[:200], self._max)
        if kind in ("task-received", "task-started") and task_id not in self._finished:
            _remember(self._open, task_id, None, self._max)
        elif kind == "task-retried":
            self.retried += 1
        elif kind in ("task-succeeded", "task-failed", "task-revoked"):
            return self._finish(kind, task_id, event, now)
        return None

    def _finish(
        self, kind: str, task_id: str, event: Mapping[str, Any], now: float
    ) -> Result | None:
        if task_id in self._finished:
            return None
        _remember(self._finished, task_id, None, self._max)
        self._open.pop(task_id, None)
        ok = kind == "task-succeeded"
        name = self._names.get(task_id)
        source = code = provider_name = None
        text = ""
        if ok:
            raw = event.get("result")
            text = raw if isinstance(raw, str) else repr(raw)
            found = _SOURCE.search(text)
            source = found.group(1) if found else None
            found = _PROVIDER_NAME.search(text) or (
                _PROVIDER.search(text) if _PROTOCOL.search(text) else None
            )
            provider_name = found.group(1) if found else None
        elif kind == "task-failed":
            code = error_code(str(event.get("exception") or ""))
        else:
            code = "REVOKED"
        kind_of_task = self._type_of(task_id, name, text)
        runtime = event.get("runtime")
        timestamp = event.get("timestamp")
        result = Result(
            task_id=task_id,
            name=name,
            type=kind_of_task,
            state="SUCCESS" if ok else "FAILURE" if kind == "task-failed" else "REVOKED",
            code=code,
            runtime=round(float(runtime), 3) if isinstance(runtime, int | float) else None,
            timestamp=round(float(timestamp), 3) if isinstance(timestamp, int | float) else now,
            source=source,
            provider_name=provider_name,
        )
        counts = self.by_type.setdefault(kind_of_task, TypeCounts())
        if ok:
            self.solved += 1
            counts.solved += 1
            if result.runtime is not None:
                counts.runtime_total += result.runtime
                counts.runtime_count += 1
            self.by_source[source or "-"] += 1
            if provider_name:
                self.by_provider[provider_name] += 1
        else:
            self.failed += 1
            counts.failed += 1
            self.by_code[code or "UNKNOWN"] += 1
        self._ends.append((now, ok))
        self.recent.append(result)
        return result

    def _type_of(self, task_id: str, name: str | None, result_text: str) -> str:
        if name:
            return task_type(name)
        found = _RESULT_TYPE.search(result_text)
        if found:
            return found.group(1)
        if self._type_lookup is not None:
            looked_up = self._type_lookup(task_id)
            if looked_up and _TYPE.match(looked_up):
                return looked_up
        return "unknown"

    # -- reading ------------------------------------------------------------------------

    @property
    def finished(self) -> int:
        return self.solved + self.failed

    @property
    def in_progress(self) -> int:
        """Tasks received or started and not ended yet (solves waiting for a thread or
        at the provider included)."""
        return len(self._open)

    def rate_per_minute(self, now: float | None = None, *, ok: bool | None = None) -> float:
        """Finished tasks per minute over the last ``window`` seconds (over the time
        watched so far while that is shorter); ``ok`` counts only solved (True) or
        failed (False) ones."""
        now = self._clock() if now is None else now
        while self._ends and self._ends[0][0] <= now - self.window:
            self._ends.popleft()
        span = max(1.0, min(self.window, now - self.started_at))
        count = sum(1 for _, good in self._ends if ok is None or good == ok)
        return count * 60.0 / span

    def workers(self, now: float | None = None) -> list[str]:
        """Workers heard from in the last :data:`WORKER_ALIVE_SECONDS`."""
        now = self._clock() if now is None else now
        return sorted(h for h, seen in self._workers.items() if now - seen <= WORKER_ALIVE_SECONDS)

    def snapshot(self, now: float | None = None) -> dict[str, Any]:
        """The counts as plain data."""
        now = self._clock() if now is None else now
        return {
            "elapsed_s": round(now - self.started_at, 1),
            "solved": self.solved,
            "failed": self.failed,
            "retried": self.retried,
            "in_progress": self.in_progress,
            "per_minute": round(self.rate_per_minute(now), 2),
            "solved_per_minute": round(self.rate_per_minute(now, ok=True), 2),
            "failed_per_minute": round(self.rate_per_minute(now, ok=False), 2),
            "window_s": self.window,
            "by_type": {
                t: {
                    "solved": c.solved,
                    "failed": c.failed,
                    "avg_runtime_s": None if c.avg_runtime is None else round(c.avg_runtime, 3),
                }
                for t, c in sorted(self.by_type.items())
            },
            "by_code": dict(self.by_code.most_common()),
            "by_source": dict(self.by_source.most_common()),
            "by_provider": dict(self.by_provider.most_common()),
            "workers": self.workers(now),
        }


def render(collector: ResultsCollector, *, title: str, now: float | None = None) -> str:
    """The watch screen: totals, rate, by type, by error code, workers, last results."""
    now = local_time() if now is None else now
    snap = collector.snapshot(now)
    elapsed = int(snap["elapsed_s"])
    finished = snap["solved"] + snap["failed"]
    success = f"{100 * snap['solved'] / finished:.1f} %" if finished else "-"
    lines = [
        f"{title}   {time.strftime('%H:%M:%S', time.localtime(now))}   "
        f"up {elapsed // 3600:02d}:{elapsed // 60 % 60:02d}:{elapsed % 60:02d}   (Ctrl-C to stop)",
        "",
        f"solved {snap['solved']:>7}   failed {snap['failed']:>6}   success {success:>7}   "
        f"retried {snap['retried']:>5}   in progress {snap['in_progress']:>5}",
        f"rate   {snap['per_minute']:>7.1f}/min over the last {collector.window:g} s   "
        f"(solved {snap['solved_per_minute']:.1f}/min, failed {snap['failed_per_minute']:.1f}/min)",
        "source " + ("   ".join(f"{k} {v}" for k, v in snap["by_source"].items()) or "-"),
    ]
    if snap["by_provider"]:
        lines.append("solved by " + "   ".join(f"{k} {v}" for k, v in snap["by_provider"].items()))
    lines += [
        "",
        f"{'type':20} {'solved':>7} {'failed':>7} {'avg s':>8}",
    ]
    for kind, counts in snap["by_type"].items():
        avg = "-" if counts["avg_runtime_s"] is None else f"{counts['avg_runtime_s']:.2f}"
        lines.append(f"{kind:20} {counts['solved']:>7} {counts['failed']:>7} {avg:>8}")
    if not snap["by_type"]:
        lines.append("(no task has ended yet)")
    if snap["by_code"]:
        lines += ["", f"{'error code':36} {'count':>7}"]
        lines += [f"{code:36} {n:>7}" for code, n in snap["by_code"].items()]
    workers = snap["workers"]
    lines += ["", f"workers ({len(workers)}): " + (", ".join(workers) or "none heard from yet")]
    if collector.recent:
        lines += ["", "last results"]
        for r in reversed(collector.recent):
            at = time.strftime("%H:%M:%S", time.localtime(r.timestamp))
            runtime = "" if r.runtime is None else f" {r.runtime:.2f} s"
            via = f" via {r.provider_name}" if r.provider_name else ""
            lines.append(
                f"  {at} {r.state:8} {r.type:16} {r.task_id} "
                f"{r.code or r.source or ''}{via}{runtime}"
            )
    return "\n".join(lines)
