"""The fault suite's cluster: a private redis-server (AOF on), the sandbox, real workers.

:class:`Cluster` starts a ``redis-server`` of its own (so it can be restarted or taken
away without touching the rest of the test session), ``celery worker`` processes that
talk to it and to a sandbox, and a Celery client bound to it. :class:`Load` sends solve
tasks at a steady rate from a thread while a test injects a fault; :meth:`Cluster.finish`
waits for every task to end and turns what happened into a :class:`Row`:

- **lost**: a task accepted by the broker that has no final state by the deadline;
- **duplicate submits**: a job submitted to the provider again while an earlier submit
  of it was not answered ``ERROR_CAPTCHA_UNSOLVABLE`` (the one deliberate resubmit),
  found by the sandbox's per-captcha parameter fingerprints (every task's page URL is
  unique);
- **provider requests**: ``in.php`` + ``res.php`` requests the sandbox answered;
- **leaked secrets**: occurrences of the API key or the proxy password in Redis (every
  key and value, snapshots taken mid-run and after), the result backend, the broker's
  messages and the workers' logs.

Everything runs on loopback and every process is stopped by PID.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import secrets
import signal
import string
import sys
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import psutil
import redis
import requests
from celery import Celery

from captcha_tasks.session.proxies import ProxyPool
from captcha_tasks.settings import Settings
from captcha_tasks.state import Keys, state_redis
from captcha_tasks.worker.celery_internals.broker import (
    failover_strategy_for,
    sentinel_transport_options,
    transport_for,
)
from captcha_tasks_dev.procs import Child, Supervisor, free_port, logged, wait_ready
from captcha_tasks_dev.redis_server import RedisServer
from captcha_tasks_sandbox import SandboxServer
from tests.support.secret_scan import redis_dump
from tests.support.workers import ROOT

TIME_SCALE = 0.05
#: Redis redelivers a SIGKILLed worker's reserved messages after this (production: 3600).
VISIBILITY_TIMEOUT = 20
RECAPTCHA_KEY = "6Le-wvkSAAAAAPBMRTvw0Q4Muexq9bi0DJwx_mJ-"
KINDS = ("recaptcha_v2", "recaptcha_v3", "turnstile")
SITEKEYS = {
    "recaptcha_v2": RECAPTCHA_KEY,
    "recaptcha_v3": RECAPTCHA_KEY,
    "turnstile": "0x4AAAAAAABkMYinukE8nzY",
}
TASK_NAMES = {kind: f"captcha_tasks.solve_{kind}" for kind in KINDS}
FINAL_STATES = {"SUCCESS", "FAILURE", "REVOKED"}


def _secret(prefix: str, n: int) -> str:
    alphabet = string.ascii_letters + string.digits
    return prefix + "".join(secrets.choice(alphabet) for _ in range(n - len(prefix)))


def scale() -> str:
    """``quick`` (``make test``) or ``full`` (``make chaos``: more tasks, more rounds)."""
    value = os.environ.get("CAPTCHA_TASKS_CHAOS", "quick")
    if value not in ("quick", "full"):
        raise ValueError(f"CAPTCHA_TASKS_CHAOS must be quick or full, not {value!r}")
    return value


def sized(quick: int, full: int) -> int:
    return quick if scale() == "quick" else full


@dataclass
class Row:
    """One line of docs/RELIABILITY.md."""

    fault: str
    run: str
    tasks: int = 0
    solved: int = 0
    typed_errors: dict[str, int] = field(default_factory=dict)
    refused_at_send: dict[str, int] = field(default_factory=dict)
    lost: int = 0
    #: Of ``lost``, the tasks proven lost to the fault by design (the Sentinel row whose
    #: replica is behind: every task accepted in the replication window).
    explained_losses: int = 0
    untyped: int = 0
    duplicates: int = 0
    submits: int = 0
    provider_requests: int = 0
    leaked: int = 0
    seconds: float = 0.0
    notes: str = ""
    #: The row's test: its file, line and name (rows recorded side by side by several
    #: pytest workers are put back in the suite's order by this).
    test: tuple[str, int, str] = ("", 0, "")

    def as_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)


def rows_file() -> Path:
    return Path(os.environ.get("CAPTCHA_TASKS_CHAOS_ROWS", ROOT / ".run" / "chaos" / "rows.jsonl"))


def record(row: Row) -> None:
    path = rows_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as out:
        out.write(row.as_json() + "\n")


def duplicate_submits(captchas: Iterable[dict[str, Any]]) -> int:
    """Submits of a job made while an earlier submit of it was not unsolvable."""
    by_job: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for captcha in sorted(captchas, key=lambda c: c["submitted_at"]):
        by_job[captcha["fingerprint"]].append(captcha)
    duplicates = 0
    for submits in by_job.values():
        for i in range(1, len(submits)):
            if not all(earlier["unsolvable"] for earlier in submits[:i]):
                duplicates += 1
    return duplicates


def client_app(url: str, settings: Settings | None = None) -> Celery:
    """A Celery client of ``url`` with the project's settings (not the session's app);
    ``settings``: the cluster's, for a ``sentinel://`` URL (its master's name).

    It only sends: results are read from Redis directly (:meth:`Cluster.wait_results`),
    so it has no result backend, and no ``AsyncResult`` of it talks to Redis (one that
    is collected while Redis is away would block the sender in reconnect retries)."""
    app = Celery("chaos-client", set_as_current=False)
    app.config_from_object("captcha_tasks.worker.celeryconfig")
    app.conf.update(
        broker_url=url,
        result_backend=None,
        broker_transport=transport_for(url),
        broker_failover_strategy=failover_strategy_for(url),
    )
    if settings is not None:
        options = {**app.conf.broker_transport_options, **sentinel_transport_options(settings, url)}
        app.conf.update(broker_transport_options=options)
    return app


#: A job's states while an engine holds it.
IN_FLIGHT = ("submitting", "sending", "polling")


def held_by(raw: redis.Redis, keys: Keys, engine: str) -> dict[str, str]:
    """Jobs in flight whose last claim is ``engine``'s: task id -> state."""
    held = {}
    for key in raw.scan_iter(match=keys.job("*"), count=500):
        state, claimer = raw.hmget(key, "state", "claimed_by")
        if claimer and claimer.decode() == engine and state and state.decode() in IN_FLIGHT:
            held[key.decode().removeprefix(keys.job(""))] = state.decode()
    return held


