"""The benchmarks' processes: redis-server, sandbox and celery workers, each in its own
session with its own log, stopped by PID; and their CPU time (psutil, of the dev extra,
imported only when measured)."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import sys
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TypeVar

from captcha_tasks.settings import PROTOCOLS, Provider
from captcha_tasks_sandbox import dev_api_key

from ..procs import Child, Supervisor, free_port, http_ok, logged, wait_ready
from ..redis_server import RedisServer
from ..signals import terminate_on_sigterm

__all__ = [
    "DECIDED",
    "DOCUMENTED_V2_SECONDS",
    "CpuProbe",
    "Processes",
    "Stack",
    "TlsFiles",
    "passed_environment",
    "provider_setup",
    "start_sandbox",
    "start_stack",
    "start_workers",
    "tls_files",
]

#: Documented reCAPTCHA v2 solve time (2Captcha's API documentation): a run's time scale
#: maps it onto the sandbox's latency.
DOCUMENTED_V2_SECONDS = 15.0
#: Settings a run decides; anything else set in the environment is passed through to the
#: workers and shown in the report.
DECIDED: tuple[str, ...] = (
    "CAPTCHA_TASKS_REDIS_URL",
    "CAPTCHA_TASKS_BROKER_URL",
    "CAPTCHA_TASKS_RESULT_BACKEND",
    "CAPTCHA_TASKS_STATE_URL",
    "CAPTCHA_TASKS_SOLVER_URL",
    "CAPTCHA_TASKS_PROVIDER",
    # The run picks the key its sandbox accepts; an operator's own key would win over
    # it in the workers (and be printed in the report's environment line).
    "CAPTCHA_TASKS_API_KEY",
    "CAPTCHA_TASKS_THREADS",
    "CAPTCHA_TASKS_TIME_SCALE",
    "CAPTCHAAI_API_KEY",
)

_CONCURRENCY_RE = re.compile(r"concurrency:\s*(\d+)")

T = TypeVar("T")


class Processes(Supervisor):
    """The child processes of a run (each in its own session, stopped by PID, in
    parallel: the workers' warm shutdowns overlap) and its redis-servers."""

    def __init__(self, log_dir: Path) -> None:
        super().__init__(log_dir)
        self.redis_servers: list[RedisServer] = []

    @classmethod
    def logging_to(cls, log_dir: Path | None, prefix: str) -> Processes:
        """Processes that log to ``log_dir``, or (None) to a new temporary directory
        named ``prefix...``; the directory is created."""
        path = log_dir or Path(tempfile.mkdtemp(prefix=prefix))
        path.mkdir(parents=True, exist_ok=True)
        return cls(path)

    def run_each(self, runs: Iterable[Callable[[Processes], T]]) -> list[T]:
        """Each of ``runs`` in turn, and what each returned. Every process a run started
        is stopped after it, and on errors and Ctrl-C/SIGTERM too."""
        results = []
        try:
            with terminate_on_sigterm():
                for run in runs:
                    try:
                        results.append(run(self))
                    finally:
                        self.stop_all()
        finally:
            self.stop_all()
        return results

    def spawn_with(self, name: str, argv: list[str], env: Mapping[str, str]) -> Child:
        """``argv`` with ``env``; given 20 s to stop (a worker's warm shutdown)."""
        return self.spawn(name, argv, env=env, stop_timeout=20.0)

    def redis(self) -> RedisServer:
        server = RedisServer(data_dir=self.log_dir / f"redis{len(self.redis_servers) + 1}")
        self.redis_servers.append(server)
        return server.start()

    def stop_all(self) -> None:
        self.stop(parallel=True)
        for server in reversed(self.redis_servers):
            with contextlib.suppress(Exception):
                server.stop()
        self.redis_servers.clear()


@dataclasses.dataclass(frozen=True)
class TlsFiles:
    """A certificate for 127.0.0.1, its key, and the CA it chains to (PEM files)."""

    cert: Path
    key: Path
    ca: Path

    def sandbox_args(self) -> list[str]:
        return ["--tls-cert", str(self.cert), "--tls-key", str(self.key)]


def tls_files(directory: Path) -> TlsFiles:
    """A new CA and a certificate for 127.0.0.1 it signs, written to ``directory``
    (trustme, of the dev extra): the sandbox serves https with them, and clients that
    trust ``REQUESTS_CA_BUNDLE`` (requests, the provider transport) trust it."""
    import trustme  # the dev extra

    ca = trustme.CA()
    issued = ca.issue_cert("127.0.0.1")
    files = TlsFiles(
        directory / "tls-cert.pem", directory / "tls-key.pem", directory / "tls-ca.pem"
    )
    files.cert.write_bytes(b"".join(blob.bytes() for blob in issued.cert_chain_pems))
    issued.private_key_pem.write_to_path(str(files.key))
    ca.cert_pem.write_to_path(str(files.ca))
    return files


def start_sandbox(procs: Processes, name: str, args: Sequence[str]) -> tuple[str, int]:
    """Start ``captcha-tasks-sandbox`` on a free port with ``args``; its URL (https when
    ``args`` give it a certificate) and PID once ``/healthz`` answers."""
    port = free_port()
    argv = [sys.executable, "-m", "captcha_tasks_sandbox", "--port", str(port), *args]
    child = procs.spawn_with(name, argv, os.environ)
    scheme = "https" if "--tls-cert" in args else "http"
    url = f"{scheme}://127.0.0.1:{port}"
    wait_ready(child, http_ok(f"{url}/healthz"), timeout=30, what="the sandbox")
    return url, child.pid


def start_workers(
    procs: Processes, argvs: Sequence[tuple[str, list[str]]], env: Mapping[str, str]
) -> list[tuple[Child, int | None]]:
    """Start the workers, wait until each logs " ready."; (process, pool size) each."""
    started = [procs.spawn_with(name, argv, env) for name, argv in argvs]

    def all_ready() -> bool:
        return all(logged(child, " ready.")() for child in started)

    wait_ready(started, all_ready, timeout=90, interval=0.2, what="the workers to be ready")
    out = []
    for child in started:
        found = _CONCURRENCY_RE.search(child.output())
        out.append((child, int(found.group(1)) if found else None))
    return out


def _cpu(pid: int, *, tree: bool = True) -> float:
    """User + system CPU seconds of ``pid`` and (``tree``) its live descendants."""
    import psutil  # type: ignore[import-untyped, unused-ignore]  # the dev extra

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


def _worker_stages(pid: int) -> tuple[float, float, float]:
    """CPU seconds of a worker by where they went: its pool's child processes (the
    task executions), its main thread (Celery's consumer: messages in, events, acks,
    hand-offs to the pool) and its other threads (the solve engine and the steps)."""
    import psutil  # type: ignore[import-untyped, unused-ignore]  # the dev extra

    pool = consumer = threads = 0.0
    try:
        root = psutil.Process(pid)
        children = root.children(recursive=True)
        for thread in root.threads():
            spent = thread.user_time + thread.system_time
            if thread.id == pid:
                consumer += spent
            else:
                threads += spent
    except psutil.NoSuchProcess:
        return 0.0, 0.0, 0.0
    for child in children:
        with contextlib.suppress(psutil.NoSuchProcess):
            times = child.cpu_times()
            pool += times.user + times.system
    return pool, consumer, threads


def _machine_busy() -> tuple[float, float]:
    """(busy, total) CPU seconds of the whole machine so far."""
    import psutil  # type: ignore[import-untyped, unused-ignore]  # the dev extra

    times = psutil.cpu_times()
    idle = times.idle + getattr(times, "iowait", 0.0)
    total = float(sum(times))
    return total - idle, total


@dataclasses.dataclass
class CpuProbe:
    """CPU seconds so far of the workers (with their pool children), other processes by
    name, this harness, and the machine (``machine_busy`` of ``machine_total``)."""

    workers: list[int]
    others: dict[str, int]

    def read(self) -> dict[str, float]:
        out = {"workers": sum(_cpu(pid) for pid in self.workers)}
        stages = [_worker_stages(pid) for pid in self.workers]
        for i, name in enumerate(("workers_pool", "workers_consumer", "workers_threads")):
            out[name] = sum(stage[i] for stage in stages)
        out.update({name: _cpu(pid) for name, pid in self.others.items()})
        out["harness"] = _cpu(os.getpid(), tree=False)
        out["machine_busy"], out["machine_total"] = _machine_busy()
        return out


def passed_environment(
    environ: Mapping[str, str], decided: Sequence[str] = DECIDED
) -> dict[str, str]:
    """The ``CAPTCHA_TASKS_*`` settings of ``environ`` that a run passes through to its
    workers: those it does not decide."""
    return {k: v for k, v in environ.items() if k.startswith("CAPTCHA_TASKS_") and k not in decided}


def provider_setup(provider: Provider) -> tuple[list[str], dict[str, str]]:
    """The sandbox arguments that make it play ``provider`` (its protocol and dialect) and
    the workers' settings that make them use it with the key that sandbox accepts."""
    args = ["--protocol", PROTOCOLS[provider], "--dialect", provider]
    env = {"CAPTCHA_TASKS_PROVIDER": provider, "CAPTCHA_TASKS_API_KEY": dev_api_key(provider)}
    return args, env


@dataclasses.dataclass
class Stack:
    """One run's fresh redis-server and sandbox, and the environment of its workers."""

    redis: RedisServer
    sandbox_url: str
    sandbox_pid: int
    env: dict[str, str]
    #: With Redis split by role: ``state`` (``redis``), ``broker`` and ``results``; {}:
    #: one Redis holds all three.
    roles: dict[str, RedisServer] = dataclasses.field(default_factory=dict)

    def urls(self) -> dict[str, str]:
        """The URL of each role's Redis (``redis``: the one of the state, or of all)."""
        return {"redis": self.redis.url, **{role: s.url for role, s in self.roles.items()}}

    def cpu_probe(self, workers: Sequence[tuple[Child, int | None]]) -> CpuProbe:
        """A probe of these workers (as :func:`start_workers` returns them), the
        redis-server and the sandbox."""
        return CpuProbe(
            [p.pid for p, _ in workers],
            {"redis": self.redis.proc.pid if self.redis.proc else 0, "sandbox": self.sandbox_pid},
        )


def start_stack(
    procs: Processes,
    name: str,
    *,
    threads: int,
    time_scale: float,
    jitter: float,
    provider: Provider = "captchaai",
    sandbox_args: Sequence[str] = (),
    decided: Sequence[str] = DECIDED,
    env: Mapping[str, str] | None = None,
    tls: TlsFiles | None = None,
    split: bool = False,
) -> Stack:
    """Start the run ``name``'s redis-server and its sandbox (T ``threads``, reCAPTCHA v2
    in :data:`DOCUMENTED_V2_SECONDS` x ``time_scale``, ``jitter``, playing ``provider``,
    then ``sandbox_args``; over https with ``tls``). The workers' environment: this
    process's without the ``decided`` settings, pointed at both and configured for
    ``provider``, with the same threads and time scale, trusting ``tls``' CA, then
    ``env``. ``split``: the broker and the results on a redis-server each beside the
    state's (``CAPTCHA_TASKS_BROKER_URL``, ``CAPTCHA_TASKS_RESULT_BACKEND``)."""
    redis_server = procs.redis()
    roles = (
        {"state": redis_server, "broker": procs.redis(), "results": procs.redis()} if split else {}
    )
    provider_args, provider_env = provider_setup(provider)
    args = [
        "--threads",
        str(threads),
        "--time-scale",
        repr(time_scale),
        "--jitter",
        repr(jitter),
        "--latency",
        f"recaptcha_v2={DOCUMENTED_V2_SECONDS}",
        *provider_args,
        *sandbox_args,
        *(tls.sandbox_args() if tls else ()),
    ]
    sandbox_url, sandbox_pid = start_sandbox(procs, f"{name}-sandbox", args)
    worker_env = {k: v for k, v in os.environ.items() if k not in decided}
    worker_env.update(
        CAPTCHA_TASKS_REDIS_URL=redis_server.url,
        CAPTCHA_TASKS_SOLVER_URL=sandbox_url,
        **provider_env,
        CAPTCHA_TASKS_THREADS=str(threads),
        CAPTCHA_TASKS_TIME_SCALE=repr(time_scale),
        PYTHONUNBUFFERED="1",
    )
    if roles:
        worker_env.update(
            CAPTCHA_TASKS_BROKER_URL=roles["broker"].url,
            CAPTCHA_TASKS_RESULT_BACKEND=roles["results"].url,
        )
    if tls:
        worker_env["REQUESTS_CA_BUNDLE"] = str(tls.ca)
    worker_env.update(env or {})
    return Stack(redis_server, sandbox_url, sandbox_pid, worker_env, roles)
