"""The solve benchmark: our design against the alternatives, each against the sandbox.

The alternatives: what a user writes instead (the official 2Captcha client inside a
Celery task on a thread pool, :mod:`.diy_design`) and the seeds' design (a prefork
worker sleeping inside the task, :mod:`.seed_design`). Each design runs in the same
invocation, one after the other, against its own fresh ``redis-server`` and its own
fresh sandbox process (``captcha-tasks-sandbox``) with the same T, L and jitter, with
real ``celery worker`` processes. The official client speaks only https: when its
column runs, every design's sandbox serves https with a certificate made for the run.
Each design:

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
environment: call it once per process, before anything has used the app. The
processes live in :mod:`.stack`, the figures are computed in :mod:`.metrics`, the
report's table is laid out by :mod:`.report`.
"""

from __future__ import annotations

import dataclasses
import math
import os
import shutil
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import redis
import requests

from captcha_tasks.engine.timing import POLL_INTERVAL
from captcha_tasks.errors import CaptchaTasksError
from captcha_tasks.settings import PROTOCOLS, Provider

from . import diy_design, seed_design
from .cost import (
    command_calls,
    command_usec,
    cost_figures,
    noop_figures,
    redis_cpu_seconds,
    role_figures,
    store_cpu,
)
from .metrics import lead_ratios, solve_metrics
from .solve_report import format_report
from .stack import (
    DOCUMENTED_V2_SECONDS,
    Processes,
    TlsFiles,
    passed_environment,
    start_stack,
    start_workers,
    tls_files,
)
from .watcher import ResultWatcher

__all__ = [
    "BASELINES",
    "SITEKEY",
    "BenchOptions",
    "DesignRun",
    "ResultWatcher",
    "format_report",
    "run_bench",
]

#: A well-formed reCAPTCHA v2 sitekey (40 characters; Google's public demo key).
SITEKEY = "6Le-wvkSAAAAAPBMRTvw0Q4Muexq9bi0DJwx_mJ-"

Progress = Callable[[str], None]

#: ``--baseline``: the columns run beside ours (``none``: ours alone).
BASELINES = ("diy", "seeds", "both", "none")


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
    #: Solves measured for the seeds' design (the DIY column measures N, as ours).
    baseline_solves: int = 40
    #: The columns beside ours (:data:`BASELINES`): the official client in a task
    #: (``diy``), the seeds' design, both, or none.
    baseline: str = "both"
    #: Measure ours only, whatever ``baseline`` says.
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
    #: The provider our design talks to: its sandbox plays it (protocol and dialect) and
    #: the workers are configured for it. The seeds' design speaks only the classic
    #: protocol: it always runs against a classic ``captchaai`` sandbox.
    provider: Provider = "captchaai"
    #: Poll each captcha alone (the workers' ``CAPTCHA_TASKS_BATCH_POLL=off``): what a
    #: provider that refuses ``ids=`` batch reads gets.
    no_batch: bool = False
    #: Plain Celery no-op tasks (``captcha_tasks.ping``) run through the same workers
    #: after the solves, for the CPU a task costs Celery itself; 0: none.
    noop: int = 1000
    #: Our design's broker, results and state each on a redis-server of its own: what
    #: each role costs per solve, and the solves a second one core of each sustains.
    split_redis: bool = False

    @property
    def time_scale(self) -> float:
        return self.latency / DOCUMENTED_V2_SECONDS

    @property
    def baselines(self) -> tuple[str, ...]:
        """The designs run after ours, in order."""
        if self.skip_baseline or self.baseline == "none":
            return ()
        return ("diy", "seeds") if self.baseline == "both" else (self.baseline,)


@dataclasses.dataclass
class DesignRun:
    """What one design's run measured (``metrics``: flat, JSON-ready, None when n/a)."""

    name: str
    label: str
    metrics: dict[str, Any]


# -- one design -------------------------------------------------------------------------