class Cluster:
    """A private Redis (AOF on), ``workers`` celery workers and the given sandbox."""

    def __init__(
        self,
        tmp: Path,
        sandbox: SandboxServer,
        api_key: str,
        *,
        workers: int = 2,
        concurrency: int = 2,
        threads: int = 5,
        time_scale: float = TIME_SCALE,
        flower: bool = False,
        env: dict[str, str] | None = None,
    ) -> None:
        self.tmp = tmp
        self.sandbox = sandbox
        self.api_key = api_key
        self.proxy_password = _secret("Px", 20)
        self.n_workers = workers
        #: The test that started this cluster (its rows carry it: :attr:`Row.test`).
        self.test: tuple[str, int, str] = ("", 0, "")
        self.concurrency = concurrency
        self.threads = threads
        self.time_scale = time_scale
        self.with_flower = flower
        #: Every process the cluster started (logs in ``tmp``), stopped by PID at the end.
        self.processes = Supervisor(tmp, cwd=ROOT)
        self.flower: Child | None = None
        self.flower_url = ""
        self.flower_auth = ("chaos", _secret("Fl", 16))
        self.extra_env = env or {}
        self.redis = RedisServer(appendonly=True, data_dir=tmp / "redis")
        #: The latest process of each worker name (a restart appends to its log).
        self.workers: dict[str, Child] = {}
        self.snapshots: list[str] = []
        #: What the fault did, for the row (set by the test).
        self.note = ""
        self.started = time.monotonic()
        #: Tasks of the last :meth:`finish` with no final state (for the evidence).
        self.lost_ids: list[str] = []
        self.app: Celery
        self.settings: Settings
        self.proxy_id = ""

    # -- processes --------------------------------------------------------------------

    @property
    def redis_url(self) -> str:
        """The URL workers and the client are given."""
        return self.redis.url

    def redis_env(self) -> dict[str, str]:
        """The variables that point a process at the cluster's Redis."""
        return {"CAPTCHA_TASKS_REDIS_URL": self.redis_url}

    def start_redis(self) -> None:
        self.redis.start()

    def stop_redis(self) -> None:
        self.redis.stop()

    def start(self) -> Cluster:
        self.start_redis()
        self.settings = Settings.from_env({**os.environ, **self.redis_env()})
        self.app = client_app(self.redis_url, self.settings)
        pool = ProxyPool(state_redis(self.settings), self.settings)
        self.proxy_id = pool.add(f"http://chaos:{self.proxy_password}@127.0.0.1:9")
        for i in range(self.n_workers):
            self.start_worker(f"chaos{i + 1}@127.0.0.1")
        if self.with_flower:
            self.start_flower()
        return self

    def start_flower(self) -> None:
        port = free_port()
        self.flower_url = f"http://127.0.0.1:{port}"
        env = {k: v for k, v in self.worker_env().items() if not k.startswith("FLOWER_")}
        env["FLOWER_BASIC_AUTH"] = ":".join(self.flower_auth)  # not on the command line
        argv = [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "captcha_tasks",
            "flower",
            "--address=127.0.0.1",
            f"--port={port}",
        ]
        self.flower = self.processes.spawn("flower", argv, env=env)

        def healthy() -> bool:
            return requests.get(f"{self.flower_url}/healthcheck", timeout=2).ok

        wait_ready(self.flower, healthy, timeout=60, interval=0.2, what="Flower")

    def flower_pages(self, ids: list[str]) -> str:
        """What Flower shows about the run (its API and pages), for the scan; checks that
        it refuses a visitor without the login."""
        assert requests.get(f"{self.flower_url}/api/tasks", timeout=10).status_code == 401
        pages = []
        for path in ("/api/tasks", "/api/workers", "/tasks", "/workers", "/broker"):
            reply = requests.get(
                f"{self.flower_url}{path}",
                auth=self.flower_auth,
                timeout=30,
                params={"limit": 5000} if path == "/api/tasks" else {},
            )
            assert reply.status_code == 200, (path, reply.status_code)
            pages.append(reply.text)
        for task_id in ids[:20]:
            reply = requests.get(
                f"{self.flower_url}/api/task/info/{task_id}", auth=self.flower_auth, timeout=10
            )
            pages.append(reply.text)
        return "\n".join(pages)

    def worker_env(self) -> dict[str, str]:
        return {
            **os.environ,
            **self.redis_env(),
            "CAPTCHA_TASKS_SOLVER_URL": self.sandbox.url,
            "CAPTCHAAI_API_KEY": self.api_key,
            "CAPTCHA_TASKS_TIME_SCALE": str(self.time_scale),
            "CAPTCHA_TASKS_HTTP_TIMEOUT": "2",
            "CAPTCHA_TASKS_THREADS": str(self.threads),
            "CAPTCHA_TASKS_VISIBILITY_TIMEOUT": str(VISIBILITY_TIMEOUT),
            "CAPTCHA_TASKS_HEARTBEAT_INTERVAL": "1",
            "PYTHONUNBUFFERED": "1",
            **self.extra_env,
        }

    def start_worker(
        self, name: str, wait: bool = True, env: dict[str, str] | None = None
    ) -> Child:
        """Start worker ``name``; ``env``: variables of its own over :meth:`worker_env`
        (a worker whose Redis URLs go through a proxy, one whose clock is off)."""
        argv = [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "captcha_tasks",
            "worker",
            "-n",
            name,
            "-c",
            str(self.concurrency),
            "-P",
            "prefork",
            "-l",
            "INFO",
            "--without-gossip",
            "--without-mingle",
        ]
        worker = self.processes.spawn(
            name.split("@")[0], argv, env={**self.worker_env(), **(env or {})}
        )
        self.workers[name] = worker
        if wait:
            wait_ready(worker, logged(worker, " ready."), timeout=60, what=f"worker {name}")
        return worker

    def kill_worker(self, name: str, *, child_only: bool = False) -> str:
        """SIGKILL a worker's whole process group, or one of its pool processes."""
        worker = self.workers[name]
        if child_only:
            children = psutil.Process(worker.pid).children()
            if children:
                victim = random.choice(children)
                victim.kill()
                return f"pool process {victim.pid} of {name}"
        self.processes.stop([worker], sig=signal.SIGKILL)
        return f"every process of {name}"

    def restart_redis(self, outage: float = 0.0) -> float:
        """Stop Redis (SIGTERM: the AOF is flushed), stay down ``outage`` s, start again on
        the same port and data; returns how long it was unreachable."""
        down = time.monotonic()
        self.redis.stop()
        time.sleep(outage)
        self.redis.start(timeout=30)
        return time.monotonic() - down

    def stop(self) -> None:
        if self.flower is not None:
            self.processes.stop([self.flower])
            self.flower = None
        # The row is written: no need for the workers' 10 s soft shutdown of a clean stop.
        self.processes.stop(sig=signal.SIGKILL)
        self.stop_redis()
        # The data directory is the test's tmp_path; RedisServer does not remove it.

    def keep_evidence(self, dest: Path) -> None:
        """Copy what the next person needs to find a failing row's window into ``dest``:
        every process's log, every job hash and the engine's sets, the lost tasks' ids
        with what the backend holds for them, unacknowledged messages and the sandbox's
        view of each captcha. Nothing here holds a secret (the proxy pool's hash, the
        one place with a password, is left out)."""
        dest.mkdir(parents=True, exist_ok=True)
        for path in self.tmp.glob("*.log"):
            (dest / path.name).write_bytes(path.read_bytes())
        evidence: dict[str, Any] = {"lost": self.lost_ids, "note": self.note}
        with contextlib.suppress(redis.RedisError), self._raw() as raw:
            keys = Keys(self.settings.key_prefix)
            jobs = {}
            for key in raw.scan_iter(match=keys.job("*"), count=500):
                fields = raw.hgetall(key)
                jobs[key.decode()] = {
                    k.decode(): v.decode(errors="replace") for k, v in fields.items()
                }
            evidence["jobs"] = jobs
            for name in ("waiting", "due", "budget"):
                entries = raw.zrange(getattr(keys, name), 0, -1, withscores=True)
                evidence[name] = [(m.decode(), s) for m, s in entries]
            evidence["lost_meta"] = {
                i: (raw.get(f"celery-task-meta-{i}") or b"").decode() for i in self.lost_ids
            }
            evidence["unacked"] = {
                k.decode(): v.decode(errors="replace") for k, v in raw.hgetall("unacked").items()
            }
        with contextlib.suppress(requests.RequestException):
            evidence["sandbox_captchas"] = self.sandbox_captchas()
        (dest / "evidence.json").write_text(json.dumps(evidence, indent=1, default=str))

    # -- load -------------------------------------------------------------------------

    def send(self, n: int) -> str:
        """Send one solve task (kind and proxy chosen by ``n``); its id."""
        kind = KINDS[n % len(KINDS)]
        kwargs: dict[str, Any] = {
            "sitekey": SITEKEYS[kind],
            "pageurl": f"https://example.com/chaos/{n}",
        }
        if n % 3 == 0:
            kwargs["proxy_id"] = self.proxy_id
        result = self.app.send_task(TASK_NAMES[kind], kwargs=kwargs)
        return str(result.id)

    def snapshot(self) -> None:
        """Keep a dump of Redis now (queued and unacked messages included) for the scan."""
        # Redis may be down for this fault: the next snapshot covers it.
        with contextlib.suppress(redis.RedisError):
            self.snapshots.append(self._redis_dump())

    def held_by(self, engine: str) -> dict[str, str]:
        """Jobs in flight whose last claim is ``engine``'s: task id -> state. Read just
        after that engine's worker died (or was cut off), before its claims run out: a
        job in ``sending`` was in an ``in.php`` call that may have reached the provider,
        so the engine that takes it over fails it ``SubmitUncertain`` (never sent twice)."""
        return held_by(self._raw(), Keys(self.settings.key_prefix), engine)

    def _raw(self) -> redis.Redis:
        return redis.Redis(host=self.redis.host, port=self.redis.port, socket_timeout=5)

    def _redis_dump(self) -> str:
        """Every key and value, the proxy pool's own hash left out (it holds the password
        by design), queued and unacknowledged messages decoded."""
        with self._raw() as raw:
            return redis_dump(raw, exclude={Keys(self.settings.key_prefix).proxies})[0]

    # -- the verdict ------------------------------------------------------------------

    def wait_results(self, ids: list[str], timeout: float) -> dict[str, dict[str, Any]]:
        """Each id's final result meta; ids missing from the answer are lost."""
        found: dict[str, dict[str, Any]] = {}
        deadline = time.monotonic() + timeout
        pending = list(ids)
        while pending and time.monotonic() < deadline:
            try:
                with self._raw() as raw:
                    for start in range(0, len(pending), 500):
                        chunk = pending[start : start + 500]
                        metas = raw.mget([f"celery-task-meta-{i}" for i in chunk])
                        for task_id, meta in zip(chunk, metas, strict=True):
                            if meta is not None:
                                decoded = json.loads(meta)
                                if decoded.get("status") in FINAL_STATES:
                                    found[task_id] = decoded
            except redis.RedisError:
                pass
            pending = [i for i in pending if i not in found]
            if pending:
                time.sleep(0.25)
        return found

    def finish(self, row: Row, load: Load, *, timeout: float) -> Row:
        """Wait for ``load``'s tasks, then fill ``row`` with the figures (and record it)."""
        ids = load.ids
        metas = self.wait_results(ids, timeout)
        row.tasks = len(ids)
        row.refused_at_send = dict(load.refused)
        errors: Counter[str] = Counter()
        for meta in metas.values():
            if meta["status"] == "SUCCESS":
                row.solved += 1
                continue
            exc = meta.get("result") or {}
            if str(exc.get("exc_module", "")).startswith("captcha_tasks"):
                errors[str(exc.get("exc_type"))] += 1
            else:
                row.untyped += 1
                errors[f"untyped {exc.get('exc_type')}"] += 1
        row.typed_errors = dict(errors)
        row.lost = len(ids) - len(metas)
        self.lost_ids = [i for i in ids if i not in metas]
        stats = self.sandbox_stats()
        seen = {
            "no_slot": "no-slot answers",
            "zero_balance": "zero-balance answers",
            "errors_injected": "502 pages",
            "slow_injected": "slow answers",
            "unsolvable": "unsolvable answers",
            "bad_key": "key refusals",
        }
        said = [f"{stats[name]} {what}" for name, what in seen.items() if stats.get(name)]
        said += self.more_notes()
        row.notes = ", ".join([*([row.notes] if row.notes else []), *said])
        row.provider_requests = int(stats["requests"])
        row.submits = int(stats["submitted"])
        row.duplicates = duplicate_submits(self.sandbox_captchas())
        row.seconds = round(time.monotonic() - self.started, 1)
        self.snapshot()
        row.leaked = self.leaks(metas, self.flower_pages(ids) if self.flower else "")
        self.annotate(row, load)
        row.test = self.test
        record(row)
        return row

    def more_notes(self) -> list[str]:
        """Figures a cluster of another shape adds to its row's notes."""
        return []

    def annotate(self, row: Row, load: Load) -> None:
        """What a cluster of another shape adds to its row before it is recorded."""

    def sandbox_stats(self) -> dict[str, Any]:
        reply = requests.get(f"{self.sandbox.url}/stats", timeout=10)
        stats: dict[str, Any] = reply.json()
        return stats

    def sandbox_captchas(self) -> list[dict[str, Any]]:
        reply = requests.get(f"{self.sandbox.url}/admin/captchas", timeout=10)
        captchas: list[dict[str, Any]] = reply.json()["captchas"]
        return captchas

    def configure_sandbox(self, **changes: Any) -> None:
        reply = requests.post(f"{self.sandbox.url}/admin/config", json=changes, timeout=10)
        assert reply.status_code == 200, reply.text

    def secrets(self) -> tuple[str, ...]:
        """What the scan looks for: the API key(s) and the proxy password."""
        return (self.api_key, self.proxy_password)

    def leaks(self, metas: dict[str, dict[str, Any]], flower: str = "") -> int:
        """Occurrences of the API key and proxy password in everything we can read."""
        flower_log = self.tmp / "flower.log"
        corpus = {
            "redis": "\n".join(self.snapshots),
            "results": json.dumps(metas),
            "worker logs": "\n".join(w.log() for w in self.workers.values()),
            "flower": flower,
            "flower log": flower_log.read_text(errors="replace") if flower_log.exists() else "",
        }
        found = 0
        for where, text in corpus.items():
            for secret in self.secrets():
                hits = text.count(secret)
                if hits:
                    print(f"LEAK: {hits} occurrence(s) of a secret in the {where}")
                found += hits
        # The needle can be found: the pool's own hash (left out of the scan) holds it.
        with self._raw() as raw:
            pool = raw.hgetall(Keys(self.settings.key_prefix).proxies)
        assert self.proxy_password in repr(pool), "the scan's needle is not where expected"
        return found


