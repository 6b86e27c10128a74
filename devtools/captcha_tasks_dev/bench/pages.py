"""The page benchmark: ``fetch_page`` with shared cookies against ``isolated=True``.

Two runs in one invocation, each against its own fresh ``redis-server`` and its own
fresh sandbox process with the demo site (``captcha-tasks-sandbox --demo-port``),
with real ``celery -A captcha_tasks worker -P prefork -c C`` processes:

1. start the workers (``CAPTCHA_TASKS_ALLOWED_DOMAINS=127.0.0.1:<demo port>``) and
   wait until each logs `` ready.``; note CPU times (psutil);
2. enqueue N ``fetch_page.delay(f"{demo}/page/{i}")`` at once (``isolated=True`` in
   the second run) from a child process (:mod:`.page_client`: the app reads its Redis
   from the environment once per process, and each run has its own Redis);
3. record each task's final state as the result backend publishes it, until all are
   in or the deadline passes;
4. read CPU times, the sandbox's and the demo site's ``GET /stats``, stop everything.

With sharing, one task solves the challenge under the host's session lock and the
others wait (parked, holding no worker slot and running no task until the lock is
released; ``fetch_page executions`` counts every run) and then reuse the validation cookie:
about one solve for the whole run. Isolated, every page is a visitor of its own:
about one solve per page.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
import shutil
import subprocess
import sys
import time
from functools import partial
from pathlib import Path
from typing import Any

import requests

from captcha_tasks.errors import CaptchaTasksError

from ..procs import free_port, wait_until
from .metrics import page_metrics
from .report import Row, cpu_rows, field, fields, render_report, section
from .solve import Progress
from .stack import (
    DECIDED,
    DOCUMENTED_V2_SECONDS,
    Processes,
    passed_environment,
    start_stack,
    start_workers,
)
from .watcher import ResultWatcher

__all__ = [
    "MODES",
    "SHARED_SOLVES_EXPECTED",
    "PagesOptions",
    "execution_counts",
    "format_pages_report",
    "run_pages",
]

#: (name, report label, isolated) of the two runs, in order.
MODES: tuple[tuple[str, str, bool], ...] = (
    ("shared", "shared cookies", False),
    ("isolated", "isolated=True", True),
)
#: The most solves a shared run should spend: one, and at worst a second one.
SHARED_SOLVES_EXPECTED = 2
#: Settings a run decides (the solve benchmark's and the demo site's domain); anything
#: else set in the environment is passed through and shown.
_DECIDED = (*DECIDED, "CAPTCHA_TASKS_ALLOWED_DOMAINS")


@dataclasses.dataclass(frozen=True)
class PagesOptions:
    #: ``celery worker`` processes (nodes).
    workers: int = 2
    #: Prefork pool size of each worker.
    concurrency: int = 10
    #: Pages enqueued per run (``/page/0`` .. ``/page/N-1``).
    pages: int = 200
    #: T: the plan's threads (sandbox ``--threads`` and ``CAPTCHA_TASKS_THREADS``).
    threads: int = 10
    #: Multiplies every live-provider time; the sandbox's reCAPTCHA v2 takes 15 s x this.
    time_scale: float = 0.1
    #: Each solve takes its latency times a uniform factor in [1 - jitter, 1 + jitter].
    jitter: float = 0.2
    #: Where worker, sandbox and Redis logs go; None: a temporary directory, kept when
    #: the run fails, a page fails or a shared run spends too many solves.
    log_dir: Path | None = None

    @property
    def solve_seconds(self) -> float:
        """Real seconds of one reCAPTCHA v2 solve at the sandbox (before jitter)."""
        return DOCUMENTED_V2_SECONDS * self.time_scale

    @property
    def deadline(self) -> float:
        """Seconds after the last enqueue when a run stops waiting: twice the time the
        isolated run needs at the plan's thread limit, plus 30 s."""
        rounds = math.ceil(self.pages / self.threads)
        return round(30 + 2 * rounds * self.solve_seconds * (1 + self.jitter), 1)


