"""`make run` (captcha-tasks-dev dev), started and stopped the way a terminal and `make` do it.

The stack runs under a real `make` in a session of its own, so that its process group
holds two processes, `make` and the supervisor, as a terminal's foreground job does.
The signal goes to that group (`os.killpg`): Ctrl-C's SIGINT reaches both; a SIGTERM
reaches both and `make` passes it on to the supervisor once more. Before the signal the
test notes every process of the tree (psutil); afterwards none may be left, the
supervisor included, and the ports must be free. Comes up with no API key and no Redis
of its own: the supervisor starts a redis-server on a free port; or beside a Redis that
already runs on the default port, which it must use and leave as it found it.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import pytest
import redis

from captcha_tasks_dev.procs import free_port, port_is_free, stop_process, wait_until
from captcha_tasks_dev.redis_server import RedisServer
from captcha_tasks_dev.run import SMOKE_SITEKEY
from captcha_tasks_dev.shared_redis import checkout_mark

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(shutil.which("make") is None, reason="needs make, as `make run` does"),
]
ROOT = Path(__file__).resolve().parents[2]
#: The issue's bound: what is still running this long after the signal was left behind.
GONE_WITHIN = 15.0


@dataclass
class _DevRun:
    """`make run`-like: `make` running `captcha-tasks-dev dev`, in a session of its own."""

    make: subprocess.Popen[str]
    env: dict[str, str]
    ports: dict[str, int]
    lines: list[str] = field(default_factory=list)
    tree: dict[int, psutil.Process] = field(default_factory=dict)

    @property
    def pgid(self) -> int:
        return self.make.pid  # start_new_session: make leads the group

    def out(self) -> str:
        return "".join(self.lines)

    def wait_for_line(self, text: str, timeout: float) -> str:
        def seen() -> bool:
            if self.make.poll() is not None and text not in self.out():
                raise AssertionError(f"make exited with {self.make.returncode}:\n{self.out()}")
            return text in self.out()

        try:
            wait_until(seen, timeout=timeout, interval=0.1, what=repr(text))
        except TimeoutError as exc:
            raise AssertionError(f"{exc}\n{self.out()}") from None
        return next(line for line in self.lines if text in line)

    def note_tree(self) -> list[psutil.Process]:
        """Every process under `make` now (kept for the checks and for the clean-up)."""
        with contextlib.suppress(psutil.NoSuchProcess):
            root = psutil.Process(self.make.pid)
            for proc in [root, *root.children(recursive=True)]:
                self.tree.setdefault(proc.pid, proc)
        return list(self.tree.values())

    def left(self) -> list[str]:
        """The noted processes still running (psutil tells a reused PID apart)."""
        alive = []
        for proc in self.tree.values():
            with contextlib.suppress(psutil.NoSuchProcess):
                if proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE:
                    alive.append(f"{proc.pid} {' '.join(proc.cmdline())[:100]}")
        return alive

    def wait_until_gone(self, timeout: float) -> list[str]:
        deadline = time.monotonic() + timeout
        while (left := self.left()) and time.monotonic() < deadline:
            time.sleep(0.2)
        return left

    def busy_ports(self) -> list[int]:
        return [port for port in self.ports.values() if not port_is_free(port)]


#: Run a command with SIGINT and SIGQUIT at their defaults, as a terminal's foreground
#: job has them. A test session started in the background by a shell without job
#: control inherits them ignored (POSIX), and so would make: a Ctrl-C would then stop
#: the supervisor but not make, which is not what a user's terminal does.
AS_A_TERMINAL_JOB = (
    sys.executable,
    "-c",
    "import os, signal, sys\n"
    "signal.signal(signal.SIGINT, signal.SIG_DFL)\n"
    "signal.signal(signal.SIGQUIT, signal.SIG_DFL)\n"
    "os.execvp(sys.argv[1], sys.argv[1:])",
)


def _make_run(tmp_path: Path, env: dict[str, str], extra: tuple[str, ...] = ()) -> list[str]:
    """The argv of `make run` for the test's Makefile (written on first use); ``extra``:
    more options of `captcha-tasks-dev dev`."""
    makefile = tmp_path / "Makefile"
    if not makefile.exists():
        argv = [
            *(
                sys.executable,
                "-m",
                "captcha_tasks_dev",
                "dev",
                "--run-dir",
                str(tmp_path / "run"),
            ),
            *("--sandbox-port", env["TEST_SANDBOX_PORT"], "--flower-port", env["TEST_FLOWER_PORT"]),
            *("--demo-port", env["TEST_DEMO_PORT"]),
            *extra,
        ]
        makefile.write_text(f"run:\n\t{shlex.join(argv)}\n")
    return [*AS_A_TERMINAL_JOB, "make", "-s", "-f", str(makefile), "run"]


@contextlib.contextmanager
def dev_under_make(
    tmp_path: Path, *, own_redis: bool = True, extra: tuple[str, ...] = ()
) -> Iterator[_DevRun]:
    """Start the stack under `make` and yield once it printed "up."; on the way out,
    SIGKILL by PID whatever of its tree is still running. ``own_redis``: point
    CAPTCHA_TASKS_REDIS_URL at a free port, where the supervisor starts a redis-server;
    else leave it unset, so that the stack looks at the default URL."""
    ports = {"sandbox": free_port(), "flower": free_port(), "demo": free_port()}
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CAPTCHA", "FLOWER"))}
    if own_redis:
        # Nothing listens there yet: the supervisor starts a redis-server of its own on it.
        ports["redis"] = free_port()
        env["CAPTCHA_TASKS_REDIS_URL"] = f"redis://127.0.0.1:{ports['redis']}/0"
    env.update(
        CAPTCHA_TASKS_TIME_SCALE="0.05",
        PYTHONUNBUFFERED="1",
        TEST_SANDBOX_PORT=str(ports["sandbox"]),
        TEST_FLOWER_PORT=str(ports["flower"]),
        TEST_DEMO_PORT=str(ports["demo"]),
    )
    make = subprocess.Popen(
        _make_run(tmp_path, env, extra),
        cwd=ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # its own process group, as a terminal's foreground job
    )
    run = _DevRun(make, env, ports)
    stdout = make.stdout
    assert stdout is not None
    reader = threading.Thread(target=lambda: run.lines.extend(iter(stdout.readline, "")))
    reader.daemon = True
    reader.start()
    try:
        run.wait_for_line("up. Try", timeout=200)
        demo = re.search(r"demo    : http://127\.0\.0\.1:(\d+)", run.out())
        assert demo, run.out()
        ports["demo"] = int(demo.group(1))
        run.note_tree()
        yield run
    finally:
        run.note_tree()
        for proc in run.tree.values():
            with contextlib.suppress(psutil.NoSuchProcess):
                proc.kill()  # by PID; psutil refuses a PID that now names another process
        stop_process(make, timeout=5)
        reader.join(timeout=5)
        stdout.close()


def _stack_pids(run: _DevRun) -> dict[str, int]:
    """The PIDs the supervisor reported, by name, and its own."""
    out = run.out()
    pids = {
        "sandbox": int(re.search(r"sandbox : .*pid (\d+)\)", out).group(1)),  # type: ignore[union-attr]
        "worker": int(re.search(r"worker  : .*pid (\d+)\)", out).group(1)),  # type: ignore[union-attr]
        "flower": int(re.search(r"flower  : .*pid (\d+)\)", out).group(1)),  # type: ignore[union-attr]
    }
    if redis := re.search(r"started redis-server pid (\d+)", out):
        pids["redis"] = int(redis.group(1))
    (supervisor,) = [p for p in run.tree.values() if p.ppid() == run.make.pid]
    pids["supervisor"] = supervisor.pid
    assert set(pids.values()) <= set(run.tree), (pids, run.note_tree())
    return pids


@pytest.mark.timeout(300)  # four processes and three round trips on a busy 2-core machine
@pytest.mark.long
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_signal_to_the_group_stops_the_whole_stack(tmp_path: Path, sig: signal.Signals) -> None:
    with dev_under_make(tmp_path) as run:
        out = run.out()
        assert "started redis-server" in out
        assert re.search(r"smoke   : ping -> dev1@\S+ v\S+; get_balance -> 100\.0000", out)
        pids = _stack_pids(run)
        tree = run.note_tree()
        assert len(tree) >= 7, tree  # make, supervisor, redis, sandbox, worker + pool, flower
        # A second terminal: `source .run/env` is all it needs to talk to the stack.
        env_file = tmp_path / "run" / "env"
        assert f"source {env_file}" in out
        bare = {k: v for k, v in run.env.items() if not k.startswith("CAPTCHA")}
        ping = subprocess.run(
            [
                "bash",
                "-c",
                f"source {shlex.quote(str(env_file))} && exec {sys.executable} "
                "-m celery -A captcha_tasks inspect ping -t 5",
            ],
            cwd=ROOT,
            env=bare,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert ping.returncode == 0, ping.stdout + ping.stderr
        assert "pong" in ping.stdout
        # Every child's log is in the run directory, the worker's too (also on the terminal,
        # but for Celery's start-up banner, which only the log keeps).
        log = (tmp_path / "run" / "logs" / "worker1.log").read_text()
        assert " ready." in log and "[tasks]" in log
        assert re.search(r"^\[.*\] dev1@\S+ ready\.$", out, re.MULTILINE), out
        assert "[tasks]" not in out and "-------------- dev1@" not in out, out

        os.killpg(run.pgid, sig)
        left = run.wait_until_gone(GONE_WITHIN)
        assert left == [], f"left {GONE_WITHIN:.0f} s after {sig.name}: {left}\n{run.out()}"
        assert run.make.wait(timeout=5) == -sig  # make ends by the signal, as it should
        assert run.busy_ports() == [], (run.ports, run.out())
        out = run.out()
        assert f"{sig.name} received, stopping" in out
        for name in ("flower", "worker1", "sandbox"):
            assert re.search(rf"stopped {name} \(pid \d+, exit -?\d+\)", out), out
        assert f"stopped redis-server (pid {pids['redis']})" in out
        assert not env_file.exists()  # the stack it described is gone
        # One signal (make's copy of a SIGTERM included) is a graceful stop: nothing killed,
        assert "second signal" not in out and "exit -9)" not in out, out
        # and the supervisor exited 0 (else make says "make: *** [...] Error 1").
        assert "make: ***" not in out and "Traceback" not in out, out


@pytest.mark.timeout(300)
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_second_signal_during_the_stop_kills_what_is_left(
    tmp_path: Path, sig: signal.Signals
) -> None:
    with dev_under_make(tmp_path) as run:
        pids = _stack_pids(run)
        # Flower, stopped first, will not react to SIGTERM (its stop would wait its 10 s):
        # the second signal arrives while the supervisor waits for it, as in the report.
        os.killpg(pids["flower"], signal.SIGSTOP)
        os.killpg(run.pgid, sig)
        first = time.monotonic()
        run.wait_for_line(f"{sig.name} received, stopping", timeout=10)
        time.sleep(max(0.0, first + 1.5 - time.monotonic()))  # a new request, not make's copy
        assert "stopped flower" not in run.out(), run.out()
        os.killpg(run.pgid, sig)
        # Without the hurry, Flower alone would hold the stop until first + 10 s.
        left = run.wait_until_gone(5.0)
        assert left == [], f"left 5 s after the second {sig.name}: {left}\n{run.out()}"
        assert run.make.wait(timeout=5) == -sig
        assert run.busy_ports() == [], (run.ports, run.out())
        out = run.out()
        assert "second signal: killing what is left (SIGKILL)" in out, out
        assert f"stopped flower (pid {pids['flower']}, exit -9)" in out, out
        assert f"stopped redis-server (pid {pids['redis']})" in out, out
        assert "make: ***" not in out and "Traceback" not in out, out


def _in_another_terminal(
    run: _DevRun, env_file: Path, code: str
) -> subprocess.CompletedProcess[str]:
    """``source <env file>`` and run ``code``, as a second terminal would."""
    bare = {k: v for k, v in run.env.items() if not k.startswith("CAPTCHA")}
    command = f"source {shlex.quote(str(env_file))} && exec {sys.executable} -c {shlex.quote(code)}"
    return subprocess.run(
        ["bash", "-c", command],
        cwd=ROOT,
        env=bare,
        capture_output=True,
        text=True,
        timeout=90,
    )


def _stop_with_sigint(run: _DevRun) -> str:
    os.killpg(run.pgid, signal.SIGINT)
    left = run.wait_until_gone(GONE_WITHIN)
    assert left == [], f"left {GONE_WITHIN:.0f} s after SIGINT: {left}\n{run.out()}"
    assert run.make.wait(timeout=5) == -signal.SIGINT
    out = run.out()
    assert "make: ***" not in out and "Traceback" not in out, out
    return out


#: The port a Redis of the machine listens on, where `make run` looks first.
DEFAULT_PORT = 6379


@pytest.mark.timeout(300)
@pytest.mark.long
def test_beside_a_redis_on_the_default_port(tmp_path: Path) -> None:
    """A Redis of someone else's answers at the default URL, with data in database 0
    (including a queue named `celery`, as another Celery app's), other data in database
    1 and another checkout's stack in database 2: `make run` uses that server, in
    database 3, solves through it, and leaves the server running with all of it."""
    if not port_is_free(DEFAULT_PORT):
        # That is someone's Redis (or something else): it is not this test's to write to or
        # to stop, and no other port plays the default one.
        pytest.skip(f"port {DEFAULT_PORT} is taken: this test starts its own Redis there")
    with RedisServer(DEFAULT_PORT, data_dir=tmp_path / "theirs") as theirs:
        assert theirs.proc is not None
        theirs_pid = theirs.proc.pid
        users = {db: redis.Redis(host="127.0.0.1", port=DEFAULT_PORT, db=db) for db in (0, 1, 2)}
        users[0].set("their:data", "kept")
        users[0].rpush("celery", "another app's message")
        users[1].hset("someone:else", "field", "value")
        other_stack = "elsewhere:/another/checkout/.run"
        users[2].set("ct:dev:checkout", other_stack, ex=3600)
        before = {db: sorted(client.keys()) for db, client in users.items()}

        with dev_under_make(tmp_path, own_redis=False) as run:
            out = run.out()
            assert "started redis-server" not in out, out
            assert (
                "redis   : using redis://localhost:6379/3: a Redis answers at "
                "redis://localhost:6379/0" in out
            ), out
            assert re.search(r"smoke   : solve_recaptcha_v2 -> captcha \d+", out), out
            stack = redis.Redis(host="127.0.0.1", port=DEFAULT_PORT, db=3)
            assert stack.get("ct:dev:checkout") == checkout_mark(tmp_path / "run").encode()
            # A second terminal solves through the stack with what `.run/env` says.
            env_file = tmp_path / "run" / "env"
            assert "CAPTCHA_TASKS_REDIS_URL=redis://localhost:6379/3" in env_file.read_text()
            solved = _in_another_terminal(
                run,
                env_file,
                "from captcha_tasks import solve_recaptcha_v2\n"
                f"r = solve_recaptcha_v2.delay({SMOKE_SITEKEY!r}, 'https://example.com/x')\n"
                "print('solved', r.get(timeout=60)['captcha_id'])\n",
            )
            assert solved.returncode == 0, solved.stdout + solved.stderr
            assert re.search(r"^solved \d+$", solved.stdout, re.MULTILINE), solved.stdout
            out = _stop_with_sigint(run)
            assert "stopped redis-server" not in out, out

        # The server still runs, the same process, with everything it held.
        assert theirs.proc.poll() is None and theirs.proc.pid == theirs_pid
        assert users[0].ping()
        assert {db: sorted(client.keys()) for db, client in users.items()} == before
        assert users[0].get("their:data") == b"kept"
        assert users[0].lrange("celery", 0, -1) == [b"another app's message"]
        assert users[1].hgetall("someone:else") == {b"field": b"value"}
        assert users[2].get("ct:dev:checkout") == other_stack.encode()
        for client in (*users.values(), stack):
            client.close()


@pytest.mark.timeout(300)
@pytest.mark.long
def test_a_second_stack_in_the_same_run_directory_is_refused(tmp_path: Path) -> None:
    with dev_under_make(tmp_path) as run:
        pids = _stack_pids(run)
        env_file = tmp_path / "run" / "env"
        described = env_file.read_text()
        second = subprocess.run(
            _make_run(tmp_path, run.env),
            cwd=ROOT,
            env=run.env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert second.returncode == 2, second.stdout + second.stderr
        # One line of its own (make's "Error 2" report on stderr is make's).
        assert second.stdout.splitlines() == [
            f"[captcha-tasks-dev] a stack already runs from {tmp_path / 'run'} "
            f"(pid {pids['supervisor']}): use it (source {env_file}) or stop it first "
            "(Ctrl-C in its terminal)"
        ], second.stdout
        make_said = re.compile(r"make(\[\d+\])?: \*\*\* ")  # make[2] under make test
        assert [line for line in second.stderr.splitlines() if not make_said.match(line)] == []
        # The first stack is untouched: its file, its processes, its answers.
        assert env_file.read_text() == described
        assert len(run.left()) == len(run.tree), (run.left(), run.tree)
        ping = _in_another_terminal(
            run,
            env_file,
            "from captcha_tasks import app\nprint(sorted(app.control.ping(timeout=5.0)[0]))\n",
        )
        assert ping.returncode == 0 and "dev1@" in ping.stdout, ping.stdout + ping.stderr
        _stop_with_sigint(run)
        assert not env_file.exists()  # removed by the stack that wrote it


@pytest.mark.timeout(300)
@pytest.mark.long
def test_two_providers_each_played_by_a_sandbox(tmp_path: Path) -> None:
    """`make run PROVIDERS=captchaai,capsolver`: a sandbox each, the workers configured
    with both; a second terminal pins a solve to either with what `.run/env` says."""
    with dev_under_make(tmp_path, extra=("--providers", "captchaai,capsolver")) as run:
        out = run.out()
        assert re.search(r"sandbox : captchaai: http://127\.0\.0\.1:\d+ ", out), out
        assert re.search(r"sandbox : capsolver: http://127\.0\.0\.1:\d+ ", out), out
        assert "get_balance -> captchaai 100.0000, capsolver 100.0 via the sandboxes" in out
        assert re.search(r"smoke   : solve_recaptcha_v2 -> captcha \S+ at captchaai,", out)
        assert re.search(r"smoke   : fetch_page .* -> HTTP 200, solved=True", out), out
        env_file = tmp_path / "run" / "env"
        assert "CAPTCHA_TASKS_PROVIDERS=captchaai,capsolver" in env_file.read_text()
        solved = _in_another_terminal(
            run,
            env_file,
            "from captcha_tasks import get_balance, solve_recaptcha_v2 as s\n"
            "print(get_balance.delay(provider='capsolver').get(timeout=30))\n"
            "for name in ('captchaai', 'capsolver'):\n"
            f"    r = s.delay({SMOKE_SITEKEY!r}, 'https://example.com/x', provider=name)\n"
            "    r = r.get(timeout=60)\n"
            "    print('solved by', r['provider'], r['protocol'])\n",
        )
        assert solved.returncode == 0, solved.stdout + solved.stderr
        assert solved.stdout.splitlines() == [
            # As the several providers guide shows it: the configured name, the protocol.
            "{'balance': '100.0', 'provider': 'capsolver', 'protocol': 'capsolver'}",
            "solved by captchaai captchaai",
            "solved by capsolver capsolver",
        ], solved.stdout
        out = _stop_with_sigint(run)
        for name in ("sandbox-captchaai", "sandbox-capsolver"):
            assert re.search(rf"stopped {name} \(pid \d+, exit 0\)", out), out