@dataclasses.dataclass
class _Design:
    name: str
    label: str
    tasks: int
    #: (log name, argv) of each worker process.
    workers: list[tuple[str, list[str]]]
    #: Prepare this process as a client of the run's Redis (``Stack.urls()``: ``redis``,
    #: and ``broker`` and ``results`` where they are apart); returns the results' Redis
    #: URL and a function that enqueues one solve for a pageurl and returns its task id.
    client: Callable[[Mapping[str, str]], tuple[str, Callable[[str], str]]]
    #: Extra per-task figures read from Redis after the run (task id -> epoch seconds).
    admitted: Callable[[Sequence[str]], dict[str, float]] | None = None
    #: Seconds after the enqueue of the last solve when waiting gives up.
    deadline: float = 60.0
    #: The provider its sandbox plays and its workers use.
    provider: Provider = "captchaai"
    #: More of :func:`start_stack`'s options (``env``: its workers' settings beyond the
    #: run's own; ``sandbox_args``: the callback bench's).
    more: dict[str, Any] = dataclasses.field(default_factory=dict)
    #: Enqueues one no-op task and returns its id (None: the design has none).
    noop: Callable[[], str] | None = None
    #: The certificate its sandbox serves https with (None: http).
    tls: TlsFiles | None = None


class _MemoryPeak:
    """The highest ``used_memory`` Redis reports while it runs, read every ``interval``
    seconds on a thread of its own (``with _MemoryPeak(client) as peak: ... peak.bytes``)."""

    def __init__(self, client: redis.Redis, interval: float = 0.1) -> None:
        self._client = client
        self._interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="redis-memory", daemon=True)
        self.bytes = self._used()

    def _used(self) -> int:
        return int(self._client.info("memory")["used_memory"])

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                self.bytes = max(self.bytes, self._used())
            except redis.RedisError:
                return  # the run's Redis is gone: the peak so far stands

    def __enter__(self) -> _MemoryPeak:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


def _summed(
    read: Callable[[Mapping[str, Any]], dict[str, int]], stats: Mapping[str, Mapping[str, Any]]
) -> dict[str, int]:
    """``read`` of each server's ``commandstats``, added up by command."""
    out: dict[str, int] = {}
    for each in stats.values():
        for name, n in read(each).items():
            out[name] = out.get(name, 0) + n
    return out


def _warm_up(
    design: _Design,
    opts: BenchOptions,
    enqueue: Callable[[str], str],
    watcher: ResultWatcher,
    procs: Processes,
    stamp: str,
) -> None:
    warm = [
        enqueue(f"https://example.com/bench/{design.name}/warmup/{stamp}/{i}")
        for i in range(opts.warmup)
    ]
    watcher.wait(warm, time.monotonic() + 60)
    bad = [t for t in warm if t not in watcher.outcomes or watcher.outcomes[t].status != "SUCCESS"]
    if bad:
        raise CaptchaTasksError(
            f"{design.label}: {len(bad)} of {len(warm)} warm-up solves did not succeed; "
            f"logs in {procs.log_dir}"
        )


