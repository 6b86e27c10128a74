"""The solve benchmark: our design and the seeds' design against the sandbox.

Each design runs in the same invocation against its own fresh ``redis-server``
and its own fresh sandbox process (``captcha-tasks sandbox``), with real
``celery worker`` processes:

1. start the workers and wait until each logs `` ready.``; warm up with a few
   solves; zero the sandbox's counters; note CPU times (psutil);
2. enqueue N reCAPTCHA v2 solves with ``.delay()`` from this process, as fast as
   it can, each with its own pageurl;
3. record when each result lands in the result backend (a pattern subscription
   to the backend's ``celery-task-meta-*`` channels, which Celery publishes on
   every stored state), until all are in or the deadline passes;
4. read CPU times, ``GET /stats`` and ``GET /admin/captchas`` (each captcha's
   submit, ready and first-answered times at the sandbox), stop every process.

Every timing is in epoch seconds of this machine's clock; the sandbox reports its
per-captcha times the same way, so "ready at the sandbox" and "result stored"
compare directly. ``CAPTCHA_TASKS_TIME_SCALE`` is ``L / 15``: the sandbox's
reCAPTCHA v2 solve (15 s documented) takes ``L`` seconds, and every client
default (first-poll wait, poll interval, deadlines) shrinks in proportion.

:func:`run_bench` points ``captcha_tasks.app`` at its private Redis through the
environment: call it once per process, before anything has used the app.
"""

from __future__ import annotations

import contextlib
import dataclasses
import heapq
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from types import FrameType
from typing import Any

import psutil  # type: ignore[import-untyped, unused-ignore]
import redis
import requests

from ..dev.procs import free_port, stop_process, wait_until
from ..dev.redis_server import RedisServer
from ..errors import CaptchaTasksError
from ..sandbox import DEV_API_KEY
from ..solving.timing import POLL_INTERVAL, quantile
from . import seed_design

__all__ = ["SITEKEY", "BenchOptions", "DesignRun", "run_bench"]

#: A well-formed reCAPTCHA v2 sitekey (40 characters; Google's public demo key).
SITEKEY = "6Le-wvkSAAAAAPBMRTvw0Q4Muexq9bi0DJwx_mJ-"
#: Documented reCAPTCHA v2 solve time (PROTOCOL.md): the time scale maps it onto ``latency``.
DOCUMENTED_V2_SECONDS = 15.0
#: Settings a run decides; anything else set in the environment is passed through and shown.
_DECIDED = (
    "CAPTCHA_TASKS_REDIS_URL",
    "CAPTCHA_TASKS_BROKER_URL",
    "CAPTCHA_TASKS_RESULT_BACKEND",
    "CAPTCHA_TASKS_STATE_URL",
    "CAPTCHA_TASKS_SOLVER_URL",
    "CAPTCHA_TASKS_PROVIDER",
    "CAPTCHA_TASKS_THREADS",
    "CAPTCHA_TASKS_TIME_SCALE",
    "CAPTCHAAI_API_KEY",
)
_TERMINAL = ("SUCCESS", "FAILURE", "REVOKED")
_CONCURRENCY_RE = re.compile(r"concurrency:\s*(\d+)")

Progress = Callable[[str], None]


@dataclasses.dataclass(frozen=True)
class BenchOptions:
    #: T: the plan's threads (sandbox ``--threads`` and ``CAPTCHA_TASKS_THREADS``).
    threads: int = 50
    #: L: real seconds of one reCAPTCHA v2 solve at the sandbox (before jitter).
    latency: float = 2.0
    #: Each solve takes L times a uniform factor in [1 - jitter, 1 + jitter].
    jitter: float = 0.3
    #: N: solves measured for our design.
    solves: int = 300
    #: ``celery worker`` processes of our app (default prefork concurrency each).
    workers: int = 2
    #: Solves measured for the seeds' design.
    baseline_solves: int = 40
    skip_baseline: bool = False
    #: Warm-up solves per design before the counters are zeroed (imports, connections,
    #: scripts; for ours also enough solves for the first-poll learner to start).
    warmup: int = 10
    #: The seeds' design runs one prefork worker with this concurrency.
    baseline_concurrency: int = 4
    #: Unscaled seconds the baseline sleeps before its first poll (the seeds' code: 5).
    baseline_first_wait: float = seed_design.SEED_POLL_WAIT
    #: Where worker, sandbox and Redis logs go; None: a temporary directory, kept on failure.
    log_dir: Path | None = None

    @property
    def time_scale(self) -> float:
        return self.latency / DOCUMENTED_V2_SECONDS


