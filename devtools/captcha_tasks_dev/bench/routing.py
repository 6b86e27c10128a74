"""The routing benchmark: order routing against cost routing (``CAPTCHA_TASKS_ROUTING``).

Two providers, each a sandbox: A (2captcha's dialect) at $1.00 per 1000 solves, whose
tokens the demo site refuses 70% of the time, and B (captchaai's) at $2.00 refused 5%;
one demo site judges both (it trusts B's tokens, :meth:`.DemoSite.trust`). The site is
as strict as real ones: each load's form is good once, for the visitor that loaded it,
and shows another sitekey (``demo_rotate_sitekey``); it counts the posts of stale or
expired forms, which the report shows. Three runs
in one invocation (:data:`MODES`): order routing (A first) with one token per page (a
page fails at its first refused token); order routing with the default
attempts (a refused page's retry goes to the provider not yet refused); cost routing.
Each on a fresh Redis, fresh sandboxes and fresh ``celery worker`` processes, with the
same steps:

1. ``--pages`` isolated ``fetch_page`` runs, ``--in-flight`` of them open at once (a
   scraper's loop: a new page as soon as one ends, :mod:`.routing_client`), A refused
   70%;
2. then the site stops refusing A's tokens more than B's (5% each, the sandbox's
   ``POST /admin/config`` at runtime) for ``--after`` more pages.

Each solve's provider and admission time are read from its job in Redis (its page from
its captcha's ``pageurl``): a page's first solve is its earliest. The acceptance window
is scaled like every other time (``CAPTCHA_TASKS_ACCEPTANCE_WINDOW`` = 900 s x the time
scale, at least 60 s), so the figures' real seconds over the time scale are the
seconds a deployment with the default window would see.
"""

from __future__ import annotations

import dataclasses
import decimal
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import redis

from captcha_tasks.errors import CaptchaTasksError
from captcha_tasks.settings import Settings
from captcha_tasks_sandbox import SandboxConfig, SandboxServer, dev_api_key

from .report import Row, field, fields, render_report, section
from .solve import Progress
from .stack import DECIDED, DOCUMENTED_V2_SECONDS, Processes, passed_environment, start_workers

__all__ = [
    "MODES",
    "PRICES",
    "SITE_COUNTERS",
    "RoutingOptions",
    "format_routing_report",
    "routing_metrics",
    "run_routing",
]

#: (run, CAPTCHA_TASKS_ROUTING, CAPTCHA_TASKS_PAGE_ATTEMPTS or None for the default,
#: report label) of the runs, in order. The first is order routing with one token per page
#: (``CAPTCHA_TASKS_PAGE_ATTEMPTS=1``): a page fails at its first refused token.
MODES: tuple[tuple[str, str, int | None, str], ...] = (
    ("order-1", "order", 1, "order (A first), one token per page"),
    ("order", "order", None, "order (A first)"),
    ("cost", "cost", None, "cost"),
)
#: Each provider's price per solve (USD) and the share of its tokens the site refuses
#: before the change.
PRICES = {"a": decimal.Decimal("0.001"), "b": decimal.Decimal("0.002")}
REFUSED = {"a": 0.7, "b": 0.05}
#: The share of every provider's tokens the site refuses after the change.
REFUSED_AFTER = 0.05
#: The demo site's counters each run reports: forms served, and posts of stale forms
#: (spent, another visitor's, missing) or expired ones (both 0 when every post is fresh).
SITE_COUNTERS = ("forms_issued", "stale_forms", "expired_forms", "tokens_rejected")
#: Pages before the steady state: cost routing must have converged within them.
CONVERGED_BY = 100
#: Pages over which A must take most first solves to count as "moved back".
BACK_SPAN = 20
#: A's share of the first solves over ``BACK_SPAN`` pages that counts as moved back.
BACK_SHARE = 0.7
_DECIDED = (
    *DECIDED,
    "CAPTCHA_TASKS_ALLOWED_DOMAINS",
    "CAPTCHA_TASKS_PROVIDERS",
    "CAPTCHA_TASKS_ROUTING",
    "CAPTCHA_TASKS_ACCEPTANCE_WINDOW",
    "CAPTCHA_TASKS_PAGE_ATTEMPTS",
)


_CELERY = (sys.executable, "-m", "celery", "-A", "captcha_tasks", "worker", "-P", "prefork")