def _run_design(design: _Design, opts: BenchOptions, procs: Processes, say: Progress) -> DesignRun:
    stack = start_stack(
        procs,
        design.name,
        threads=opts.threads,
        time_scale=opts.time_scale,
        jitter=opts.jitter,
        provider=design.provider,
        tls=design.tls,
        **design.more,
    )
    sandbox_url = stack.sandbox_url
    say(f"{design.label}: redis {stack.redis.url}, sandbox {sandbox_url}")
    results_url, enqueue = design.client(stack.urls())
    workers = start_workers(procs, design.workers, stack.env)
    pools = [size for _, size in workers]
    say(f"{design.label}: {len(workers)} worker(s) ready (pool sizes {pools})")
    watcher = ResultWatcher(results_url).start()
    try:
        stamp = f"{int(time.time() * 1000)}"
        _warm_up(design, opts, enqueue, watcher, procs, stamp)
        requests.post(f"{sandbox_url}/admin/reset", timeout=5).raise_for_status()
        probe = stack.cpu_probe(workers)
        redis_stats = redis.Redis.from_url(stack.redis.url)
        servers = {role: redis.Redis.from_url(s.url) for role, s in stack.roles.items()}
        servers = servers or {"all": redis_stats}
        for server in servers.values():
            server.config_resetstat()
        before = probe.read()
        role_cpu = {role: redis_cpu_seconds(s.info("cpu")) for role, s in servers.items()}
        say(f"{design.label}: enqueueing {design.tasks} solves")
        enqueued: dict[str, float] = {}
        with _MemoryPeak(redis_stats) as peak:
            base = peak.bytes
            for i in range(design.tasks):
                at = time.time()
                enqueued[enqueue(f"https://example.com/bench/{design.name}/{stamp}/{i}")] = at
            enqueue_end = time.time()
            watcher.wait(list(enqueued), time.monotonic() + design.deadline)
        after = probe.read()
        role_cpu = {r: redis_cpu_seconds(s.info("cpu")) - role_cpu[r] for r, s in servers.items()}
        role_stats = {role: s.info("commandstats") for role, s in servers.items()}
        calls, usec = _summed(command_calls, role_stats), _summed(command_usec, role_stats)
        outcomes = dict(watcher.outcomes)
        noop = _noop_phase(design, opts, watcher, probe, redis_stats, say)
    finally:
        watcher.stop()
    stats = requests.get(f"{sandbox_url}/stats", timeout=10).json()
    captchas = requests.get(f"{sandbox_url}/admin/captchas", timeout=30).json()["captchas"]
    admitted = design.admitted(list(enqueued)) if design.admitted else None
    procs.stop([p for p, _ in workers])
    store = store_cpu(child.output() for child, _ in workers) if design.noop else None
    metrics = solve_metrics(
        threads=opts.threads,
        latency=opts.latency,
        tasks=design.tasks,
        enqueued=enqueued,
        enqueue_end=enqueue_end,
        outcomes=outcomes,
        captchas=captchas,
        stats=stats,
        cpu={k: after[k] - before[k] for k in after},
        admitted=admitted,
    )
    cpu = {k: after[k] - before[k] for k in after}
    metrics.update(
        cost_figures(
            cpu,
            calls,
            stats,
            metrics["completed"],
            store,
            redis_cpu=sum(role_cpu.values()),
            memory=(base, peak.bytes, design.tasks),
            usec=usec,
        )
    )
    if stack.roles:
        metrics["redis_roles"] = role_figures(
            role_cpu,
            {role: command_calls(stats) for role, stats in role_stats.items()},
            metrics["completed"],
        )
    if noop is not None:
        noop_cpu, noop_calls, noop_done, noop_redis = noop
        metrics.update(
            noop_figures(
                noop_cpu,
                noop_calls,
                noop_done,
                solve_cpu=metrics["worker_cpu_per_solve"],
                redis_cpu=noop_redis,
            )
        )
    metrics["workers"] = len(workers)
    metrics["concurrency"] = pools
    metrics.update(provider=design.provider, protocol=PROTOCOLS[design.provider])
    say(
        f"{design.label}: {metrics['completed']}/{design.tasks} solved in "
        f"{metrics['makespan_seconds']} s"
    )
    return DesignRun(design.name, design.label, metrics)


def _noop_phase(
    design: _Design,
    opts: BenchOptions,
    watcher: ResultWatcher,
    probe: Any,
    redis_stats: redis.Redis,
    say: Progress,
) -> tuple[dict[str, float], dict[str, int], int, float] | None:
    """Run ``opts.noop`` no-op tasks through the design's workers, once its solves are
    done: their CPU seconds (by stage), Redis commands, how many ended and Redis's CPU
    seconds."""
    if design.noop is None or opts.noop <= 0:
        return None
    say(f"{design.label}: {opts.noop} no-op tasks (captcha_tasks.ping) through the same workers")
    redis_stats.config_resetstat()
    before = probe.read()
    redis_before = redis_cpu_seconds(redis_stats.info("cpu"))
    ids = [design.noop() for _ in range(opts.noop)]
    watcher.wait(ids, time.monotonic() + 60 + opts.noop / 20)
    after = probe.read()
    redis_cpu = redis_cpu_seconds(redis_stats.info("cpu")) - redis_before
    calls = command_calls(redis_stats.info("commandstats"))
    done = sum(1 for t in ids if t in watcher.outcomes)
    return {k: after[k] - before[k] for k in after}, calls, done, redis_cpu


def _ours_label(provider: Provider) -> str:
    # The default provider keeps the column's historical name.
    return "captcha_tasks" if provider == "captchaai" else f"captcha_tasks ({provider})"