@dataclasses.dataclass
class Outcome:
    """A task's final state as the result backend published it."""

    at: float
    status: str
    result: Any


@dataclasses.dataclass
class DesignRun:
    """What one design's run measured (``metrics``: flat, JSON-ready, None when n/a)."""

    name: str
    label: str
    metrics: dict[str, Any]


# -- processes ----------------------------------------------------------------------


class Processes:
    """The child processes of a run, each in its own session; stopped by PID."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self.children: list[tuple[str, subprocess.Popen[bytes]]] = []
        self.redis_servers: list[RedisServer] = []

    def spawn(self, name: str, argv: list[str], env: Mapping[str, str]) -> subprocess.Popen[bytes]:
        with (self.log_dir / f"{name}.log").open("ab") as log:
            proc = subprocess.Popen(
                argv,
                env=dict(env),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # Ctrl-C reaches the harness only; it stops these
            )
        self.children.append((name, proc))
        return proc

    def log(self, name: str) -> str:
        path = self.log_dir / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def redis(self) -> RedisServer:
        server = RedisServer(data_dir=self.log_dir / f"redis{len(self.redis_servers) + 1}")
        self.redis_servers.append(server)
        return server.start()

    def stop(self, procs: Sequence[subprocess.Popen[bytes]], timeout: float = 20.0) -> None:
        """Stop these children (warm shutdown first), in parallel, by PID."""
        threads = [
            threading.Thread(target=stop_process, args=(p,), kwargs={"timeout": timeout,
                             "group": True}, daemon=True)
            for p in procs
        ]  # fmt: skip
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout + 15)
        self.children = [(n, p) for n, p in self.children if p not in procs]

    def stop_all(self) -> None:
        self.stop([p for _, p in reversed(self.children)])
        for server in reversed(self.redis_servers):
            with contextlib.suppress(Exception):
                server.stop()
        self.redis_servers.clear()


@contextlib.contextmanager
def _terminate_on_sigterm() -> Iterator[None]:
    """SIGTERM unwinds like Ctrl-C, so every ``finally`` stops what it started."""

    def handler(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    try:
        previous = signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread: leave signals alone
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _start_sandbox(procs: Processes, opts: BenchOptions, name: str) -> tuple[str, int]:
    port = free_port()
    argv = [sys.executable, "-m", "captcha_tasks.cli", "sandbox", "--port", str(port),
            "--threads", str(opts.threads), "--time-scale", repr(opts.time_scale),
            "--jitter", repr(opts.jitter),
            "--latency", f"recaptcha_v2={DOCUMENTED_V2_SECONDS}"]  # fmt: skip
    proc = procs.spawn(name, argv, os.environ)
    url = f"http://127.0.0.1:{port}"

    def ready() -> bool:
        if proc.poll() is not None:
            raise CaptchaTasksError(f"the sandbox exited ({proc.returncode}):\n{procs.log(name)}")
        return requests.get(f"{url}/healthz", timeout=1).ok

    wait_until(ready, timeout=30, what="the sandbox")
    return url, proc.pid


def _start_workers(
    procs: Processes, argvs: Sequence[tuple[str, list[str]]], env: Mapping[str, str]
) -> list[tuple[subprocess.Popen[bytes], int | None]]:
    """Start the workers, wait until each logs " ready."; (process, pool size) each."""
    started = [(name, procs.spawn(name, argv, env)) for name, argv in argvs]

    def all_ready() -> bool:
        for name, proc in started:
            if proc.poll() is not None:
                raise CaptchaTasksError(f"{name} exited ({proc.returncode}):\n{procs.log(name)}")
        return all(" ready." in procs.log(name) for name, _ in started)

    wait_until(all_ready, timeout=90, interval=0.2, what="the workers to be ready")
    out = []
    for name, proc in started:
        found = _CONCURRENCY_RE.search(procs.log(name))
        out.append((proc, int(found.group(1)) if found else None))
    return out


# -- measuring ------------------------------------------------------------------------


class ResultWatcher:
    """When each task's final state was stored: subscribes to the result backend's
    ``celery-task-meta-*`` channels (the Redis backend publishes every state it stores)."""

    def __init__(self, url: str) -> None:
        self._client = redis.Redis.from_url(url, socket_connect_timeout=5)
        self._pubsub = self._client.pubsub()  # type: ignore[no-untyped-call]
        self._cond = threading.Condition()
        self.outcomes: dict[str, Outcome] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bench-results", daemon=True)

    def start(self) -> ResultWatcher:
        self._pubsub.psubscribe("celery-task-meta-*")
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:  # the subscription is live once confirmed
            message = self._pubsub.get_message(timeout=1.0)
            if message and message["type"] == "psubscribe":
                break
        else:
            raise CaptchaTasksError("could not subscribe to the result backend's channels")
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                message = self._pubsub.get_message(timeout=0.2)
            except (redis.RedisError, OSError):
                if self._stop.is_set():
                    return
                raise
            if not message or message["type"] != "pmessage":
                continue
            at = time.time()
            try:
                meta = json.loads(message["data"])
            except (TypeError, ValueError):
                continue
            if meta.get("status") not in _TERMINAL or not meta.get("task_id"):
                continue
            with self._cond:
                self.outcomes.setdefault(
                    str(meta["task_id"]), Outcome(at, meta["status"], meta.get("result"))
                )
                self._cond.notify_all()

    def wait(self, task_ids: Sequence[str], deadline: float) -> None:
        """Until every one of ``task_ids`` ended, or ``deadline`` (monotonic) passes."""
        pending = set(task_ids)
        with self._cond:
            while True:
                pending -= self.outcomes.keys()
                left = deadline - time.monotonic()
                if not pending or left <= 0:
                    return
                self._cond.wait(min(left, 0.5))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)
        with contextlib.suppress(Exception):
            self._pubsub.close()
        self._client.close()


def _cpu(pid: int, *, tree: bool = True) -> float:
    """User + system CPU seconds of ``pid`` and (``tree``) its live descendants."""
    try:
        root = psutil.Process(pid)
        members = [root, *root.children(recursive=True)] if tree else [root]
    except psutil.NoSuchProcess:
        return 0.0
    total = 0.0
    for member in members:
        with contextlib.suppress(psutil.NoSuchProcess):
            times = member.cpu_times()
            total += times.user + times.system
    return total


def _machine_busy() -> tuple[float, float]:
    """(busy, total) CPU seconds of the whole machine so far."""
    times = psutil.cpu_times()
    idle = times.idle + getattr(times, "iowait", 0.0)
    total = float(sum(times))
    return total - idle, total


@dataclasses.dataclass
class _CpuProbe:
    workers: list[int]
    others: dict[str, int]

    def read(self) -> dict[str, float]:
        out = {"workers": sum(_cpu(pid) for pid in self.workers)}
        out.update({name: _cpu(pid) for name, pid in self.others.items()})
        out["harness"] = _cpu(os.getpid(), tree=False)
        out["machine_busy"], out["machine_total"] = _machine_busy()
        return out


def _q(values: Sequence[float], q: float) -> float | None:
    return round(quantile(values, q), 4) if values else None


def _ideal_finish(latencies: Sequence[float], threads: int) -> list[float]:
    """When each of these solves (in order) would end on ``threads`` slots with zero
    overhead: each starts the moment a slot frees, all available at time 0."""
    slots = [0.0] * min(threads, max(len(latencies), 1))
    finish = []
    for latency in latencies:
        end = heapq.heappop(slots) + latency
        finish.append(end)
        heapq.heappush(slots, end)
    return finish


def _busy(captchas: Sequence[Mapping[str, Any]], start: float, end: float) -> float:
    """Solver seconds spent inside [start, end] (each captcha from submit to ready)."""
    return sum(
        max(0.0, min(float(c["ready_at"]), end) - max(float(c["submitted_at"]), start))
        for c in captchas
    )


def _metrics(
    opts: BenchOptions,
    *,
    tasks: int,
    enqueued: Mapping[str, float],
    enqueue_end: float,
    outcomes: Mapping[str, Outcome],
    captchas: Sequence[Mapping[str, Any]],
    stats: Mapping[str, Any],
    cpu: Mapping[str, float],
    admitted: Mapping[str, float] | None = None,
) -> dict[str, Any]:
    T, L = opts.threads, opts.latency
    t0 = min(enqueued.values())
    by_id = {str(c["id"]): c for c in captchas}
    done = {tid: o for tid, o in outcomes.items() if tid in enqueued}
    ok = {tid: o for tid, o in done.items() if o.status == "SUCCESS"}
    t_end = max((o.at for o in done.values()), default=t0)
    makespan = t_end - t0
    # Both designs' results carry the captcha id: the key to the sandbox's times.
    cid_of = {
        tid: str(o.result.get("captcha_id", "")) if isinstance(o.result, dict) else ""
        for tid, o in ok.items()
    }
    over, waits, collect, late, store, admit = [], [], [], [], [], []
    matched = 0
    for tid, o in ok.items():
        e = enqueued[tid]
        c = by_id.get(cid_of[tid])
        if c is None:
            over.append(o.at - e - L)
            continue
        matched += 1
        over.append(o.at - e - float(c["latency"]))
        waits.append(float(c["submitted_at"]) - e)
        collect.append(o.at - float(c["ready_at"]))
        if c.get("answered_at") is not None:
            late.append(float(c["answered_at"]) - float(c["ready_at"]))
            store.append(o.at - float(c["answered_at"]))
        if admitted and tid in admitted:
            admit.append(admitted[tid] - e)
    # Every captcha the run sent (duplicates included), in submit order.
    window = sorted(
        (c for c in captchas if float(c["submitted_at"]) >= t0 - 1e-3),
        key=lambda c: float(c["submitted_at"]),
    )
    submits = [float(c["submitted_at"]) for c in window]
    readies = sorted(float(c["ready_at"]) for c in window)
    # A submit beyond the T-th needs a freed thread: the k-th submit can come at the
    # earliest when the (k-T)-th captcha became ready. How long after did it come?
    reached_t = int(stats.get("max_in_flight", 0)) >= T
    gaps = (
        [s - max(r, enqueue_end) for s, r in zip(submits[T:], readies, strict=False)]
        if reached_t
        else []
    )
    latencies = [float(c["latency"]) for c in window]
    finish = _ideal_finish(latencies, T)
    ideal = max(finish, default=0.0)
    # How much later than in that zero-overhead schedule each result came.
    ideal_end = {str(c["id"]): t0 + f for c, f in zip(window, finish, strict=True)}
    lateness = [o.at - ideal_end[cid_of[t]] for t, o in ok.items() if cid_of[t] in ideal_end]
    # While a backlog waited (first to last submit) every thread could have been busy.
    backlog = (submits[-1] - submits[0]) if len(submits) > T else 0.0
    solved = int(stats.get("solved", 0))
    cpu_workers = cpu.get("workers", 0.0)
    machine_total = cpu.get("machine_total", 0.0)

    def per_s(x: float) -> float | None:
        return round(x, 4) if math.isfinite(x) else None

    return {
        "tasks": tasks,
        "completed": len(ok),
        "failures": len(done) - len(ok),
        "unfinished": tasks - len(done),
        "matched_to_sandbox": matched,
        "enqueue_seconds": round(enqueue_end - t0, 3),
        # Ramp-up: the zero-overhead schedule has all T threads busy from the first enqueue.
        "first_submit_seconds": round(submits[0] - t0, 4) if submits else None,
        "t_th_submit_seconds": round(submits[T - 1] - t0, 4) if len(submits) >= T else None,
        "makespan_seconds": round(makespan, 3),
        "solves_per_second": per_s(len(ok) / makespan) if makespan > 0 else None,
        "fraction_of_t_over_l": per_s(len(ok) / (T / L * makespan)) if makespan > 0 else None,
        "ideal_fraction_for_these_latencies": (
            per_s(len(latencies) / (T / L * ideal)) if ideal > 0 else None
        ),
        "sandbox_utilisation": (
            per_s(_busy(window, t0, t_end) / (T * makespan)) if makespan > 0 else None
        ),
        "sandbox_utilisation_backlogged": (
            per_s(_busy(window, submits[0], submits[-1]) / (T * backlog)) if backlog > 0 else None
        ),
        "solver_latency_mean": round(sum(latencies) / len(latencies), 4) if latencies else None,
        "e2e_minus_latency_p50": _q(over, 0.5),
        "e2e_minus_latency_p95": _q(over, 0.95),
        "enqueue_to_submit_p50": _q(waits, 0.5),
        "enqueue_to_submit_p95": _q(waits, 0.95),
        "enqueue_to_admitted_p50": _q(admit, 0.5),
        "enqueue_to_admitted_p95": _q(admit, 0.95),
        "lateness_vs_ideal_p50": _q(lateness, 0.5),
        "lateness_vs_ideal_p95": _q(lateness, 0.95),
        "slot_refill_gap_p50": _q(gaps, 0.5),
        "slot_refill_gap_p95": _q(gaps, 0.95),
        "slot_refill_gap_mean": round(sum(gaps) / len(gaps), 4) if gaps else None,
        "collection_delay_p50": _q(collect, 0.5),
        "collection_delay_p95": _q(collect, 0.95),
        "ready_to_answered_p50": _q(late, 0.5),
        "ready_to_answered_p95": _q(late, 0.95),
        "answered_to_result_p50": _q(store, 0.5),
        "answered_to_result_p95": _q(store, 0.95),
        "polls": int(stats.get("polls", 0)),
        "solved_at_sandbox": solved,
        "polls_per_solve": round(int(stats.get("polls", 0)) / solved, 3) if solved else None,
        "captcha_polled_mean": (
            round(sum(int(c["polls"]) for c in window) / len(window), 3) if window else None
        ),
        "captcha_polled_max": max((int(c["polls"]) for c in window), default=None),
        "submitted": int(stats.get("submitted", 0)),
        "submits_per_task": round(int(stats.get("submitted", 0)) / tasks, 3) if tasks else None,
        "duplicates": int(stats.get("duplicates", 0)),
        "no_slot": int(stats.get("no_slot", 0)),
        "max_in_flight": int(stats.get("max_in_flight", 0)),
        "threads": T,
        "worker_cpu_seconds": round(cpu_workers, 3),
        "worker_cpu_per_solve": round(cpu_workers / len(ok), 5) if ok else None,
        "redis_cpu_seconds": round(cpu.get("redis", 0.0), 3),
        "sandbox_cpu_seconds": round(cpu.get("sandbox", 0.0), 3),
        "harness_cpu_seconds": round(cpu.get("harness", 0.0), 3),
        "machine_cpu_busy": (
            round(cpu.get("machine_busy", 0.0) / machine_total, 3) if machine_total else None
        ),
    }


# -- one design -------------------------------------------------------------------------


@dataclasses.dataclass
class _Design:
    name: str
    label: str
    tasks: int
    #: (log name, argv) of each worker process.
    workers: list[tuple[str, list[str]]]
    #: Prepare this process as a client of ``redis_url``; returns the results' Redis URL
    #: and a function that enqueues one solve for a pageurl and returns its task id.
    client: Callable[[str], tuple[str, Callable[[str], str]]]
    #: Extra per-task figures read from Redis after the run (task id -> epoch seconds).
    admitted: Callable[[Sequence[str]], dict[str, float]] | None = None
    #: Seconds after the enqueue of the last solve when waiting gives up.
    deadline: float = 60.0


def _run_design(design: _Design, opts: BenchOptions, procs: Processes, say: Progress) -> DesignRun:
    redis_server = procs.redis()
    sandbox_url, sandbox_pid = _start_sandbox(procs, opts, f"{design.name}-sandbox")
    say(f"{design.label}: redis {redis_server.url}, sandbox {sandbox_url}")
    env = {k: v for k, v in os.environ.items() if k not in _DECIDED}
    env.update(
        CAPTCHA_TASKS_REDIS_URL=redis_server.url,
        CAPTCHA_TASKS_SOLVER_URL=sandbox_url,
        CAPTCHA_TASKS_PROVIDER="captchaai",
        CAPTCHAAI_API_KEY=DEV_API_KEY,
        CAPTCHA_TASKS_THREADS=str(opts.threads),
        CAPTCHA_TASKS_TIME_SCALE=repr(opts.time_scale),
        PYTHONUNBUFFERED="1",
    )
    results_url, enqueue = design.client(redis_server.url)
    workers = _start_workers(procs, design.workers, env)
    pools = [size for _, size in workers]
    say(f"{design.label}: {len(workers)} worker(s) ready (pool sizes {pools})")
    watcher = ResultWatcher(results_url).start()
    try:
        stamp = f"{int(time.time() * 1000)}"
        warm = [enqueue(f"https://example.com/bench/{design.name}/warmup/{stamp}/{i}")
                for i in range(opts.warmup)]  # fmt: skip
        watcher.wait(warm, time.monotonic() + 60)
        bad = [t for t in warm if t not in watcher.outcomes or
               watcher.outcomes[t].status != "SUCCESS"]  # fmt: skip
        if bad:
            raise CaptchaTasksError(
                f"{design.label}: {len(bad)} of {len(warm)} warm-up solves did not succeed; "
                f"logs in {procs.log_dir}"
            )
        requests.post(f"{sandbox_url}/admin/reset", timeout=5).raise_for_status()
        probe = _CpuProbe(
            [p.pid for p, _ in workers],
            {"redis": redis_server.proc.pid if redis_server.proc else 0, "sandbox": sandbox_pid},
        )
        before = probe.read()
        say(f"{design.label}: enqueueing {design.tasks} solves")
        enqueued: dict[str, float] = {}
        for i in range(design.tasks):
            at = time.time()
            enqueued[enqueue(f"https://example.com/bench/{design.name}/{stamp}/{i}")] = at
        enqueue_end = time.time()
        watcher.wait(list(enqueued), time.monotonic() + design.deadline)
        after = probe.read()
        outcomes = dict(watcher.outcomes)
    finally:
        watcher.stop()
    stats = requests.get(f"{sandbox_url}/stats", timeout=10).json()
    captchas = requests.get(f"{sandbox_url}/admin/captchas", timeout=30).json()["captchas"]
    admitted = design.admitted(list(enqueued)) if design.admitted else None
    procs.stop([p for p, _ in workers])
    metrics = _metrics(
        opts,
        tasks=design.tasks,
        enqueued=enqueued,
        enqueue_end=enqueue_end,
        outcomes=outcomes,
        captchas=captchas,
        stats=stats,
        cpu={k: after[k] - before[k] for k in after},
        admitted=admitted,
    )
    metrics["workers"] = len(workers)
    metrics["concurrency"] = pools
    say(
        f"{design.label}: {metrics['completed']}/{design.tasks} solved in "
        f"{metrics['makespan_seconds']} s"
    )
    return DesignRun(design.name, design.label, metrics)


def _ours(opts: BenchOptions) -> _Design:
    def client(redis_url: str) -> tuple[str, Callable[[str], str]]:
        # Point captcha_tasks.app (configured lazily from the environment) at this run.
        os.environ.update(
            CAPTCHA_TASKS_REDIS_URL=redis_url,
            CAPTCHA_TASKS_SOLVER_URL="http://127.0.0.1:9",  # the client never calls it
            CAPTCHA_TASKS_THREADS=str(opts.threads),
            CAPTCHA_TASKS_TIME_SCALE=repr(opts.time_scale),
        )
        for name in ("CAPTCHA_TASKS_BROKER_URL", "CAPTCHA_TASKS_RESULT_BACKEND",
                     "CAPTCHA_TASKS_STATE_URL"):  # fmt: skip
            os.environ.pop(name, None)
        from ..settings import get_settings

        get_settings.cache_clear()
        from .. import app, solve_recaptcha_v2

        if app.conf.broker_url != redis_url or app.conf.result_backend != redis_url:
            raise CaptchaTasksError(
                "captcha_tasks.app was configured before the benchmark set its environment: "
                "run the benchmark in a fresh process"
            )

        def enqueue(pageurl: str) -> str:
            return str(solve_recaptcha_v2.delay(SITEKEY, pageurl).id)

        return redis_url, enqueue

    def admitted(task_ids: Sequence[str]) -> dict[str, float]:
        from ..settings import get_settings
        from ..state import Keys, state_redis

        settings = get_settings()
        keys = Keys(settings.key_prefix)
        pipe = state_redis(settings).pipeline(transaction=False)
        for task_id in task_ids:
            pipe.hget(keys.job(task_id), "enqueued_at")
        return {t: float(v) for t, v in zip(task_ids, pipe.execute(), strict=True) if v}

    workers = [
        (f"ours-worker{i}",
         [sys.executable, "-m", "celery", "-A", "captcha_tasks", "worker", "-n", f"bench{i}@%h",
          "-l", "INFO"])
        for i in range(1, opts.workers + 1)
    ]  # fmt: skip
    slots = opts.threads
    estimate = math.ceil(opts.solves / slots) * (
        opts.latency * (1 + opts.jitter) + POLL_INTERVAL * opts.time_scale
    )
    return _Design(
        name="ours",
        label="captcha_tasks",
        tasks=opts.solves,
        workers=workers,
        client=client,
        admitted=admitted,
        deadline=30 + 2 * (estimate + opts.latency),
    )


def _seeds(opts: BenchOptions) -> _Design:
    def client(redis_url: str) -> tuple[str, Callable[[str], str]]:
        from ..settings import Settings

        seed_design.configure(Settings(redis_url=redis_url))
        task = seed_design.solve_recaptcha_v2

        def enqueue(pageurl: str) -> str:
            return str(task.delay(SITEKEY, pageurl, first_wait=opts.baseline_first_wait).id)

        return seed_design.seed_redis_url(redis_url), enqueue

    argv = [sys.executable, "-m", "celery", "-A", "captcha_tasks.bench.seed_design", "worker",
            "-P", "prefork", "-c", str(opts.baseline_concurrency), "-n", "seed1@%h",
            "-l", "INFO"]  # fmt: skip
    slots = min(opts.baseline_concurrency, opts.threads)
    per_solve = opts.time_scale * max(opts.baseline_first_wait, seed_design.SEED_POLL_WAIT) + (
        opts.latency * (1 + opts.jitter)
    )
    estimate = math.ceil(opts.baseline_solves / slots) * per_solve
    return _Design(
        name="seeds",
        label="seeds' design",
        tasks=opts.baseline_solves,
        workers=[("seeds-worker1", argv)],
        client=client,
        deadline=30 + 2 * (estimate + opts.latency),
    )


# -- the run ----------------------------------------------------------------------------


def run_bench(opts: BenchOptions, say: Progress | None = None) -> dict[str, Any]:
    """Run both designs (ours first) and return parameters, wall time and each design's
    metrics. Stops every process it started, on errors and Ctrl-C/SIGTERM too."""
    say = say or (lambda message: None)
    started = time.monotonic()
    log_dir = opts.log_dir or Path(tempfile.mkdtemp(prefix="captcha-tasks-bench-"))
    log_dir.mkdir(parents=True, exist_ok=True)
    procs = Processes(log_dir)
    saved_env = dict(os.environ)
    designs = [_ours(opts)] + ([] if opts.skip_baseline else [_seeds(opts)])
    runs: list[DesignRun] = []
    succeeded = False
    try:
        with _terminate_on_sigterm():
            for design in designs:
                try:
                    runs.append(_run_design(design, opts, procs, say))
                finally:
                    procs.stop_all()
        succeeded = True
    finally:
        procs.stop_all()
        os.environ.clear()
        os.environ.update(saved_env)
        if opts.log_dir is None and succeeded:
            shutil.rmtree(log_dir, ignore_errors=True)
        elif not succeeded:
            say(f"logs kept in {log_dir}")
    passed = {k: v for k, v in saved_env.items()
              if k.startswith("CAPTCHA_TASKS_") and k not in _DECIDED}  # fmt: skip
    return {
        "parameters": {
            "threads": opts.threads,
            "latency": opts.latency,
            "jitter": opts.jitter,
            "solves": opts.solves,
            "baseline_solves": 0 if opts.skip_baseline else opts.baseline_solves,
            "time_scale": round(opts.time_scale, 6),
            "workers": opts.workers,
            "baseline_concurrency": opts.baseline_concurrency,
            "baseline_first_wait": opts.baseline_first_wait,
            "warmup": opts.warmup,
            "target_solves_per_second": round(opts.threads / opts.latency, 3),
            "cpus": os.cpu_count(),
            "environment": passed,
        },
        "wall_seconds": round(time.monotonic() - started, 1),
        "designs": {run.name: {"label": run.label, **run.metrics} for run in runs},
    }
