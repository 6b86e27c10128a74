"""``captcha-tasks-dev dev`` (what ``make run`` starts): the whole product on one machine.

Starts, in order, a local ``redis-server`` (only if ``CAPTCHA_TASKS_REDIS_URL`` is
unreachable), the solver sandbox (one per provider with ``--providers``), a Celery worker
and Flower; waits until each answers; prints where each listens; runs a smoke round trip;
then waits. Ctrl-C
or SIGTERM stops them in reverse order, by PID, and nothing is left behind; a second
signal during that stop kills what is left instead of waiting for it.

A Redis that already answers is used, never stopped: at a URL the environment names, as
it is; at the default URL, in a database of this checkout's own (``shared_redis``). One
stack runs per run directory: it holds ``flock`` on ``<run dir>/dev.lock`` while it
lives (the kernel drops it when the process dies, however it dies), and a second one
that cannot take it says so and exits 2 before it touches anything.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import secrets
import shlex
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import redis
from celery import Celery
from celery.exceptions import TimeoutError as CeleryTimeoutError

from captcha_tasks.settings import Settings, mask_url
from captcha_tasks.settings.providers import (
    OTHER_KEY_VARIABLE,
    PROVIDERS_VARIABLE,
    SINGLE_PROVIDER_VARIABLES,
    variable,
)
from captcha_tasks.state.keys import Keys
from captcha_tasks.worker.celery_internals.result_backend import backends

from .procs import Child, Supervisor, free_port, http_ok, port_is_free, stop_process, wait_ready
from .redis_server import RedisServer
from .shared_redis import checkout_mark, claim_database, with_database
from .signals import StopSignals

__all__ = ["CeleryStartupNoise", "DevOptions", "provider_name", "run_dev"]

#: Solver time scale of the dev stack unless CAPTCHA_TASKS_TIME_SCALE says otherwise.
DEV_TIME_SCALE = 0.2
#: A well-formed reCAPTCHA v2 sitekey for the start-up round trip (the sandbox's).
SMOKE_SITEKEY = "6Le-wvkSAAAAAPBMRTvw0Q4Muexq9bi0DJwx_mJ-"
#: The variables that name Redis URLs: set, they are used as they are.
REDIS_URL_NAMES = (
    "CAPTCHA_TASKS_REDIS_URL",
    "CAPTCHA_TASKS_BROKER_URL",
    "CAPTCHA_TASKS_RESULT_BACKEND",
    "CAPTCHA_TASKS_STATE_URL",
)
#: Exit code of a stack that found another one running from its run directory.
ALREADY_RUNNING = 2


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
    #: The provider the sandbox plays and the workers are configured for
    #: (``CAPTCHA_TASKS_PROVIDER``): a JSON one runs the sandbox's JSON task API.
    provider: str = "captchaai"
    #: Several providers instead of ``provider``, in order of preference: a sandbox plays
    #: each (the demo site on the first one's), and the workers are configured with all
    #: of them (``CAPTCHA_TASKS_PROVIDERS``), each named after its protocol
    #: (:func:`provider_name`).
    providers: tuple[str, ...] = ()


def provider_name(protocol: str) -> str:
    """The name ``--providers`` gives a provider playing ``protocol`` in
    ``CAPTCHA_TASKS_PROVIDERS`` (names take no ``-``): ``2captcha-v2`` -> ``2captcha_v2``."""
    return protocol.replace("-", "_")


class CeleryStartupNoise:
    """Which lines of a worker's output the terminal shows (its log keeps them all):
    not Celery's start-up banner (from its ``-------------- name@host vX`` line through
    the ``[tasks]`` list, up to the first log record) nor a Python warning printed
    before it (its message, to the source line ending it, as Celery's SecurityWarning
    for a worker run as root). Everything else shows, errors included; one instance
    per worker, fed its lines in order."""

    _BANNER = re.compile(rb"^ -+ \S+ v\d")
    _WARNING = re.compile(rb"^\S+:\d+: \w*Warning: ")
    _RECORD = re.compile(rb"^\[\d{4}-\d\d-\d\d ")

    def __init__(self) -> None:
        self._in: str | None = None  # "banner" or "warning" while inside one
        self._started = False  # the first log record came: no banner after it

    def __call__(self, line: bytes) -> bool:
        if self._RECORD.match(line):
            self._in, self._started = None, True
            return True
        if self._in == "warning":
            if line.startswith(b"  "):  # the warning's source line ends it
                self._in = None
            return False
        if self._in == "banner" or self._started:
            return self._in is None
        if self._WARNING.match(line):
            self._in = "warning"
            return False
        if self._BANNER.match(line):
            self._in = "banner"
            return False
        return bool(line.strip())  # the blank lines around the banner


class _Stop(BaseException):
    """Raised by :meth:`DevStack.check_signals` (never by the signal handler) to leave the
    start-up or the wait. A BaseException, so that ``wait_until``, which treats an
    ``Exception`` from its predicate as "not yet", lets it through."""


def _say(message: str) -> None:
    print(f"[captcha-tasks-dev] {message}", flush=True)


def _redis_reachable(url: str) -> bool:
    try:
        with redis.Redis.from_url(url, socket_connect_timeout=1, socket_timeout=1) as conn:
            return bool(conn.ping())
    except (redis.RedisError, OSError):
        return False


def _pick_port(preferred: int) -> int:
    return preferred if preferred and port_is_free(preferred) else free_port()


class RunLock:
    """``flock`` on ``<run dir>/dev.lock``, held for the supervisor's life; the file names
    the holder's PID for the message of a stack refused."""

    def __init__(self, run_dir: Path) -> None:
        self.path = run_dir / "dev.lock"
        self._fd: int | None = None

    def acquire(self) -> int | None:
        """None once held; else the holder's PID (0 if it has not written it yet)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 32).decode(errors="replace").strip()
            os.close(fd)
            return int(holder) if holder.isdigit() else 0
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._fd = fd
        return None

    def release(self) -> None:
        """Closing the descriptor drops the lock; the file stays (removing it would let a
        third stack lock a new file while a second one still waits on the old one)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