def _enqueue(
    procs: Processes,
    name: str,
    demo_url: str,
    opts: PagesOptions,
    env: dict[str, str],
    isolated: bool,
) -> tuple[dict[str, float], float, dict[str, Any]]:
    """Run the client: it enqueues, then collects with a loop of ``get()`` (what callers
    write); the enqueue times, the end of the enqueueing, and each get()'s span."""
    argv = [
        sys.executable,
        "-m",
        "captcha_tasks_dev.bench.page_client",
        demo_url,
        str(opts.pages),
        "--get",
        str(opts.deadline),
    ]
    argv += ["--isolated"] if isolated else []
    with (procs.log_dir / f"{name}-client.log").open("ab") as log:
        done = subprocess.run(
            argv,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=log,
            timeout=120 + 2 * opts.deadline,
            check=False,
        )
    lines = done.stdout.decode(errors="replace").strip().splitlines()
    if done.returncode != 0 or not lines:
        raise CaptchaTasksError(
            f"{name}: the enqueuing client exited with {done.returncode}:\n"
            f"{procs.log(f'{name}-client')}"
        )
    out = json.loads(lines[-1])
    enqueued = {str(k): float(v) for k, v in out["enqueued"].items()}
    return enqueued, float(out["end"]), dict(out.get("gets") or {})


def caller_metrics(gets: dict[str, Any], outcomes: dict[str, Any]) -> dict[str, Any]:
    """How the caller's ``[r.get() for r in results]`` loop fared: the seconds its get()s
    of tasks already finished when called took in all, how many there were, and how
    long after the last result was stored the loop ended."""
    spans = {tid: span for tid, span in gets.items() if span and tid in outcomes}
    finished = [end - start for tid, (start, end) in spans.items() if start >= outcomes[tid].at]
    last_stored = max((o.at for o in outcomes.values()), default=None)
    loop_end = max((end for _, end in spans.values()), default=None)
    lag = None if last_stored is None or loop_end is None else max(0.0, loop_end - last_stored)
    return {
        "gets_of_finished": len(finished),
        "gets_of_finished_seconds": round(sum(finished), 3),
        "get_loop_after_last_result_seconds": None if lag is None else round(lag, 3),
    }


#: What a worker logs (at INFO) for each message of a task it receives, for each page
#: task parked waiting for a session lock (captcha_tasks.worker.session_bases), and for
#: a challenged page that goes on as ``solve | submit_challenge`` under its id (the
#: submit step is then received under fetch_page's name: it is not a page execution).
_RECEIVED = re.compile(r"^\[([^\]]+?): .*Task captcha_tasks\.fetch_page\[([^\]]+)\] received")
_CHALLENGED = re.compile(r"^\[([^\]]+?): .*Task captcha_tasks\.fetch_page\[([^\]]+)\] challenged")
_RETRIED = re.compile(r"Task captcha_tasks\.fetch_page\[[^\]]+\] retry")
_PARKED = "parked until the session lock"


def execution_counts(logs: str) -> dict[str, int]:
    """``fetch_page`` executions (messages received, so retries and re-sends count, but
    not a challenged page's submit step), retries and parks, counted in the workers'
    logs (one or several, in any order: lines are taken in their timestamps' order)."""
    marks = sorted(
        (m.group(1), kind, m.group(2))
        for line in logs.splitlines()
        for kind, pattern in (("received", _RECEIVED), ("challenged", _CHALLENGED))
        if (m := pattern.match(line))
    )
    challenged: set[str] = set()
    executions = 0
    for _, kind, task_id in marks:
        if kind == "challenged":
            challenged.add(task_id)
        elif task_id in challenged:
            challenged.discard(task_id)  # its submit step
        else:
            executions += 1
    return {
        "page_executions": executions,
        "page_retries_logged": len(_RETRIED.findall(logs)),
        "page_parks": logs.count(_PARKED),
    }