@dataclasses.dataclass(frozen=True)
class RoutingOptions:
    #: Pages per run with A refused 70% (the comparison).
    pages: int = 400
    #: Pages per run after the site stops refusing A's tokens more than B's (about 80 s
    #: at the default scale: five half-lives of the scaled window's verdicts).
    after: int = 400
    #: Pages open at once (the scraper's concurrency).
    in_flight: int = 16
    #: ``celery worker`` processes, each ``-P prefork -c concurrency``.
    workers: int = 1
    concurrency: int = 8
    #: Multiplies every live-provider time (reCAPTCHA v2: 15 s x this) and the window.
    time_scale: float = 0.1
    jitter: float = 0.2
    #: Pages per row of the first-solve shares.
    window: int = 50
    #: Seed of the sandboxes' random choices (the demo site's refusals among them).
    seed: int = 7
    log_dir: Path | None = None

    @property
    def acceptance_window(self) -> float:
        return max(60.0, 900.0 * self.time_scale)


def _first_solves(jobs: list[dict[str, Any]]) -> dict[int, list[dict[str, Any]]]:
    """Each page's solves, earliest first."""
    out: dict[int, list[dict[str, Any]]] = {}
    for job in sorted(jobs, key=lambda j: j["enqueued_at"]):
        out.setdefault(job["page"], []).append(job)
    return out


def _spend(solves: list[dict[str, Any]]) -> decimal.Decimal:
    return sum(
        (PRICES[j["provider"]] for j in solves if j["charged"] and j["provider"] in PRICES),
        decimal.Decimal(0),
    )


def _phase(
    pages: list[dict[str, Any]], solves: dict[int, list[dict[str, Any]]], time_scale: float
) -> dict[str, Any]:
    """Spend per accepted page, pages per minute and A's share of first solves of
    ``pages``."""
    if not pages:
        return {}
    charged = [j for p in pages for j in solves.get(p["i"], [])]
    accepted = sum(p.get("status") == 200 for p in pages)
    spend = _spend(charged)
    firsts = [solves[p["i"]][0]["provider"] for p in pages if solves.get(p["i"])]
    ended = [p["ended"] for p in pages if "ended" in p]
    span = (max(ended) - min(p["sent"] for p in pages)) if ended else 0.0
    per_minute = 60 * len(ended) / span if span > 0 else None
    return {
        "pages": len(pages),
        "accepted": accepted,
        "solves": len(charged),
        "solves_a": sum(j["provider"] == "a" for j in charged),
        "solves_per_accepted": len(charged) / accepted if accepted else None,
        "spend": float(spend),
        "spend_per_accepted": float(spend / accepted) if accepted else None,
        "first_a": firsts.count("a") / len(firsts) if firsts else None,
        "pages_per_minute": per_minute,
        "pages_per_minute_scaled": None if per_minute is None else per_minute * time_scale,
    }


def routing_metrics(
    pages: list[dict[str, Any]],
    jobs: list[dict[str, Any]],
    *,
    before: int,
    changed_at: float | None,
    window: int,
    time_scale: float,
) -> dict[str, Any]:
    """One run's figures from its pages (the client's records) and its solves' jobs
    (``page``, ``provider``, ``enqueued_at``, ``charged``): the first ``before`` pages
    (whole and after :data:`CONVERGED_BY`), the pages after the change, A's share of
    first solves per ``window`` pages, and when A took the first solves back."""
    solves = _first_solves(jobs)
    ordered = sorted(pages, key=lambda p: p["i"])
    first = [p for p in ordered if p["i"] < before]
    later = [p for p in ordered if p["i"] >= before]
    shares = []
    for start in range(0, len(ordered), window):
        chunk = [solves[p["i"]][0]["provider"] for p in ordered[start : start + window]]
        chunk = [name for name in chunk if name]
        shares.append(round(chunk.count("a") / len(chunk), 2) if chunk else None)
    back_page = back_seconds = None
    firsts = [solves[p["i"]][0]["provider"] if solves.get(p["i"]) else "" for p in later]
    for k in range(0, max(0, len(later) - BACK_SPAN + 1)):
        if firsts[k : k + BACK_SPAN].count("a") >= BACK_SHARE * BACK_SPAN:
            back_page = later[k]["i"] - before
            if changed_at is not None:
                back_seconds = max(0.0, later[k]["sent"] - changed_at)
            break
    steady_after = [p for p in later if back_page is not None and p["i"] - before >= back_page]
    return {
        "whole": _phase(first, solves, time_scale),
        "steady": _phase([p for p in first if p["i"] >= CONVERGED_BY], solves, time_scale),
        "after": _phase(later, solves, time_scale),
        "after_back": _phase(steady_after, solves, time_scale),
        "first_a_by_window": shares,
        "back_after_pages": back_page,
        "back_after_seconds": None if back_seconds is None else round(back_seconds, 1),
        "back_after_minutes_scaled": (
            None if back_seconds is None else round(back_seconds / time_scale / 60, 1)
        ),
        "failed": sum(p.get("status") != 200 for p in ordered),
        # Pages that ended otherwise than served or refused (ChallengeRejected) for good.
        "broken": sum(
            p.get("status") != 200 and p.get("error") != "ChallengeRejected" for p in ordered
        ),
    }