class DevStack:
    """The processes of one ``captcha-tasks-dev dev`` run."""

    def __init__(
        self, options: DevOptions, settings: Settings, signals: StopSignals | None = None
    ) -> None:
        self.options = options
        self.settings = settings
        #: None: nothing interrupts the start-up and ``stop()`` always takes its time.
        self.signals = signals
        self._hurry_said = False
        self.redis: RedisServer | None = None
        self.env = dict(os.environ)
        self._wrote_env_file = False
        self.log_dir = options.run_dir / "logs"
        # Every child reads self.env as it is when it starts (each step adds to it).
        self.processes = Supervisor(self.log_dir, env=self.env)

    def check_signals(self) -> None:
        """``_Stop`` if SIGINT or SIGTERM came: called between steps and in every wait."""
        if self.signals is not None and self.signals.first is not None:
            raise _Stop(self.signals.first)

    def _hurry(self) -> bool:
        """Whether a second signal asked to kill rather than wait (said once)."""
        if self.signals is None or not self.signals.hurry:
            return False
        if not self._hurry_said:
            self._hurry_said = True
            _say("second signal: killing what is left (SIGKILL)")
        return True

    def _wait(
        self,
        child: Child | list[Child],
        ready: Callable[[], bool],
        *,
        timeout: float,
        what: str,
        interval: float = 0.1,
    ) -> None:
        """Until ``ready()``; a signal or the child's exit ends the wait at once."""

        def checked() -> bool:
            self.check_signals()
            return bool(ready())

        wait_ready(child, checked, timeout=timeout, interval=interval, what=what)

    def start_redis(self) -> str:
        url = self.settings.redis_url
        if _redis_reachable(url):
            configured = [name for name in REDIS_URL_NAMES if self.env.get(name)]
            if configured:
                self.env.setdefault("CAPTCHA_TASKS_REDIS_URL", url)
                _say(f"redis   : using {mask_url(url)} (reachable; {', '.join(configured)})")
                return url
            # The default URL answers: someone's Redis. This stack keeps to a database of
            # its own there, and stops nothing of it.
            keys = Keys(self.settings.key_prefix)
            db = claim_database(url, checkout_mark(self.options.run_dir), keys)
            url = with_database(url, db)
            self.env["CAPTCHA_TASKS_REDIS_URL"] = url
            _say(
                f"redis   : using {mask_url(url)}: a Redis answers at "
                f"{mask_url(self.settings.redis_url)}, so this checkout's stack keeps to its "
                f"database {db} there and leaves the server running"
            )
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
        for name in REDIS_URL_NAMES:
            self.env.pop(name, None)
        self.env["CAPTCHA_TASKS_REDIS_URL"] = url
        _say(
            f"redis   : started redis-server pid {self.redis.proc.pid if self.redis.proc else '?'} "
            f"on {url} (data in {self.redis.data_dir})"
        )
        return url

    def _spawn_sandbox(
        self, name: str, provider: str, port: int, demo_port: int | None
    ) -> tuple[Child, str]:
        """A sandbox playing ``provider`` on ``port`` (and the demo site on ``demo_port``),
        once it answers; its URL."""
        from captcha_tasks.settings import PROTOCOLS

        protocol = PROTOCOLS[provider]  # type: ignore[index]  # a PROVIDERS value (the CLI)
        argv = [
            sys.executable,
            "-m",
            "captcha_tasks_sandbox",
            "--port",
            str(port),
            "--threads",
            str(self.options.sandbox_threads),
            "--protocol",
            protocol,
            "--dialect",
            provider,
        ]
        if demo_port is not None:
            argv += ["--demo-port", str(demo_port)]
        if self.options.time_scale is not None:
            argv += ["--time-scale", str(self.options.time_scale)]
        child = self.processes.spawn(name, argv)
        url = f"http://127.0.0.1:{port}"
        self._wait(child, http_ok(f"{url}/healthz"), timeout=20, what=f"the {name}")
        return child, url

    def start_sandbox(self) -> str:
        """The sandbox (one per provider with ``providers``) and the variables that
        configure the workers for it; the (first) sandbox's URL."""
        from captcha_tasks_sandbox import dev_api_key

        # The workers refuse the single-provider variables beside CAPTCHA_TASKS_PROVIDERS:
        # the stack's way of configuring its provider(s) replaces the other one's.
        unused = SINGLE_PROVIDER_VARIABLES if self.options.providers else (PROVIDERS_VARIABLE,)
        dropped = [name for name in unused if self.env.pop(name, None)]
        self.env.pop(OTHER_KEY_VARIABLE, None)
        if set(dropped) - {"CAPTCHA_TASKS_SOLVER_URL", "CAPTCHA_TASKS_API_KEY"}:
            how = "--providers" if self.options.providers else "--provider"
            _say(f"sandbox : not used with {how}: {', '.join(dropped)} (from the environment)")
        if self.options.time_scale is not None:
            self.env["CAPTCHA_TASKS_TIME_SCALE"] = str(self.options.time_scale)
        scale = self.env.get("CAPTCHA_TASKS_TIME_SCALE", "1.0")
        demo_port = _pick_port(self.options.demo_port)
        if not self.options.providers:
            provider = self.options.provider
            port = _pick_port(self.options.sandbox_port)
            child, url = self._spawn_sandbox("sandbox", provider, port, demo_port)
            self.env["CAPTCHA_TASKS_SOLVER_URL"] = url
            self.env["CAPTCHA_TASKS_API_KEY"] = dev_api_key(provider)
            self.env["CAPTCHA_TASKS_PROVIDER"] = provider
            self.env["CAPTCHA_TASKS_THREADS"] = str(self.options.sandbox_threads)
            _say(f"sandbox : {url}  (stats: {url}/stats, time scale {scale}, pid {child.proc.pid})")
            first = url
        else:
            # Set once every sandbox runs: a sandbox reads the settings too, and would
            # refuse a provider named before its variables are.
            names = [provider_name(p) for p in self.options.providers]
            configured = {PROVIDERS_VARIABLE: ",".join(names)}
            first = ""
            for n, (name, provider) in enumerate(zip(names, self.options.providers, strict=True)):
                preferred = self.options.sandbox_port + n if self.options.sandbox_port else 0
                port = _pick_port(preferred)
                child, url = self._spawn_sandbox(
                    f"sandbox-{name}", provider, port, demo_port if n == 0 else None
                )
                first = first or url
                configured[variable(name, "PROTOCOL")] = provider
                configured[variable(name, "URL")] = url
                configured[variable(name, "API_KEY")] = dev_api_key(provider)
                configured[variable(name, "THREADS")] = str(self.options.sandbox_threads)
                _say(
                    f"sandbox : {name}: {url}  (stats: {url}/stats, time scale {scale}, "
                    f"pid {child.proc.pid})"
                )
            self.env.update(configured)
        # The demo site is the one target page tasks may fetch here (unless configured).
        demo = f"127.0.0.1:{demo_port}"
        allowed = self.env.get("CAPTCHA_TASKS_ALLOWED_DOMAINS", "")
        self.env["CAPTCHA_TASKS_ALLOWED_DOMAINS"] = f"{allowed},{demo}" if allowed else demo
        first_name = provider_name(self.options.providers[0]) if self.options.providers else ""
        trusts = f"; it accepts {first_name}'s tokens only" if self.options.providers else ""
        _say(f"demo    : http://{demo}/page/1  (a protected site for fetch_page; /stats{trusts})")
        return first

    def _control_app(self) -> Celery:
        """The supervisor's own Celery client of the stack's Redis (pings, the smoke)."""
        broker = self.env.get("CAPTCHA_TASKS_BROKER_URL") or self.env["CAPTCHA_TASKS_REDIS_URL"]
        backend = self.env.get("CAPTCHA_TASKS_RESULT_BACKEND") or broker
        app = Celery("captcha_tasks_dev", broker=broker, backend=backend, set_as_current=False)
        # The package's result backend (Celery reads override_backends only from a
        # configuration object): close_control() closes its consumer's connection, so
        # results collected later, after Redis stopped, unsubscribe nothing.
        app.config_from_object({"override_backends": backends()})
        return app

    @staticmethod
    def close_control(app: Celery) -> None:
        """Close the control client while Redis still answers: its result consumer's
        pub/sub connection, then its broker connections."""
        consumer = getattr(app.backend, "result_consumer", None)
        if consumer is not None:
            consumer.stop()
        app.close()

    def _result(self, result: Any, *, timeout: float, what: str) -> Any:
        """``result.get()`` in short slices, so that a signal is seen within about a second."""
        deadline = time.monotonic() + timeout
        while True:
            self.check_signals()
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}")
            try:
                return result.get(timeout=min(0.5, left))
            except CeleryTimeoutError:
                continue

    def start_workers(self) -> list[str]:
        names, children = [], []
        for index in range(1, self.options.workers + 1):
            name = f"dev{index}@%h"
            argv = [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "captcha_tasks",
                "worker",
                "-c",
                str(self.options.concurrency),
                "-l",
                "INFO",
                "-n",
                name,
            ]
            children.append(
                self.processes.spawn(
                    f"worker{index}",
                    argv,
                    to_terminal=True,
                    shown=CeleryStartupNoise(),
                    stop_timeout=30.0,
                )
            )
            names.append(name.replace("%h", os.uname().nodename))
        control = self._control_app()
        try:

            def all_answer() -> bool:
                replies = control.control.ping(timeout=1.0)
                answered = {name for reply in replies for name in reply}
                return set(names) <= answered

            self._wait(
                self.processes.children,
                all_answer,
                timeout=60,
                interval=0.5,
                what="the workers to answer ping",
            )
        finally:
            self.close_control(control)
        for name, child in zip(names, children, strict=True):
            _say(f"worker  : {name} (-c {self.options.concurrency}, pid {child.pid})")
        return names

    def start_flower(self) -> tuple[str, str]:
        port = _pick_port(self.options.flower_port)
        auth = self.env.get("FLOWER_BASIC_AUTH") or f"admin:{secrets.token_urlsafe(12)}"
        self.env["FLOWER_BASIC_AUTH"] = auth
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
        child = self.processes.spawn("flower", argv)
        url = f"http://127.0.0.1:{port}"
        self._wait(child, http_ok(f"{url}/healthcheck"), timeout=30, what="Flower")
        _say(f"flower  : {url}  (user/password {auth}, pid {child.proc.pid})")
        return url, auth

    def smoke(self) -> None:
        control = self._control_app()
        try:
            started = time.monotonic()
            pong = self._result(control.send_task("captcha_tasks.ping"), timeout=30, what="ping")
            balances = []
            names: list[str | None] = [provider_name(p) for p in self.options.providers]
            for name in names or [None]:
                balance = self._result(
                    control.send_task("captcha_tasks.get_balance", kwargs={"provider": name}),
                    timeout=60,
                    what="get_balance",
                )
                balances.append(f"{name} {balance['balance']}" if name else balance["balance"])
            sandboxes = "the sandboxes" if self.options.providers else "the sandbox"
            _say(
                f"smoke   : ping -> {pong['hostname']} v{pong['version']}; get_balance -> "
                f"{', '.join(balances)} via {sandboxes} ({time.monotonic() - started:.2f} s)"
            )
            started = time.monotonic()
            solved = self._result(
                control.send_task(
                    "captcha_tasks.solve_recaptcha_v2",
                    args=(SMOKE_SITEKEY, "https://example.com/make-run"),
                ),
                timeout=120,
                what="solve_recaptcha_v2",
            )
            by = f" at {solved['provider']}" if self.options.providers else ""
            _say(
                f"smoke   : solve_recaptcha_v2 -> captcha {solved['captcha_id']}{by}, token "
                f"{solved['solution'][:12]}... ({time.monotonic() - started:.2f} s end to end)"
            )
            started = time.monotonic()
            demo = self.env["CAPTCHA_TASKS_ALLOWED_DOMAINS"].split(",")[-1]
            page = self._result(
                control.send_task("captcha_tasks.fetch_page", args=(f"http://{demo}/page/1",)),
                timeout=120,
                what="fetch_page",
            )
            _say(
                f"smoke   : fetch_page {page['url']} -> HTTP {page['status']}, "
                f"solved={page['solved']} ({time.monotonic() - started:.2f} s)"
            )
        finally:
            self.close_control(control)

    #: What a second terminal needs to talk to this stack (``source .run/env``).
    ENV_NAMES = (
        "CAPTCHA_TASKS_REDIS_URL",
        "CAPTCHA_TASKS_BROKER_URL",
        "CAPTCHA_TASKS_RESULT_BACKEND",
        "CAPTCHA_TASKS_STATE_URL",
        "CAPTCHA_TASKS_SOLVER_URL",
        "CAPTCHA_TASKS_PROVIDER",
        "CAPTCHA_TASKS_API_KEY",
        "CAPTCHA_TASKS_PROVIDERS",
        "CAPTCHA_TASKS_THREADS",
        "CAPTCHA_TASKS_TIME_SCALE",
        "CAPTCHA_TASKS_ALLOWED_DOMAINS",
        "FLOWER_BASIC_AUTH",
    )

    @property
    def env_file(self) -> Path:
        return self.options.run_dir / "env"

    def write_env_file(self) -> Path:
        """``export`` lines for the variables the stack's processes got (the key is the
        sandbox's, not a real one), readable by the owner only; removed at stop."""
        lines = ["# captcha-tasks-dev dev: `source` this in another terminal; removed at stop."]
        providers = [
            variable(provider_name(p), suffix)
            for p in self.options.providers
            for suffix in (
                "PROTOCOL",
                "URL",
                "API_KEY",
                "THREADS",
                "TYPES",
                "PRICES",
                "BALANCE_FLOOR",
            )
        ]
        for name in (*self.ENV_NAMES, *providers):
            if self.env.get(name):
                lines.append(f"export {name}={shlex.quote(self.env[name])}")
        self.env_file.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.env_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        self._wrote_env_file = True
        with os.fdopen(fd, "w") as out:
            out.write("\n".join(lines) + "\n")
        return self.env_file

    def stop(self) -> None:
        """Stop the children in reverse order, then Redis, each by PID: SIGTERM, then
        SIGKILL once its deadline passed or a second signal asked to hurry. Raises nothing,
        so that one child that will not die does not leave the others running."""
        if self._wrote_env_file:
            with contextlib.suppress(OSError):
                self.env_file.unlink(missing_ok=True)

        def said(child: Child, code: int | None, error: Exception | None) -> None:
            if error is None:
                _say(f"stopped {child.name} (pid {child.pid}, exit {code})")
            else:
                _say(f"could not stop {child.name} (pid {child.pid}): {error!r}")

        self.processes.stop(hurry=self._hurry, said=said)
        if self.redis is not None:
            proc = self.redis.proc
            try:
                if proc is not None:
                    # Here rather than in RedisServer.stop(), which would not hurry.
                    stop_process(proc, timeout=10, hurry=self._hurry)
                self.redis.stop()
                _say(f"stopped redis-server (pid {proc.pid if proc else '?'})")
            except Exception as exc:
                _say(f"could not stop redis-server: {exc!r}")
            self.redis = None

    def wait(self) -> None:
        while True:
            self.check_signals()
            for child in self.processes.children:
                child.check_alive()
            time.sleep(0.2)