def _run_mode(
    name: str, label: str, isolated: bool, opts: PagesOptions, procs: Processes, say: Progress
) -> dict[str, Any]:
    demo_port = free_port()
    stack = start_stack(
        procs,
        name,
        threads=opts.threads,
        time_scale=opts.time_scale,
        jitter=opts.jitter,
        sandbox_args=["--demo-port", str(demo_port)],
        decided=_DECIDED,
        env={"CAPTCHA_TASKS_ALLOWED_DOMAINS": f"127.0.0.1:{demo_port}"},
    )
    sandbox_url, env = stack.sandbox_url, stack.env
    demo_url = f"http://127.0.0.1:{demo_port}"
    wait_until(
        lambda: requests.get(f"{demo_url}/healthz", timeout=1).ok, timeout=15, what="the demo site"
    )
    say(f"{label}: redis {stack.redis.url}, sandbox {sandbox_url}, demo site {demo_url}")
    argvs = [
        (
            f"{name}-worker{i}",
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "captcha_tasks",
                "worker",
                "-P",
                "prefork",
                "-c",
                str(opts.concurrency),
                "-n",
                f"pages{i}@%h",
                "-l",
                "INFO",
            ],
        )
        for i in range(1, opts.workers + 1)
    ]
    workers = start_workers(procs, argvs, env)
    pools = [size for _, size in workers]
    say(f"{label}: {len(workers)} worker(s) ready (pool sizes {pools})")
    watcher = ResultWatcher(stack.redis.url).start()
    try:
        probe = stack.cpu_probe(workers)
        before = probe.read()
        say(f"{label}: enqueueing {opts.pages} pages")
        enqueued, enqueue_end, gets = _enqueue(procs, name, demo_url, opts, env, isolated)
        watcher.wait(list(enqueued), time.monotonic() + opts.deadline)
        after = probe.read()
        outcomes = dict(watcher.outcomes)
    finally:
        watcher.stop()
    retries = watcher.states["RETRY"]
    logs = "".join(procs.log(log_name) for log_name, _ in argvs)
    solver_stats = requests.get(f"{sandbox_url}/stats", timeout=10).json()
    demo_stats = requests.get(f"{demo_url}/stats", timeout=10).json()
    procs.stop([p for p, _ in workers])
    metrics = page_metrics(
        pages=opts.pages,
        enqueued=enqueued,
        enqueue_end=enqueue_end,
        outcomes=outcomes,
        solver_stats=solver_stats,
        demo_stats=demo_stats,
        cpu={k: after[k] - before[k] for k in after},
        retries=retries,
    )
    metrics["worker_processes"] = sum(size or 0 for size in pools)
    metrics.update(execution_counts(logs))
    metrics.update(caller_metrics(gets, outcomes))
    say(
        f"{label}: {metrics['pages_ok']}/{opts.pages} pages ok in {metrics['wall_seconds']} s, "
        f"{metrics['solves_submitted']} solve(s)"
    )
    return {"label": label, "isolated": isolated, **metrics}


def _notes(runs: dict[str, dict[str, Any]]) -> list[str]:
    """What a reader should not miss: failed pages, a shared run that solved too often."""
    notes = []
    for run in runs.values():
        if run["failures"]:
            notes.append(f"{run['label']}: {run['failures']} of {run['pages']} pages failed")
    shared = runs.get("shared")
    if shared and shared["solves_submitted"] > SHARED_SOLVES_EXPECTED:
        notes.append(
            f"shared cookies: {shared['solves_submitted']} solves spent, expected at most "
            f"{SHARED_SOLVES_EXPECTED}"
        )
    return notes


def run_pages(opts: PagesOptions, say: Progress | None = None) -> dict[str, Any]:
    """Both runs (shared first) and their figures. Stops every process it started, on
    errors and Ctrl-C/SIGTERM too. Logs are kept (and named in the report) when a run
    raised, a page failed or the shared run spent more than ``SHARED_SOLVES_EXPECTED``
    solves; with ``log_dir`` always."""
    say = say or (lambda message: None)
    started = time.monotonic()
    procs = Processes.logging_to(opts.log_dir, "captcha-tasks-bench-pages-")
    log_dir = procs.log_dir
    keep = True
    try:
        results = procs.run_each([partial(_run_mode, *mode, opts, say=say) for mode in MODES])
        runs = {name: run for (name, _, _), run in zip(MODES, results, strict=True)}
        keep = opts.log_dir is not None or bool(_notes(runs))
    finally:
        if keep:
            say(f"logs kept in {log_dir}")
        else:
            shutil.rmtree(log_dir, ignore_errors=True)
    notes = _notes(runs)
    return {
        "parameters": {
            "pages": opts.pages,
            "workers": opts.workers,
            "concurrency": opts.concurrency,
            "worker_processes": opts.workers * opts.concurrency,
            "threads": opts.threads,
            "time_scale": opts.time_scale,
            "jitter": opts.jitter,
            "recaptcha_v2_seconds": round(opts.solve_seconds, 4),
            "deadline_seconds": opts.deadline,
            "cpus": os.cpu_count(),
            "environment": passed_environment(os.environ, _DECIDED),
        },
        "ok": not notes,
        "notes": notes,
        "logs": str(log_dir) if keep else None,
        "wall_seconds": round(time.monotonic() - started, 1),
        "runs": runs,
    }


