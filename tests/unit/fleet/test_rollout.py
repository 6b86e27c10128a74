"""The rollout's logic against a fake control plane: batches, gates, rollback, summary."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from captcha_tasks.fleet.health import HealthResult
from captcha_tasks.fleet.rollout import (
    DRAIN_CAP,
    Pending,
    RestartOutcome,
    Rollout,
    RolloutOptions,
    auto_drain_timeout,
    summary_json,
)
from tests.support.clock import ManualClock

WORKERS = ["celery@w1", "celery@w2", "celery@w3", "celery@w4"]


@dataclass
class FakeFleet:
    """Workers with a version, queues consumed and tasks held; records every call."""

    versions_: dict[str, str] = field(default_factory=lambda: dict.fromkeys(WORKERS, "1.0"))
    consuming_: dict[str, set[str]] = field(default_factory=dict)
    held: dict[str, list[Pending]] = field(default_factory=dict)
    broken: dict[str, set[str]] = field(default_factory=dict)  # version -> workers failing
    silent: set[str] = field(default_factory=set)  # workers that answer no control command
    calls: list[tuple[str, ...]] = field(default_factory=list)

    def __post_init__(self) -> None:
        for worker in self.versions_:
            self.consuming_.setdefault(worker, {"celery"})

    # ControlPlane
    def versions(self) -> dict[str, str]:
        return dict(self.versions_)

    def version(self, worker: str) -> str | None:
        return self.versions_.get(worker)

    def consuming(self, worker: str) -> list[str] | None:
        return None if worker in self.silent else sorted(self.consuming_[worker])

    def cancel_consumer(self, worker: str, queue: str) -> None:
        self.calls.append(("cancel", worker, queue))
        self.consuming_[worker].discard(queue)

    def add_consumer(self, worker: str, queue: str) -> None:
        self.calls.append(("add", worker, queue))
        self.consuming_[worker].add(queue)

    def pending(self, worker: str) -> Pending | None:
        queue = self.held.get(worker)
        return queue.pop(0) if queue else Pending()

    def health(self, worker: str, check: str, expected_version: str) -> HealthResult:
        self.calls.append(("health", worker, expected_version))
        bad = worker in self.broken.get(self.versions_[worker], set())
        detail = "ERROR_KEY_DOES_NOT_EXIST" if bad else "balance 1.0"
        return HealthResult(not bad, check, detail, self.versions_[worker], 0.01)

    # Restarter
    def restart(self, worker: str, version: str) -> RestartOutcome:
        self.calls.append(("restart", worker, version))
        # A drained worker only: the rule the rollout exists for.
        assert not self.consuming_[worker], f"{worker} restarted while consuming"
        self.versions_[worker] = version
        self.consuming_[worker] = {"celery"}  # a fresh worker consumes at once
        return RestartOutcome(True, "ok", 0.5)


def run(fleet: FakeFleet, **options: object) -> tuple[dict[str, object], list[str]]:
    lines: list[str] = []
    clock = ManualClock()
    opts = RolloutOptions(**{"to_version": "2.0", "drain_timeout": 5.0, **options})  # type: ignore[arg-type]
    rollout = Rollout(fleet, fleet.restart, opts, echo=lines.append, clock=clock, sleep=clock.sleep)
    return rollout.run(), lines


def restarts(fleet: FakeFleet) -> list[tuple[str, ...]]:
    return [c[1:] for c in fleet.calls if c[0] == "restart"]


def test_updates_one_at_a_time_drained_then_resumed() -> None:
    fleet = FakeFleet()
    summary, lines = run(fleet)
    assert summary["status"] == "completed"
    assert summary["updated"] == WORKERS
    assert restarts(fleet) == [(w, "2.0") for w in WORKERS]
    assert fleet.versions_ == dict.fromkeys(WORKERS, "2.0")
    assert all(q == {"celery"} for q in fleet.consuming_.values())
    # Per worker: cancel, restart, cancel again (fresh), health, add; one worker at a time.
    kinds = [(c[0], c[1]) for c in fleet.calls]
    first = kinds[:5]
    assert first == [
        ("cancel", WORKERS[0]),
        ("restart", WORKERS[0]),
        ("cancel", WORKERS[0]),
        ("health", WORKERS[0]),
        ("add", WORKERS[0]),
    ]
    assert any(line.startswith("[2/4] celery@w2 drained in") for line in lines)


def test_max_unavailable_restarts_a_batch_together() -> None:
    fleet = FakeFleet()
    run(fleet, max_unavailable=2)
    kinds = [(c[0], c[1]) for c in fleet.calls]
    # w1 and w2 both stop consuming before either restarts.
    assert kinds.index(("cancel", WORKERS[1])) < kinds.index(("restart", WORKERS[0]))
    assert kinds.index(("add", WORKERS[1])) < kinds.index(("cancel", WORKERS[2]))


def test_drain_waits_for_held_tasks_and_reports_what_is_left() -> None:
    fleet = FakeFleet(held={WORKERS[0]: [Pending(1, 2, 0)] * 100, WORKERS[1]: [Pending(1, 0, 0)]})
    summary, lines = run(fleet, drain_timeout=3.0)
    details = {d["worker"]: d for d in summary["details"]}  # type: ignore[attr-defined]
    assert details[WORKERS[0]]["left_at_restart"] == {
        "active": 1,
        "reserved": 2,
        "scheduled": 0,
        "solve_calls": 0,
    }
    assert details[WORKERS[0]]["drain_seconds"] >= 3.0
    assert details[WORKERS[1]]["left_at_restart"] == {
        "active": 0,
        "reserved": 0,
        "scheduled": 0,
        "solve_calls": 0,
    }
    assert any("drain timeout" in line and "none is lost" in line for line in lines)
    assert summary["status"] == "completed"


def test_failed_gate_rolls_back_every_updated_worker() -> None:
    fleet = FakeFleet(broken={"2.0": {WORKERS[2]}})
    summary, lines = run(fleet)  # the default threshold: a failed gate never waits for more
    assert summary["status"] == "rolled_back"
    assert summary["failed"] == [WORKERS[2]]
    assert summary["rolled_back"] == WORKERS[:3]
    assert fleet.versions_ == dict.fromkeys(WORKERS, "1.0")
    assert (WORKERS[3], "2.0") not in restarts(fleet)  # never touched
    # The failing worker first, then the updated ones, newest first.
    back = [r for r in restarts(fleet) if r[1] == "1.0"]
    assert back == [(WORKERS[2], "1.0"), (WORKERS[1], "1.0"), (WORKERS[0], "1.0")]
    assert all(q == {"celery"} for q in fleet.consuming_.values())
    details = {d["worker"]: d for d in summary["details"]}  # type: ignore[attr-defined]
    assert details[WORKERS[3]]["result"] == "untouched"
    assert "ERROR_KEY_DOES_NOT_EXIST" in details[WORKERS[2]]["error"]
    assert any("gate failed on celery@w3; rolling back 3 updated" in line for line in lines)


def test_failed_gate_in_a_batch_stops_the_rest_of_the_batch() -> None:
    fleet = FakeFleet(broken={"2.0": {WORKERS[0]}})
    summary, _ = run(fleet, max_unavailable=2)
    assert summary["status"] == "rolled_back"
    assert restarts(fleet) == [(WORKERS[0], "2.0"), (WORKERS[0], "1.0")]
    assert fleet.versions_ == dict.fromkeys(WORKERS, "1.0")
    # w2 was drained with w1 but never restarted: it consumes again.
    assert all(q == {"celery"} for q in fleet.consuming_.values())
    details = {d["worker"]: d for d in summary["details"]}  # type: ignore[attr-defined]
    assert details[WORKERS[1]]["result"] == "untouched"


def test_unreachable_workers_within_the_threshold_are_left_alone() -> None:
    fleet = FakeFleet(silent={WORKERS[1]})
    summary, lines = run(fleet, abort_threshold=0.25)  # 1 of 4 is not over 0.25
    assert summary["status"] == "completed_with_failures"
    assert summary["unreachable"] == [WORKERS[1]]
    assert summary["failed"] == [] and summary["rolled_back"] == []
    assert fleet.versions_ == {**dict.fromkeys(WORKERS, "2.0"), WORKERS[1]: "1.0"}
    assert ("cancel", WORKERS[1]) not in [(c[0], c[1]) for c in fleet.calls]
    assert any("celery@w2 UNREACHABLE" in line and "left on 1.0" in line for line in lines)


def test_unreachable_workers_beyond_the_threshold_abort() -> None:
    fleet = FakeFleet(silent={WORKERS[1], WORKERS[2]})
    summary, lines = run(fleet, abort_threshold=0.25)
    assert summary["status"] == "rolled_back"
    assert summary["failures"] == 2
    assert summary["rolled_back"] == [WORKERS[0]]
    assert fleet.versions_ == dict.fromkeys(WORKERS, "1.0")
    assert any("over the abort threshold" in line for line in lines)


def test_threshold_zero_aborts_on_the_first_unreachable_worker() -> None:
    fleet = FakeFleet(silent={WORKERS[3]})
    summary, _ = run(fleet, abort_threshold=0.0)
    assert summary["status"] == "rolled_back"
    assert summary["rolled_back"] == WORKERS[:3]
    back = [r for r in restarts(fleet) if r[1] == "1.0"]
    assert back == [(w, "1.0") for w in WORKERS[2::-1]]  # newest first
    assert fleet.versions_ == dict.fromkeys(WORKERS, "1.0")


def test_restart_failure_counts_as_a_failed_gate() -> None:
    fleet = FakeFleet()
    original = fleet.restart

    def restart(worker: str, version: str) -> RestartOutcome:
        if worker == WORKERS[0] and version == "2.0":
            fleet.calls.append(("restart", worker, version))
            return RestartOutcome(False, "exit 1: no such unit", 0.1)
        return original(worker, version)

    lines: list[str] = []
    clock = ManualClock()
    rollout = Rollout(
        fleet, restart, RolloutOptions("2.0"), echo=lines.append, clock=clock, sleep=clock.sleep
    )
    summary = rollout.run()
    assert summary["status"] == "rolled_back"
    assert "no such unit" in summary["details"][0]["error"]


def test_worker_that_never_reports_the_new_version_fails_its_gate() -> None:
    fleet = FakeFleet()
    fleet.version = lambda worker: "1.0"  # type: ignore[method-assign]
    summary, _ = run(fleet, start_timeout=2.0)
    assert summary["status"] == "rolled_back"
    assert "did not report version 2.0" in summary["details"][0]["error"]  # type: ignore[index]


def test_already_updated_workers_are_skipped() -> None:
    fleet = FakeFleet()
    fleet.versions_[WORKERS[0]] = "2.0"
    summary, _ = run(fleet)
    assert (WORKERS[0], "2.0") not in restarts(fleet)
    assert summary["status"] == "completed"
    assert summary["updated"] == [*WORKERS[1:], WORKERS[0]]


def test_unknown_worker_is_an_error_before_anything_happens() -> None:
    fleet = FakeFleet()
    summary, _ = run(fleet, workers=("celery@nope",))
    assert summary["status"] == "failed" and "celery@nope" in str(summary["error"])
    assert fleet.calls == []


def test_summary_is_json() -> None:
    summary, _ = run(FakeFleet())
    decoded = json.loads(summary_json(summary))
    assert decoded["status"] == "completed"
    assert {d["result"] for d in decoded["details"]} == {"updated"}
    assert set(decoded) >= {
        "updated",
        "failed",
        "rolled_back",
        "failures",
        "drain_timeout",
        "seconds",
        "details",
    }


def test_auto_drain_timeout() -> None:
    assert auto_drain_timeout({})[0] == DRAIN_CAP
    value, why = auto_drain_timeout({"turnstile": [3.0, 8.5], "image": [0.4]})
    assert value == pytest.approx(18.5) and "turnstile" in why
    assert auto_drain_timeout({"recaptcha_v2": [300.0]})[0] == DRAIN_CAP


def test_check_probe_reads_fresh_and_stale_beats(tmp_path: Path) -> None:
    from captcha_tasks.fleet.heartbeat import Beat, probe, write_beat_file
    from captcha_tasks.settings import get_settings
    from captcha_tasks.state import Keys, state_redis

    settings = get_settings()
    client = state_redis(settings)
    keys = Keys(settings.key_prefix)
    worker = f"celery@probe-{time.time_ns()}"
    client.set(keys.heartbeat(worker), Beat(worker, "2.0", 1, time.time()).as_json(), ex=30)
    try:
        assert probe(settings, worker=worker).ok
        assert not probe(settings, worker="celery@nobody").ok
        beat_file = tmp_path / "beat.json"
        write_beat_file(beat_file, Beat(worker, "2.0", 1, time.time() - 60))
        stale = probe(settings, path=beat_file, max_age=30)
        assert not stale.ok and "old" in stale.problems[0]
        write_beat_file(beat_file, Beat(worker, "2.0", 1, time.time()))
        assert probe(settings, path=beat_file).ok
    finally:
        client.delete(keys.heartbeat(worker))


def test_every_type_the_engine_solves_has_a_drain_ceiling_within_its_deadline() -> None:
    from captcha_tasks.engine.timing import DEADLINE
    from captcha_tasks.fleet.rollout import DRAIN_CEILINGS

    assert set(DRAIN_CEILINGS) == set(DEADLINE)
    for kind, ceiling in DRAIN_CEILINGS.items():
        assert 0 < ceiling < DEADLINE[kind] and ceiling <= DRAIN_CAP, kind


def test_drain_timeout_auto_reads_the_new_types_solve_times(redis_url: str) -> None:
    from captcha_tasks.cli.fleet import _drain_timeout
    from captcha_tasks.settings import get_settings
    from captcha_tasks.state import Keys, state_redis

    settings = get_settings()
    client = state_redis(settings)
    keys = Keys(settings.key_prefix)
    client.rpush(keys.timing("turnstile"), "6.0")
    client.rpush(keys.timing("funcaptcha"), "31.5", "12.0")  # the slowest type seen
    value, why = _drain_timeout("auto")
    assert value == pytest.approx(41.5) and "funcaptcha" in why
