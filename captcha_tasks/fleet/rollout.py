"""Rolling updates of a Celery fleet: drain, restart, verify, resume; roll back on failure.

For each batch of ``max_unavailable`` workers:

1. **stop consuming**: ``cancel_consumer`` for each queue the worker consumes (not its
   direct queue, which the health gate uses);
2. **drain**: wait until its active, reserved and scheduled tasks are zero, or the
   drain timeout; what is left is reported (``task_acks_late``: requeued, not lost);
3. **restart**: run the operator's command with the new version;
4. **verify**: wait until the worker answers ``fleet_version`` with the new version,
   stop its consuming again (a fresh worker consumes at once), run the health gate on
   it alone (:mod:`.health`);
5. **resume**: ``add_consumer`` for the queues it consumed before.

A failed gate (restart command fails, the new version is not reported in time, the
health check fails) is a verdict on the release: the rollout stops and rolls back
**every** worker it already updated, the failing one first, then newest first, not
only the failing one: two versions side by side fail intermittently.

A worker that cannot be taken out of service at all (it does not answer the control
commands: busy, partitioned, gone) says nothing about the release. It is left
untouched on its old version, reported ``unreachable``, and the rollout goes on while
such workers are at most ``abort_threshold`` of the fleet; beyond it the rollout
aborts and rolls back every updated worker as above. ``abort_threshold=0`` aborts on
the first one.

With this project a worker holds no solves (they live in Redis and any engine
continues them), so a drain only waits for the milliseconds an admission takes and
for non-solve tasks (pages, reports); the timeout is a ceiling, not a wait.

The control plane and the restart command are interfaces (:class:`ControlPlane`,
:data:`Restarter`, in :mod:`.plane`), so the logic tests against fakes; what a rollout is
asked and what it reports (options, per-worker reports, the summary) is :mod:`.plan`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from .plan import (
    DRAIN_CAP,
    DRAIN_CEILINGS,
    DRAIN_MARGIN,
    RolloutOptions,
    WorkerReport,
    auto_drain_timeout,
    summarize,
    summary_json,
)
from .plane import ControlPlane, Pending, Restarter, RestartOutcome, shell_restarter

# What a caller of a rollout needs of .plan and .plane is importable from here too.
__all__ = [
    "DRAIN_CAP",
    "DRAIN_CEILINGS",
    "DRAIN_MARGIN",
    "ControlPlane",
    "GateFailed",
    "Pending",
    "RestartOutcome",
    "Restarter",
    "Rollout",
    "RolloutOptions",
    "WorkerReport",
    "auto_drain_timeout",
    "shell_restarter",
    "summary_json",
]


class GateFailed(Exception):
    """A step of one worker's update failed (the message says which and why)."""