def read_jobs(client: redis.Redis, prefix: str) -> list[dict[str, Any]]:
    """Every solve job of the run: its page, provider, admission time and whether it was
    charged (solved)."""
    out = []
    for key in client.scan_iter(f"{prefix}job:*", count=500):
        state, result, captcha, enqueued, lane = client.hmget(
            key, "state", "result", "captcha", "enqueued_at", "provider"
        )
        if not captcha or not enqueued:
            continue
        url = json.loads(captcha).get("fields", {}).get("pageurl", "")
        path = urlsplit(str(url)).path
        if not path.startswith("/page/"):
            continue
        provider = json.loads(result).get("provider") if result else lane
        out.append(
            {
                "page": int(path.rsplit("/", 1)[1]),
                "provider": str(provider or ""),
                "enqueued_at": float(enqueued),
                "charged": state == "done",
            }
        )
    return out


def _providers_env(a: SandboxServer, b: SandboxServer) -> dict[str, str]:
    env = {"CAPTCHA_TASKS_PROVIDERS": "a,b"}
    for name, protocol, sandbox, price in (
        ("A", "2captcha", a, "1.00"),
        ("B", "captchaai", b, "2.00"),
    ):
        env[f"CAPTCHA_TASKS_{name}_PROTOCOL"] = protocol
        env[f"CAPTCHA_TASKS_{name}_URL"] = sandbox.url
        env[f"CAPTCHA_TASKS_{name}_API_KEY"] = dev_api_key(protocol)
        env[f"CAPTCHA_TASKS_{name}_PRICES"] = f"recaptcha_v2={price}"
        env[f"CAPTCHA_TASKS_{name}_THREADS"] = "100"
    return env


def _run_mode(
    mode: tuple[str, str, int | None, str], opts: RoutingOptions, procs: Processes, say: Progress
) -> dict[str, Any]:
    server = procs.redis()
    common = {
        "threads": 100,
        "time_scale": opts.time_scale,
        "jitter": opts.jitter,
        "latency": {"recaptcha_v2": DOCUMENTED_V2_SECONDS},
    }
    a = SandboxServer(
        SandboxConfig(
            dialect="2captcha",
            demo_port=0,
            reject_rates={"2captcha": REFUSED["a"], "captchaai": REFUSED["b"]},
            demo_rotate_sitekey=True,
            seed=opts.seed,
            **common,  # type: ignore[arg-type]
        )
    ).start()
    try:
        # Its own seed: the same one would draw A's tokens, which the site (trusting both)
        # would then take for B's, already used.
        b_config = SandboxConfig(dialect="captchaai", seed=opts.seed + 1, **common)  # type: ignore[arg-type]
        b = SandboxServer(b_config).start()
        try:
            assert a.demo is not None and a.demo_url is not None
            a.demo.trust(b.state)
            return _measure(mode, opts, procs, say, server.url, a, b)
        finally:
            b.stop()
    finally:
        a.stop()