# -- the report -------------------------------------------------------------------------

_ROWS: list[Row] = [
    section("pages"),
    Row("pages ok (HTTP 200) / total", fields("pages_ok", "pages")),
    Row("failures", field("failures", "d")),
    Row(
        "  task raised / other HTTP status / unfinished",
        fields("failed_tasks", "other_status", "unfinished"),
    ),
    section("solves"),
    Row("solves spent (sandbox submits)", field("solves_submitted", "d")),
    Row("results with solved=True", field("results_solved_true", "d")),
    Row("solves per page", field("solves_per_page", ".3f")),
    Row(
        "token source of the results (api / pool / none)",
        fields("source_api", "source_pool", "source_none"),
    ),
    section("demo site"),
    Row("challenges served", field("challenges", "d")),
    Row("tokens accepted / rejected", fields("tokens_accepted", "tokens_rejected")),
    Row("content pages served", field("pages_served", "d")),
    section("time"),
    Row("wall time, first enqueue -> last result (s)", field("wall_seconds", ".2f")),
    Row("pages per second", field("pages_per_second", ".1f")),
    Row(
        "page time, enqueue -> result (s; p50 / p95 / max)",
        fields("page_seconds_p50", "page_seconds_p95", "page_seconds_max", spec=".2f"),
    ),
    Row("enqueue all pages (s)", field("enqueue_seconds", ".2f")),
    Row("task retries (waiting for the session lock)", field("task_retries", "d")),
    Row("fetch_page executions (worker logs)", field("page_executions", "d")),
    Row("  retries / parks (worker logs)", fields("page_retries_logged", "page_parks")),
    section("the caller: [r.get() for r in results] right after enqueueing"),
    Row(
        "get()s of finished tasks: count / seconds in all",
        fields("gets_of_finished", "gets_of_finished_seconds"),
    ),
    Row("loop ends after the last result (s)", field("get_loop_after_last_result_seconds", ".2f")),
    *cpu_rows("page"),
]


def format_pages_report(report: dict[str, Any]) -> str:
    """The report as a text table: one column per run."""
    p = report["parameters"]
    intro = [
        f"captcha-tasks-dev bench pages: {p['pages']} pages per run, all enqueued at once",
        f"{p['workers']} workers x prefork -c {p['concurrency']} "
        f"({p['worker_processes']} worker processes), T={p['threads']} solver threads, "
        f"time scale {p['time_scale']} (reCAPTCHA v2 ~ {p['recaptcha_v2_seconds']:g} s, "
        f"jitter {p['jitter']}), {p['cpus']} CPUs",
        f"each run: fresh redis-server, sandbox and demo site; deadline "
        f"{p['deadline_seconds']:g} s after the last enqueue",
    ]
    runs = list(report["runs"].values())
    lines = render_report(intro, p["environment"], _ROWS, runs)
    for run in runs:
        if run["failure_reasons"]:
            lines.append("")
            lines.append(f"{run['label']}: why pages failed (most frequent first)")
            lines.extend(f"  {n:5d}  {reason}" for reason, n in run["failure_reasons"].items())
    lines.append("")
    for note in report["notes"]:
        lines.append(f"NOTE: {note}")
    if report["logs"]:
        lines.append(f"logs: {report['logs']}")
    lines.append(f"wall time of the benchmark: {report['wall_seconds']} s")
    return "\n".join(lines)