class Load:
    """Sends ``total`` solve tasks, evenly over ``seconds``, from a thread."""

    def __init__(self, cluster: Cluster, total: int, seconds: float) -> None:
        self.cluster = cluster
        self.total = total
        self.seconds = seconds
        self.ids: list[str] = []
        #: When each accepted send began and returned (``time.monotonic()``), by task id:
        #: Redis took the message somewhere in between (on a loaded machine the return
        #: can come well after).
        self.sent_span: dict[str, tuple[float, float]] = {}
        self.refused: Counter[str] = Counter()
        self._thread = threading.Thread(target=self._run, name="chaos-load", daemon=True)

    def __enter__(self) -> Load:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.join()

    def join(self) -> None:
        self._thread.join(timeout=self.seconds + 120)
        assert not self._thread.is_alive(), "the load thread did not finish"

    def _run(self) -> None:
        gap = self.seconds / max(1, self.total)
        start = time.monotonic()
        for n in range(self.total):
            time.sleep(max(0.0, start + n * gap - time.monotonic()))
            began = time.monotonic()
            try:
                self.ids.append(self.cluster.send(n))
                self.sent_span[self.ids[-1]] = (began, time.monotonic())
            except Exception as exc:  # the caller's .delay() raised: refused, not lost
                self.refused[type(exc).__name__] += 1
            if n == self.total // 2:
                self.cluster.snapshot()


def rounds(n: int, seconds: float) -> Iterator[int]:
    """``n`` fault rounds spread at random over ``seconds`` (sleeps between them)."""
    rng = random.Random()
    marks = sorted(rng.uniform(0.1, 0.9) * seconds for _ in range(n))
    start = time.monotonic()
    for i, mark in enumerate(marks):
        time.sleep(max(0.0, start + mark - time.monotonic()))
        yield i
