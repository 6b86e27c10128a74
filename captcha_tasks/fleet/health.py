"""Health gates of a rolling update, run against one worker alone.

Both send tasks to the worker's direct queue (``worker_direct = True``: every worker
also consumes ``<node name>.dq2``), which a draining worker keeps consuming, so the
gate runs before the worker takes ordinary work again:

- ``balance``: ``captcha_tasks.ping`` (the version the pool's processes run) and
  ``captcha_tasks.get_balance`` (the worker read its key, reached the provider and the
  provider accepted the key). Cheap: no captcha is spent.
- ``solve``: the above, then ``solve_recaptcha_v2`` on a test sitekey admitted by that
  worker. The solve itself is run by whichever engine of the fleet takes it (solves
  are not tied to a worker), so this proves the new version admits and ends a solve
  end to end; ``balance`` is what proves this worker's own key and network.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

__all__ = ["HEALTH_CHECKS", "TEST_SITEKEY", "HealthResult", "RunOnWorker", "run_health_check"]

#: ``run(task_name, worker, timeout, *args)``: run one task on that worker alone (its
#: direct queue) and return its result or raise what it raised; the worker package
#: supplies it (:class:`captcha_tasks.worker.control.CeleryControlPlane`).
RunOnWorker = Callable[..., Any]

HEALTH_CHECKS = ("balance", "solve")
#: Google's public test sitekey: any provider solves it, no site is involved.
TEST_SITEKEY = "6LeIxAcTAAAAAJcZVRqyHh4xTU6Y3WcSz0Ow0dhP"


@dataclass(frozen=True)
class HealthResult:
    ok: bool
    check: str
    detail: str
    version: str | None
    seconds: float

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "seconds": round(self.seconds, 2)}


def _describe(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {text}"[:200]


def run_health_check(
    run: RunOnWorker, worker: str, check: str, *, expected_version: str, timeout: float = 60.0
) -> HealthResult:
    """Gate ``worker``: ``check`` is ``balance`` or ``solve`` (see the module docstring)."""
    if check not in HEALTH_CHECKS:
        raise ValueError(f"unknown health check {check!r}")
    started = time.monotonic()
    version: str | None = None

    def result(ok: bool, detail: str) -> HealthResult:
        return HealthResult(ok, check, detail, version, time.monotonic() - started)

    try:
        pong = run("captcha_tasks.ping", worker, timeout)
        version = str(pong.get("version")) if isinstance(pong, dict) else None
        if version != expected_version:
            return result(False, f"runs version {version}, expected {expected_version}")
        balance = run("captcha_tasks.get_balance", worker, timeout)
        detail = f"balance {balance.get('balance')} ({balance.get('provider')})"
        if check == "solve":
            page = f"https://example.com/captcha-tasks-rollout/{uuid.uuid4().hex}"
            solved = run("captcha_tasks.solve_recaptcha_v2", worker, timeout, TEST_SITEKEY, page)
            detail += (
                f"; solved captcha {solved.get('captcha_id')} in "
                f"{float(solved.get('solve_seconds') or 0):.1f} s"
            )
    except Exception as exc:  # any failure of the gate is a verdict, not a crash
        return result(False, _describe(exc))
    return result(True, detail)