def _measure(
    mode: tuple[str, str, int | None, str],
    opts: RoutingOptions,
    procs: Processes,
    say: Progress,
    redis_url: str,
    a: SandboxServer,
    b: SandboxServer,
) -> dict[str, Any]:
    run, routing, attempts, label = mode
    demo_url = str(a.demo_url)
    env = {k: v for k, v in os.environ.items() if k not in _DECIDED}
    if attempts is not None:
        env["CAPTCHA_TASKS_PAGE_ATTEMPTS"] = str(attempts)
    env.update(
        CAPTCHA_TASKS_REDIS_URL=redis_url,
        CAPTCHA_TASKS_TIME_SCALE=repr(opts.time_scale),
        CAPTCHA_TASKS_ALLOWED_DOMAINS=urlsplit(demo_url).netloc,
        CAPTCHA_TASKS_ROUTING=routing,
        CAPTCHA_TASKS_ACCEPTANCE_WINDOW=repr(opts.acceptance_window),
        PYTHONUNBUFFERED="1",
        **_providers_env(a, b),
    )
    argvs = [
        (
            f"{run}-worker{i}",
            [*_CELERY, "-c", str(opts.concurrency), "-n", f"routing{i}@%h", "-l", "INFO"],
        )
        for i in range(1, opts.workers + 1)
    ]
    workers = start_workers(procs, argvs, env)
    say(f"{label}: {len(workers)} worker(s) ready; {opts.pages} + {opts.after} pages")
    total = opts.pages + opts.after
    timeout = 120 + 4 * total * DOCUMENTED_V2_SECONDS * opts.time_scale
    argv = [sys.executable, "-m", "captcha_tasks_dev.bench.routing_client", demo_url]
    argv += [str(total), "--in-flight", str(opts.in_flight), "--timeout", str(timeout)]
    if opts.after:
        argv += ["--change-at", str(opts.pages), "--change-url", f"{a.url}/admin/config"]
        argv += ["--change-body", json.dumps({"reject_rates": {"*": REFUSED_AFTER}})]
    with (procs.log_dir / f"{run}-client.log").open("ab") as log:
        done = subprocess.run(
            argv,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=log,
            timeout=timeout + 60,
            check=False,
        )
    lines = done.stdout.decode(errors="replace").strip().splitlines()
    if done.returncode != 0 or not lines:
        raise CaptchaTasksError(
            f"{label}: the client exited with {done.returncode}:\n{procs.log(f'{run}-client')}"
        )
    out = json.loads(lines[-1])
    prefix = Settings.from_env(env).key_prefix
    jobs = read_jobs(redis.Redis.from_url(redis_url, decode_responses=True), prefix)
    procs.stop([p for p, _ in workers])
    metrics = routing_metrics(
        out["pages"],
        jobs,
        before=opts.pages,
        changed_at=out.get("changed_at"),
        window=opts.window,
        time_scale=opts.time_scale,
    )
    metrics["sandbox_solves"] = {
        "a": a.stats().get("submitted"),
        "b": b.stats().get("submitted"),
    }
    assert a.demo is not None
    site = a.demo.stats()
    metrics["site"] = {name: site[name] for name in SITE_COUNTERS}
    whole = metrics["whole"]
    say(
        f"{label}: {whole['accepted']}/{whole['pages']} pages, "
        f"${whole['spend_per_accepted']:.6f} per accepted page, "
        f"A's first solves by {opts.window}: {metrics['first_a_by_window']}"
    )
    return {"label": label, "routing": routing, "page_attempts": attempts, **metrics}


def run_routing(opts: RoutingOptions, say: Progress | None = None) -> dict[str, Any]:
    """The runs of :data:`MODES`, in turn, and their figures; every process started is
    stopped. ``cost_saving_whole``: what cost routing saves per accepted page over order
    routing, with the default page attempts; ``cost_saving_one_token``: over order
    routing with one token per page."""
    say = say or (lambda message: None)
    started = time.monotonic()
    procs = Processes.logging_to(opts.log_dir, "captcha-tasks-bench-routing-")
    keep = True
    try:
        results = procs.run_each([_mode(mode, opts, say) for mode in MODES])
        runs = {mode[0]: run for mode, run in zip(MODES, results, strict=True)}
        keep = opts.log_dir is not None or any(run["broken"] for run in runs.values())
    finally:
        if keep:
            say(f"logs kept in {procs.log_dir}")
        else:
            shutil.rmtree(procs.log_dir, ignore_errors=True)
    cost = runs["cost"]["whole"]

    def saving(over: str) -> float | None:
        base = runs[over]["whole"].get("spend_per_accepted")
        if not base or not cost.get("spend_per_accepted"):
            return None
        return round(1 - float(cost["spend_per_accepted"]) / float(base), 3)

    return {
        "parameters": {
            **{k: v for k, v in dataclasses.asdict(opts).items() if k != "log_dir"},
            "acceptance_window": opts.acceptance_window,
            "recaptcha_v2_seconds": round(DOCUMENTED_V2_SECONDS * opts.time_scale, 3),
            "cpus": os.cpu_count(),
            "environment": passed_environment(os.environ, _DECIDED),
        },
        "cost_saving_whole": saving("order"),
        "cost_saving_one_token": saving("order-1"),
        "logs": str(procs.log_dir) if keep else None,
        "wall_seconds": round(time.monotonic() - started, 1),
        "runs": runs,
    }


