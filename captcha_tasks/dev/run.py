"""``captcha-tasks dev`` (what ``make run`` starts): the whole product on one machine.

Starts, in order, a local ``redis-server`` (only if ``CAPTCHA_TASKS_REDIS_URL`` is
unreachable), the solver sandbox, a Celery worker and Flower; waits until each
answers; prints where each listens; runs a smoke round trip; then waits. Ctrl-C
or SIGTERM stops them in reverse order, by PID, and nothing is left behind.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from urllib.parse import urlsplit

import redis
import requests
from celery import Celery

from ..settings import Settings, mask_url
from .procs import free_port, port_is_free, stop_process, wait_until
from .redis_server import RedisServer

__all__ = ["DevOptions", "run_dev"]

#: Solver time scale of the dev stack unless CAPTCHA_TASKS_TIME_SCALE says otherwise.
DEV_TIME_SCALE = 0.2
#: A well-formed reCAPTCHA v2 sitekey for the start-up round trip (the sandbox's).
SMOKE_SITEKEY = "6Le-wvkSAAAAAPBMRTvw0Q4Muexq9bi0DJwx_mJ-"


@dataclass
class DevOptions:
    workers: int = 1
    concurrency: int = 2
    sandbox_port: int = 8765
    demo_port: int = 8766
    flower_port: int = 5555
    time_scale: float | None = None
    sandbox_threads: int = 5
    run_dir: Path = field(default_factory=lambda: Path(".run"))
    smoke: bool = True


@dataclass
class _Child:
    name: str
    proc: subprocess.Popen[bytes]
    stop_timeout: float = 10.0


class _Stop(Exception):
    pass


def _say(message: str) -> None:
    print(f"[captcha-tasks dev] {message}", flush=True)


def _redis_reachable(url: str) -> bool:
    try:
        with redis.Redis.from_url(url, socket_connect_timeout=1, socket_timeout=1) as conn:
            return bool(conn.ping())
    except (redis.RedisError, OSError):
        return False


def _pick_port(preferred: int) -> int:
    return preferred if preferred and port_is_free(preferred) else free_port()


class DevStack:
    """The processes of one ``captcha-tasks dev`` run."""

    def __init__(self, options: DevOptions, settings: Settings) -> None:
        self.options = options
        self.settings = settings
        self.children: list[_Child] = []
        self.redis: RedisServer | None = None
        self.env = dict(os.environ)
        self.log_dir = options.run_dir / "logs"

    def _spawn(self, name: str, argv: list[str], *, to_terminal: bool = False) -> _Child:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        log_path = self.log_dir / f"{name}.log"
        out = None if to_terminal else log_path.open("ab")
        proc = subprocess.Popen(
            argv,
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT if out else None,
            start_new_session=True,  # Ctrl-C reaches us only; we stop children in order
        )
        if out is not None:
            out.close()
        child = _Child(name, proc)
        self.children.append(child)
        return child

    def _check_alive(self, child: _Child) -> None:
        if child.proc.poll() is not None:
            raise RuntimeError(
                f"{child.name} exited with code {child.proc.returncode}; "
                f"see {self.log_dir / (child.name + '.log')}"
            )

    def start_redis(self) -> str:
        url = self.settings.redis_url
        if _redis_reachable(url):
            _say(f"redis   : using {mask_url(url)} (reachable)")
            return url
        parts = urlsplit(url)
        if parts.hostname not in ("localhost", "127.0.0.1", "::1") or parts.scheme != "redis":
            raise RuntimeError(
                f"CAPTCHA_TASKS_REDIS_URL ({mask_url(url)}) does not answer and is not a local "
                "redis:// URL, so no Redis is started for it: start that Redis, or unset the "
                "variable to get a local one"
            )
        port = parts.port or 6379
        if not port_is_free(port):
            raise RuntimeError(f"port {port} is taken by something that is not a Redis we can use")
        self.redis = RedisServer(port, data_dir=self.options.run_dir / "redis", appendonly=True)
        self.redis.start()
        url = self.redis.url
        for name in (
            "CAPTCHA_TASKS_REDIS_URL",
            "CAPTCHA_TASKS_BROKER_URL",
            "CAPTCHA_TASKS_RESULT_BACKEND",
            "CAPTCHA_TASKS_STATE_URL",
        ):
            self.env.pop(name, None)
        self.env["CAPTCHA_TASKS_REDIS_URL"] = url
        _say(
            f"redis   : started redis-server pid {self.redis.proc.pid if self.redis.proc else '?'} "
            f"on {url} (data in {self.redis.data_dir})"
        )
        return url

    def start_sandbox(self) -> str:
        from ..sandbox import DEV_API_KEY

        port = _pick_port(self.options.sandbox_port)
        demo_port = _pick_port(self.options.demo_port)
        argv = [sys.executable, "-m", "captcha_tasks.cli", "sandbox", "--port", str(port),
                "--threads", str(self.options.sandbox_threads),
                "--demo-port", str(demo_port)]  # fmt: skip
        if self.options.time_scale is not None:
            argv += ["--time-scale", str(self.options.time_scale)]
        child = self._spawn("sandbox", argv)
        url = f"http://127.0.0.1:{port}"

        def ready() -> bool:
            self._check_alive(child)
            return requests.get(f"{url}/healthz", timeout=1).ok

        wait_until(ready, timeout=20, what="the sandbox")
        self.env["CAPTCHA_TASKS_SOLVER_URL"] = url
        self.env["CAPTCHAAI_API_KEY"] = DEV_API_KEY
        self.env["CAPTCHA_TASKS_PROVIDER"] = "captchaai"
        self.env["CAPTCHA_TASKS_THREADS"] = str(self.options.sandbox_threads)
        if self.options.time_scale is not None:
            self.env["CAPTCHA_TASKS_TIME_SCALE"] = str(self.options.time_scale)
        # The demo site is the one target page tasks may fetch here (unless configured).
        demo = f"127.0.0.1:{demo_port}"
        allowed = self.env.get("CAPTCHA_TASKS_ALLOWED_DOMAINS", "")
        self.env["CAPTCHA_TASKS_ALLOWED_DOMAINS"] = f"{allowed},{demo}" if allowed else demo
        scale = self.env.get("CAPTCHA_TASKS_TIME_SCALE", "1.0")
        _say(f"sandbox : {url}  (stats: {url}/stats, time scale {scale}, pid {child.proc.pid})")
        _say(f"demo    : http://{demo}/page/1  (a protected site for fetch_page; /stats)")
        return url

    def _control_app(self) -> Celery:
        broker = self.env.get("CAPTCHA_TASKS_BROKER_URL") or self.env["CAPTCHA_TASKS_REDIS_URL"]
        backend = self.env.get("CAPTCHA_TASKS_RESULT_BACKEND") or broker
        return Celery("captcha_tasks_dev", broker=broker, backend=backend, set_as_current=False)

    def start_workers(self) -> list[str]:
        names = []
        for index in range(1, self.options.workers + 1):
            name = f"dev{index}@%h"
            argv = [sys.executable, "-m", "celery", "-A", "captcha_tasks", "worker",
                    "-c", str(self.options.concurrency), "-l", "INFO", "-n", name]  # fmt: skip
            child = self._spawn(f"worker{index}", argv, to_terminal=True)
            child.stop_timeout = 30.0
            names.append(name.replace("%h", os.uname().nodename))
        control = self._control_app()
        try:

            def all_answer() -> bool:
                for child in self.children:
                    self._check_alive(child)
                replies = control.control.ping(timeout=1.0)
                answered = {name for reply in replies for name in reply}
                return set(names) <= answered

            wait_until(all_answer, timeout=60, interval=0.5, what="the workers to answer ping")
        finally:
            control.close()
        for index, name in enumerate(names, 1):
            _say(
                f"worker  : {name} (-c {self.options.concurrency}, "
                f"pid {self.children[-len(names) + index - 1].proc.pid})"
            )
        return names

    def start_flower(self) -> tuple[str, str]:
        port = _pick_port(self.options.flower_port)
        auth = self.env.get("FLOWER_BASIC_AUTH") or f"admin:{secrets.token_urlsafe(12)}"
        self.env["FLOWER_BASIC_AUTH"] = auth
        argv = [sys.executable, "-m", "celery", "-A", "captcha_tasks", "flower",
                "--address=127.0.0.1", f"--port={port}"]  # fmt: skip
        child = self._spawn("flower", argv)
        url = f"http://127.0.0.1:{port}"

        def ready() -> bool:
            self._check_alive(child)
            return requests.get(f"{url}/healthcheck", timeout=1).ok

        wait_until(ready, timeout=30, what="Flower")
        _say(f"flower  : {url}  (user/password {auth}, pid {child.proc.pid})")
        return url, auth

    def smoke(self) -> None:
        control = self._control_app()
        try:
            started = time.monotonic()
            pong = control.send_task("captcha_tasks.ping").get(timeout=30)
            balance = control.send_task("captcha_tasks.get_balance").get(timeout=60)
            _say(
                f"smoke   : ping -> {pong['hostname']} v{pong['version']}; get_balance -> "
                f"{balance['balance']} via the sandbox ({time.monotonic() - started:.2f} s)"
            )
            started = time.monotonic()
            solved = control.send_task(
                "captcha_tasks.solve_recaptcha_v2",
                args=(SMOKE_SITEKEY, "https://example.com/make-run"),
            ).get(timeout=120)
            _say(
                f"smoke   : solve_recaptcha_v2 -> captcha {solved['captcha_id']}, token "
                f"{solved['solution'][:12]}... ({time.monotonic() - started:.2f} s end to end)"
            )
            started = time.monotonic()
            demo = self.env["CAPTCHA_TASKS_ALLOWED_DOMAINS"].split(",")[-1]
            page = control.send_task(
                "captcha_tasks.fetch_page", args=(f"http://{demo}/page/1",)
            ).get(timeout=120)
            _say(
                f"smoke   : fetch_page {page['url']} -> HTTP {page['status']}, "
                f"solved={page['solved']} ({time.monotonic() - started:.2f} s)"
            )
        finally:
            control.close()

    def stop(self) -> None:
        for child in reversed(self.children):
            code = stop_process(child.proc, timeout=child.stop_timeout, group=True)
            _say(f"stopped {child.name} (pid {child.proc.pid}, exit {code})")
        self.children.clear()
        if self.redis is not None:
            pid = self.redis.proc.pid if self.redis.proc else "?"
            self.redis.stop()
            _say(f"stopped redis-server (pid {pid})")
            self.redis = None

    def wait(self) -> None:
        while True:
            for child in self.children:
                self._check_alive(child)
            time.sleep(0.5)


@contextlib.contextmanager
def _stop_on_signals() -> Iterator[None]:
    def handler(signum: int, frame: FrameType | None) -> None:
        raise _Stop(signal.Signals(signum).name)

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def run_dev(options: DevOptions, settings: Settings) -> int:
    """Run the stack until interrupted. Returns the process exit code."""
    if options.time_scale is None and not os.environ.get("CAPTCHA_TASKS_TIME_SCALE"):
        # Local solves in seconds rather than the provider's real 15-20 s.
        options.time_scale = DEV_TIME_SCALE
    stack = DevStack(options, settings)
    code = 0
    with _stop_on_signals():
        try:
            stack.start_redis()
            stack.start_sandbox()
            stack.start_workers()
            stack.start_flower()
            if options.smoke:
                stack.smoke()
            prefix = ""
            used = stack.env.get("CAPTCHA_TASKS_REDIS_URL", settings.redis_url)
            if used.replace("127.0.0.1", "localhost") != settings.redis_url:
                prefix = f"CAPTCHA_TASKS_REDIS_URL={used} "
            _say(f"up. Try:  {prefix}.venv/bin/celery -A captcha_tasks inspect ping")
            _say("Ctrl-C (or SIGTERM) stops everything.")
            stack.wait()
        except _Stop as stop:
            _say(f"{stop} received, stopping")
        except Exception as exc:
            _say(f"error: {exc}")
            code = 1
        finally:
            with _stop_on_signals():  # a second Ctrl-C must not leave orphans
                try:
                    stack.stop()
                except _Stop:
                    stack.stop()
    return code