def _admitted(task_ids: Sequence[str]) -> dict[str, float]:
    """When each of ours was admitted (its job record's ``enqueued_at``)."""
    from captcha_tasks.settings import get_settings
    from captcha_tasks.state import Keys, state_redis

    settings = get_settings()
    keys = Keys(settings.key_prefix)
    pipe = state_redis(settings).pipeline(transaction=False)
    for task_id in task_ids:
        pipe.hget(keys.job(task_id), "enqueued_at")
    return {t: float(v) for t, v in zip(task_ids, pipe.execute(), strict=True) if v}


def _ours(opts: BenchOptions) -> _Design:
    def client(urls: Mapping[str, str]) -> tuple[str, Callable[[str], str]]:
        # Point captcha_tasks.app (configured lazily from the environment) at this run.
        redis_url = urls["redis"]
        broker, results = urls.get("broker", redis_url), urls.get("results", redis_url)
        os.environ.update(
            CAPTCHA_TASKS_REDIS_URL=redis_url,
            CAPTCHA_TASKS_SOLVER_URL="http://127.0.0.1:9",  # the client never calls it
            CAPTCHA_TASKS_THREADS=str(opts.threads),
            CAPTCHA_TASKS_TIME_SCALE=repr(opts.time_scale),
        )
        for name in (
            "CAPTCHA_TASKS_BROKER_URL",
            "CAPTCHA_TASKS_RESULT_BACKEND",
            "CAPTCHA_TASKS_STATE_URL",
        ):
            os.environ.pop(name, None)
        if "broker" in urls:
            os.environ.update(CAPTCHA_TASKS_BROKER_URL=broker, CAPTCHA_TASKS_RESULT_BACKEND=results)
        from captcha_tasks.settings import get_settings

        get_settings.cache_clear()
        from captcha_tasks import app, ping, solve_recaptcha_v2

        if app.conf.broker_url != broker or app.conf.result_backend != results:
            raise CaptchaTasksError(
                "captcha_tasks.app was configured before the benchmark set its environment: "
                "run the benchmark in a fresh process"
            )

        def enqueue(pageurl: str) -> str:
            return str(solve_recaptcha_v2.delay(SITEKEY, pageurl).id)

        noop_task[:] = [ping]

        return results, enqueue

    noop_task: list[Any] = []

    def noop() -> str:
        return str(noop_task[0].delay().id)

    workers = [
        (
            f"ours-worker{i}",
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "captcha_tasks",
                "worker",
                "-n",
                f"bench{i}@%h",
                "-l",
                "INFO",
            ],
        )
        for i in range(1, opts.workers + 1)
    ]
    slots = opts.threads
    estimate = math.ceil(opts.solves / slots) * (
        opts.latency * (1 + opts.jitter) + POLL_INTERVAL * opts.time_scale
    )
    return _Design(
        name="ours",
        label=_ours_label(opts.provider),
        tasks=opts.solves,
        workers=workers,
        client=client,
        admitted=_admitted,
        deadline=30 + 2 * (estimate + opts.latency),
        provider=opts.provider,
        noop=noop,
        more={
            **({"env": {"CAPTCHA_TASKS_BATCH_POLL": "off"}} if opts.no_batch else {}),
            **({"split": True} if opts.split_redis else {}),
        },
    )


def _seeds(opts: BenchOptions) -> _Design:
    def client(urls: Mapping[str, str]) -> tuple[str, Callable[[str], str]]:
        redis_url = urls["redis"]
        from captcha_tasks.settings import Settings

        seed_design.configure(Settings(redis_url=redis_url))
        task = seed_design.solve_recaptcha_v2

        def enqueue(pageurl: str) -> str:
            return str(task.delay(SITEKEY, pageurl, first_wait=opts.baseline_first_wait).id)

        return seed_design.seed_redis_url(redis_url), enqueue

    argv = [
        sys.executable,
        "-m",
        "celery",
        "-A",
        "captcha_tasks_dev.bench.seed_design",
        "worker",
        "-P",
        "prefork",
        "-c",
        str(opts.baseline_concurrency),
        "-n",
        "seed1@%h",
        "-l",
        "INFO",
    ]
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