def run_dev(options: DevOptions, settings: Settings) -> int:
    """Run the stack until interrupted. Returns the process exit code."""
    if options.time_scale is None and not os.environ.get("CAPTCHA_TASKS_TIME_SCALE"):
        # Local solves in seconds rather than the provider's real 15-20 s.
        options.time_scale = DEV_TIME_SCALE
    lock = RunLock(options.run_dir)
    holder = lock.acquire()
    if holder is not None:
        pid = f"pid {holder}" if holder else "starting"
        _say(
            f"a stack already runs from {options.run_dir} ({pid}): use it (source "
            f"{options.run_dir / 'env'}) or stop it first (Ctrl-C in its terminal)"
        )
        return ALREADY_RUNNING
    try:
        return _run_locked(options, settings)
    finally:
        lock.release()


def _run_locked(options: DevOptions, settings: Settings) -> int:
    signals = StopSignals()
    stack = DevStack(options, settings, signals)
    code = 0
    # The handler raises nothing (see StopSignals), so nothing below is cut short by a signal:
    # a _Stop comes only from stack.check_signals(), and stack.stop() always runs to its end.
    with signals.installed():
        try:
            stack.start_redis()
            stack.check_signals()
            stack.start_sandbox()
            stack.start_workers()
            stack.start_flower()
            if options.smoke:
                stack.smoke()
            stack.check_signals()
            env_file = stack.write_env_file()
            _say(f"env     : source {env_file}  (another terminal: the stack's variables)")
            _say(f"up. Try:  source {env_file} && .venv/bin/celery -A captcha_tasks inspect ping")
            _say("Ctrl-C (or SIGTERM) stops everything; a second one kills what is left.")
            stack.wait()
        except _Stop as stop:
            _say(f"{stop} received, stopping")
        except Exception as exc:
            _say(f"error: {exc}")
            code = 1
        finally:
            stack.stop()
    return code