def _mode(
    mode: tuple[str, str, int | None, str], opts: RoutingOptions, say: Progress
) -> Callable[[Processes], dict[str, Any]]:
    return lambda procs: _run_mode(mode, opts, procs, say)


# -- the report -------------------------------------------------------------------------


def _phase_rows(key: str, title: str) -> list[Row]:
    def get(name: str, spec: str) -> Any:
        return lambda run: field(name, spec)(run.get(key) or {})

    return [
        section(title),
        Row("pages accepted / pages", lambda run: fields("accepted", "pages")(run.get(key) or {})),
        Row("solves (of them A's)", lambda run: fields("solves", "solves_a")(run.get(key) or {})),
        Row("solves per accepted page", get("solves_per_accepted", ".2f")),
        Row("USD per accepted page", get("spend_per_accepted", ".6f")),
        Row("share of first solves at A", get("first_a", ".0%")),
        Row("pages per minute, real", get("pages_per_minute", ".1f")),
        Row("pages per minute, scaled (real x time scale)", get("pages_per_minute_scaled", ".1f")),
    ]


_ROWS: list[Row] = [
    *_phase_rows("whole", "A refused 70%: the whole run"),
    *_phase_rows("steady", f"A refused 70%: steady state (pages {CONVERGED_BY} on)"),
    *_phase_rows("after", "after the change (A refused 5%): the whole phase"),
    *_phase_rows("after_back", "after the change: from the page A took the first solves back"),
    section("moving back to A after the change"),
    Row("pages until A takes the first solves back", field("back_after_pages", "d")),
    Row("real seconds after the change", field("back_after_seconds", ".1f")),
    Row("scaled minutes (real / time scale)", field("back_after_minutes_scaled", ".1f")),
    Row("pages lost (ChallengeRejected) / otherwise failed", fields("failed", "broken")),
    section("the site, over the whole run"),
    Row(
        "forms served / stale posts / expired posts",
        lambda run: fields("forms_issued", "stale_forms", "expired_forms")(run.get("site") or {}),
    ),
    Row("tokens refused", lambda run: field("tokens_rejected", "d")(run.get("site") or {})),
]


def format_routing_report(report: dict[str, Any]) -> str:
    p = report["parameters"]
    intro = [
        f"captcha-tasks-dev bench routing: A $1.00/1000 refused 70%, B $2.00/1000 refused 5%; "
        f"{p['pages']} isolated pages, then {p['after']} with every token refused 5%",
        f"{p['in_flight']} pages in flight, {p['workers']} worker(s) x prefork -c "
        f"{p['concurrency']}, time scale {p['time_scale']} (reCAPTCHA v2 ~ "
        f"{p['recaptcha_v2_seconds']:g} s), acceptance window {p['acceptance_window']:g} s "
        f"(900 s scaled), {p['cpus']} CPUs",
    ]
    runs = list(report["runs"].values())
    lines = render_report(intro, p["environment"], _ROWS, runs)
    lines.append("")
    for run in runs:
        lines.append(
            f"{run['label']}: A's share of first solves per {p['window']} pages "
            f"(the change after page {p['pages']}): {run['first_a_by_window']}"
        )
    if report["cost_saving_whole"] is not None:
        lines.append(
            f"cost routing spends {report['cost_saving_whole']:.0%} less per accepted page "
            "than order routing over the first phase's whole run"
        )
    if report.get("cost_saving_one_token") is not None:
        lines.append(
            f"cost routing spends {report['cost_saving_one_token']:.0%} less per accepted page "
            "than order routing with one token per page (no retry) over the same phase"
        )
    if report["logs"]:
        lines.append(f"logs: {report['logs']}")
    lines.append(f"wall time of the benchmark: {report['wall_seconds']} s")
    return "\n".join(lines)
