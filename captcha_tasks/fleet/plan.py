"""What a rollout is asked to do and what it reports: its options (with
``--drain-timeout auto``), one report per worker, and the summary of the run."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from ..provider import CAPTCHA_CLASSES

__all__ = [
    "DRAIN_CAP",
    "DRAIN_CEILINGS",
    "DRAIN_MARGIN",
    "RolloutOptions",
    "WorkerReport",
    "auto_drain_timeout",
    "summarize",
    "summary_json",
]

#: Seconds a solve of each kind may take at the provider (its
#: :class:`~captcha_tasks.provider.Timing`'s ``drain_ceiling``), used for
#: ``--drain-timeout auto`` before any solve was seen. Its keys are also the kinds whose
#: recent solve times ``auto`` reads.
DRAIN_CEILINGS: dict[str, float] = {
    kind: cls.timing.drain_ceiling for kind, cls in CAPTCHA_CLASSES.items()
}
#: ``auto``: the slowest type seen recently plus this margin (network, poll interval).
DRAIN_MARGIN = 10.0
#: ``auto`` never waits longer than this (seed 003: reCAPTCHA v2 fleets, 120 s).
DRAIN_CAP = 120.0


def auto_drain_timeout(recent_ready: dict[str, list[float]]) -> tuple[float, str]:
    """``--drain-timeout auto``: the slowest captcha type seen recently plus a margin.

    ``recent_ready``: per type, recent seconds from submit to answer (the engine's
    learning samples). Types never seen count with their published ceiling only
    when nothing at all was seen (then the slowest ceiling, reCAPTCHA v2: 120 s).
    """
    seen = {kind: max(values) for kind, values in recent_ready.items() if values}
    if not seen:
        return DRAIN_CAP, (
            f"auto: no recent solves, the reCAPTCHA v2 ceiling "
            f"({DRAIN_CEILINGS['recaptcha_v2']:g} s) with margin"
        )
    kind, slowest = max(seen.items(), key=lambda item: item[1])
    value = round(min(DRAIN_CAP, slowest + DRAIN_MARGIN), 1)
    return value, f"auto: slowest recent type {kind} {slowest:.1f} s + {DRAIN_MARGIN:g} s margin"


@dataclass(frozen=True)
class RolloutOptions:
    to_version: str
    max_unavailable: int = 1
    drain_timeout: float = 120.0
    drain_timeout_source: str = "given"
    health_check: str = "balance"
    abort_threshold: float = 0.25
    #: Seconds to wait for a restarted worker to answer with the new version.
    start_timeout: float = 120.0
    poll_interval: float = 0.25
    #: Restrict to these workers (default: every worker that answers).
    workers: tuple[str, ...] = ()


@dataclass
class WorkerReport:
    worker: str
    from_version: str
    to_version: str
    result: str = "pending"  # updated | skipped | failed | rolled_back | unreachable | untouched
    queues: list[str] = field(default_factory=list)
    drain_seconds: float | None = None
    left_at_restart: dict[str, int] | None = None
    restart_seconds: float | None = None
    start_seconds: float | None = None
    health: dict[str, Any] | None = None
    error: str | None = None
    rollback: dict[str, Any] | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            **asdict(self),
            "drain_seconds": _round(self.drain_seconds),
            "restart_seconds": _round(self.restart_seconds),
            "start_seconds": _round(self.start_seconds),
        }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 2)


def summarize(
    status: str,
    options: RolloutOptions,
    reports: list[WorkerReport],
    *,
    failures: int,
    seconds: float,
    error: str | None = None,
) -> dict[str, Any]:
    """The summary of a run (``rollout --json`` prints it): the workers by result, the
    options it ran with, and every worker's report in rollout order."""
    details = [report.as_dict() for report in reports]
    by_result: dict[str, list[str]] = {}
    for report in details:
        by_result.setdefault(report["result"], []).append(report["worker"])
    return {
        "status": status,
        "to_version": options.to_version,
        "workers": len(details),
        "updated": by_result.get("updated", []) + by_result.get("skipped", []),
        "failed": by_result.get("failed", []),
        "unreachable": by_result.get("unreachable", []),
        "rolled_back": [r["worker"] for r in details if r["rollback"] is not None],
        "failures": failures,
        "abort_threshold": options.abort_threshold,
        "max_unavailable": options.max_unavailable,
        "drain_timeout": options.drain_timeout,
        "drain_timeout_source": options.drain_timeout_source,
        "health_check": options.health_check,
        "seconds": round(seconds, 2),
        "error": error,
        "details": details,
    }


def summary_json(summary: dict[str, Any]) -> str:
    return json.dumps(summary, indent=2, sort_keys=False)