class Rollout:
    """One rolling update (see the module docstring). ``run()`` returns the summary."""

    def __init__(
        self,
        plane: ControlPlane,
        restart: Restarter,
        options: RolloutOptions,
        *,
        echo: Callable[[str], None] = print,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if options.max_unavailable < 1:
            raise ValueError("max_unavailable must be at least 1")
        if not 0.0 <= options.abort_threshold <= 1.0:
            raise ValueError("abort_threshold must be between 0 and 1")
        self.plane = plane
        self.restart = restart
        self.options = options
        self.echo = echo
        self.clock = clock
        self.sleep = sleep
        self.reports: dict[str, WorkerReport] = {}
        self._order: list[str] = []
        #: Workers running the new version (gate passed or not), oldest first.
        self._updated: list[str] = []
        self.failures = 0
        self.unreachable = 0

    # -- the plan --------------------------------------------------------------------

    def run(self) -> dict[str, Any]:
        started = self.clock()
        opts = self.options
        found = self.plane.versions()
        wanted = list(opts.workers) or sorted(found)
        missing = [w for w in wanted if w not in found]
        if missing or not wanted:
            why = f"not answering: {', '.join(missing)}" if missing else "no worker answers"
            self.echo(f"rollout: {why}; nothing done")
            return self._summary("failed", started, error=why)
        self._order = wanted
        for worker in wanted:
            self.reports[worker] = WorkerReport(worker, found[worker], opts.to_version)
        total = len(wanted)
        self.echo(
            f"rollout: {total} worker(s) to {opts.to_version}, {opts.max_unavailable} at a "
            f"time, drain timeout {opts.drain_timeout:g} s ({opts.drain_timeout_source}), "
            f"health check {opts.health_check}"
        )
        allowed_unreachable = opts.abort_threshold * total
        for start in range(0, total, opts.max_unavailable):
            batch = [w for w in wanted[start : start + opts.max_unavailable]]
            todo = []
            for worker in batch:
                if found[worker] == opts.to_version:
                    self.reports[worker].result = "skipped"
                    self._say(worker, f"already on {opts.to_version}, skipped")
                else:
                    todo.append(worker)
            failed, unreachable = self._update_batch(todo)
            self.failures += len(failed) + len(unreachable)
            self.unreachable += len(unreachable)
            if failed:
                self.echo(
                    f"rollout: gate failed on {', '.join(failed)}; rolling back "
                    f"{len(self._updated)} updated worker(s)"
                )
                return self._abort(started)
            if self.unreachable > allowed_unreachable:
                self.echo(
                    f"rollout: {self.unreachable} unreachable worker(s) of {total} is over "
                    f"the abort threshold ({opts.abort_threshold:g}); rolling back "
                    f"{len(self._updated)} updated worker(s)"
                )
                return self._abort(started)
        status = "completed" if self.failures == 0 else "completed_with_failures"
        return self._summary(status, started)

    def _abort(self, started: float) -> dict[str, Any]:
        """Roll back every updated worker (the failing ones first), then stop."""
        failing = [w for w in self._updated if self.reports[w].result == "failed"]
        others = [w for w in reversed(self._updated) if w not in failing]
        for worker in failing + others:
            self._roll_back(worker)
        for report in self.reports.values():
            if report.result == "pending":
                report.result = "untouched"
        return self._summary("rolled_back", started)

    def _update_batch(self, batch: Sequence[str]) -> tuple[list[str], list[str]]:
        """Update ``batch`` together; the workers whose gate failed, and the unreachable."""
        failed: list[str] = []
        unreachable: list[str] = []
        live: list[str] = []
        for worker in batch:
            try:
                self.reports[worker].queues = self._stop_consuming(worker)
                live.append(worker)
            except GateFailed as exc:
                report = self.reports[worker]
                report.result = "unreachable"
                report.error = str(exc)
                self._say(worker, f"UNREACHABLE: {exc}; left on {report.from_version}")
                unreachable.append(worker)
        self._drain(live)
        for worker in live:
            report = self.reports[worker]
            if failed:  # the release is bad: do not restart the rest of the batch
                self._resume(worker, report.queues)
                self._say(worker, f"not restarted, consuming {', '.join(report.queues)} again")
                continue
            # In the list before the command runs: a failed command may have changed something.
            self._updated.append(worker)
            try:
                self._restart(worker, self.options.to_version)
                self._verify(worker)
            except GateFailed as exc:
                self._fail(worker, str(exc))
                failed.append(worker)
                continue
            self._resume(worker, report.queues)
            report.result = "updated"
            self._say(
                worker,
                f"updated to {self.options.to_version}, consuming "
                f"{', '.join(report.queues) or '(no queues)'}",
            )
        return failed, unreachable

    # -- steps -----------------------------------------------------------------------

    def _stop_consuming(self, worker: str) -> list[str]:
        queues = self.plane.consuming(worker)
        if queues is None:
            raise GateFailed("does not answer active_queues")
        for queue in queues:
            self.plane.cancel_consumer(worker, queue)
        self._say(worker, f"stopped consuming {', '.join(queues) or '(no queues)'}")
        return queues

    def _drain(self, workers: Sequence[str]) -> None:
        """Wait for every worker of ``workers`` to hold nothing, up to the drain timeout."""
        started = self.clock()
        deadline = started + self.options.drain_timeout
        waiting = list(workers)
        last: dict[str, Pending | None] = {}
        while waiting:
            for worker in list(waiting):
                pending = self.plane.pending(worker)
                last[worker] = pending
                if pending is not None and pending.total == 0:
                    waiting.remove(worker)
                    report = self.reports[worker]
                    report.drain_seconds = self.clock() - started
                    report.left_at_restart = Pending().as_dict()
                    self._say(worker, f"drained in {report.drain_seconds:.1f} s")
            if not waiting or self.clock() >= deadline:
                break
            self.sleep(self.options.poll_interval)
        for worker in waiting:
            report = self.reports[worker]
            report.drain_seconds = self.clock() - started
            pending = last.get(worker)
            if pending is None:
                report.left_at_restart = None
                self._say(
                    worker,
                    f"drain timeout after {report.drain_seconds:.1f} s: "
                    "no answer; restarting anyway",
                )
                continue
            report.left_at_restart = pending.as_dict()
            self._say(
                worker,
                f"drain timeout after {report.drain_seconds:.1f} s with "
                f"{pending.active} active, {pending.reserved} reserved, "
                f"{pending.scheduled} scheduled, {pending.solve_calls} provider calls "
                "left: late acks requeue the tasks, the engine's stop waits for its calls, "
                "none is lost",
            )

    def _restart(self, worker: str, version: str) -> float:
        outcome = self.restart(worker, version)
        report = self.reports[worker]
        if version == self.options.to_version:
            report.restart_seconds = outcome.seconds
        if not outcome.ok:
            raise GateFailed(f"restart to {version} failed: {outcome.detail}")
        self._say(worker, f"restarted with {version} in {outcome.seconds:.1f} s")
        return outcome.seconds

    def _wait_version(self, worker: str, version: str) -> float:
        started = self.clock()
        deadline = started + self.options.start_timeout
        seen: str | None = None
        while True:
            seen = self.plane.version(worker)
            if seen == version:
                return self.clock() - started
            if self.clock() >= deadline:
                raise GateFailed(
                    f"did not report version {version} within "
                    f"{self.options.start_timeout:g} s (reports {seen})"
                )
            self.sleep(self.options.poll_interval)

    def _verify(self, worker: str) -> None:
        report = self.reports[worker]
        report.start_seconds = self._wait_version(worker, self.options.to_version)
        # A fresh worker consumes at once: keep it out of the pool until it passes.
        queues = self.plane.consuming(worker) or []
        for queue in queues:
            self.plane.cancel_consumer(worker, queue)
        health = self.plane.health(worker, self.options.health_check, self.options.to_version)
        report.health = health.as_dict()
        if not health.ok:
            raise GateFailed(f"health check {health.check} failed: {health.detail}")
        self._say(
            worker,
            f"answers with {self.options.to_version} after "
            f"{report.start_seconds:.1f} s; health {health.check} ok in "
            f"{health.seconds:.1f} s ({health.detail})",
        )

    def _resume(self, worker: str, queues: Sequence[str]) -> None:
        for queue in queues:
            self.plane.add_consumer(worker, queue)

    def _fail(self, worker: str, why: str) -> None:
        report = self.reports[worker]
        report.result = "failed"
        report.error = why
        self._say(worker, f"FAILED: {why}")

    def _roll_back(self, worker: str) -> None:
        """Put ``worker`` back on its old version (drained first if it runs the new one)."""
        report = self.reports[worker]
        old = report.from_version
        started = self.clock()
        detail: dict[str, Any] = {"to_version": old}
        try:
            queues = self.plane.consuming(worker) or []
            for queue in queues:
                self.plane.cancel_consumer(worker, queue)
            before = report.drain_seconds, report.left_at_restart
            self._drain([worker])
            detail["left_at_restart"] = report.left_at_restart
            report.drain_seconds, report.left_at_restart = before
            self._restart(worker, old)
            self._wait_version(worker, old)
            health = self.plane.health(worker, self.options.health_check, old)
            detail["health"] = health.as_dict()
            self._resume(worker, report.queues or queues)
            detail["ok"] = True
            self._say(
                worker,
                f"rolled back to {old} in {self.clock() - started:.1f} s "
                f"(health {'ok' if health.ok else 'FAILED: ' + health.detail})",
            )
        except GateFailed as exc:
            detail["ok"] = False
            detail["error"] = str(exc)
            self._say(worker, f"ROLLBACK FAILED: {exc}")
        detail["seconds"] = round(self.clock() - started, 2)
        report.rollback = detail
        if report.result != "failed":
            report.result = "rolled_back"
        if worker in self._updated:
            self._updated.remove(worker)

    # -- output ----------------------------------------------------------------------

    def _say(self, worker: str, message: str) -> None:
        index = self._order.index(worker) + 1 if worker in self._order else 0
        self.echo(f"[{index}/{len(self._order)}] {worker} {message}")

    def _summary(self, status: str, started: float, *, error: str | None = None) -> dict[str, Any]:
        reports = [self.reports[w] for w in self._order]
        summary = summarize(
            status,
            self.options,
            reports,
            failures=self.failures,
            seconds=self.clock() - started,
            error=error,
        )
        on_target = len(summary["updated"])
        self.echo(
            f"rollout: {status} in {summary['seconds']:.1f} s: {on_target} on "
            f"{self.options.to_version}, {len(summary['failed'])} failed, "
            f"{len(summary['unreachable'])} unreachable, "
            f"{len(summary['rolled_back'])} rolled back"
        )
        return summary