def _diy(opts: BenchOptions) -> _Design:
    def client(urls: Mapping[str, str]) -> tuple[str, Callable[[str], str]]:
        redis_url = urls["redis"]
        from captcha_tasks.settings import Settings

        diy_design.configure(Settings(redis_url=redis_url))
        task = diy_design.solve_recaptcha_v2

        def enqueue(pageurl: str) -> str:
            return str(task.delay(SITEKEY, pageurl).id)

        return diy_design.diy_redis_url(redis_url), enqueue

    # The plan's T threads shared out over the workers: more would be refused
    # (ERROR_NO_SLOT_AVAILABLE, which the client raises and the task does not retry).
    sizes = diy_design.split_concurrency(opts.threads, opts.workers)
    workers = [
        (
            f"diy-worker{i}",
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "captcha_tasks_dev.bench.diy_design",
                "worker",
                "-P",
                "threads",
                "-c",
                str(size),
                "-n",
                f"diy{i}@%h",
                "-l",
                "INFO",
            ],
        )
        for i, size in enumerate(sizes, start=1)
    ]
    interval = float(diy_design.sdk_timings(opts.time_scale)["pollingInterval"])
    estimate = math.ceil(opts.solves / opts.threads) * (opts.latency * (1 + opts.jitter) + interval)
    return _Design(
        name="diy",
        label="official SDK in a task",
        tasks=opts.solves,
        workers=workers,
        client=client,
        deadline=30 + 2 * (estimate + opts.latency),
        provider=opts.provider,
    )


_BASELINE_DESIGNS = {"diy": _diy, "seeds": _seeds}


# -- the run ----------------------------------------------------------------------------


def run_bench(opts: BenchOptions, say: Progress | None = None) -> dict[str, Any]:
    """Run ours, then each of ``opts.baselines``, and return parameters, wall time, each
    design's metrics and our lead over each (ours / theirs). Stops every process it
    started, on errors and Ctrl-C/SIGTERM too."""
    say = say or (lambda message: None)
    if "diy" in opts.baselines and PROTOCOLS[opts.provider] != "classic":
        raise CaptchaTasksError(
            f"the official 2Captcha client speaks in.php/res.php only: its column needs a "
            f"classic provider's sandbox, not {opts.provider}'s (--baseline seeds or none)"
        )
    started = time.monotonic()
    procs = Processes.logging_to(opts.log_dir, "captcha-tasks-bench-")
    saved_env = dict(os.environ)
    designs = [_ours(opts)] + [_BASELINE_DESIGNS[name](opts) for name in opts.baselines]
    tls = tls_files(procs.log_dir) if "diy" in opts.baselines else None
    if tls:
        # The official client speaks https only: every column faces the same https sandbox,
        # which this process (readiness, counters) and the workers trust.
        os.environ["REQUESTS_CA_BUNDLE"] = str(tls.ca)
        for design in designs:
            design.tls = tls
    succeeded = False
    try:
        runs = procs.run_each([partial(_run_design, d, opts, say=say) for d in designs])
        succeeded = True
    finally:
        os.environ.clear()
        os.environ.update(saved_env)
        if opts.log_dir is None and succeeded:
            shutil.rmtree(procs.log_dir, ignore_errors=True)
        elif not succeeded:
            say(f"logs kept in {procs.log_dir}")
    return {
        "parameters": {
            "threads": opts.threads,
            "latency": opts.latency,
            "jitter": opts.jitter,
            "solves": opts.solves,
            "baselines": list(opts.baselines),
            "baseline_solves": opts.baseline_solves if "seeds" in opts.baselines else 0,
            "diy_solves": opts.solves if "diy" in opts.baselines else 0,
            "diy_concurrency": diy_design.split_concurrency(opts.threads, opts.workers),
            "diy_sdk_timings": diy_design.sdk_timings(opts.time_scale),
            "sandbox_scheme": "https" if tls else "http",
            "time_scale": round(opts.time_scale, 6),
            "workers": opts.workers,
            "baseline_concurrency": opts.baseline_concurrency,
            "baseline_first_wait": opts.baseline_first_wait,
            "warmup": opts.warmup,
            "provider": opts.provider,
            "protocol": PROTOCOLS[opts.provider],
            "no_batch": opts.no_batch,
            "noop": opts.noop,
            "target_solves_per_second": round(opts.threads / opts.latency, 3),
            "cpus": os.cpu_count(),
            "environment": passed_environment(saved_env),
        },
        "wall_seconds": round(time.monotonic() - started, 1),
        "designs": {run.name: {"label": run.label, **run.metrics} for run in runs},
        "lead": {run.name: lead_ratios(runs[0].metrics, run.metrics) for run in runs[1:]},
    }
