"""Least privilege on a real redis-server: ``deploy/users.acl`` (rendered by
``deploy/redis-acl.sh``, as the compose file does) loaded with ``aclfile``, a real
``celery worker`` (gossip and mingle on, as the image runs it) and an application
enqueueing as ``worker``, ``status``, ``watch``, ``check`` and a scrape's reads as
``monitor``; every write of the monitor is refused, and Redis's ACL LOG shows no
refusal but the ones this file names."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
import requests

from captcha_tasks.monitor.metrics import StateCollector
from captcha_tasks.settings import Settings
from captcha_tasks_dev.procs import Child, free_port, spawn, stop_process
from captcha_tasks_dev.redis_server import RedisServer
from captcha_tasks_sandbox import DEV_API_KEY
from tests.integration.test_monitor import Cli, run_cli
from tests.support.workers import ROOT, TEST_TIME_SCALE, wait_for_worker

pytestmark = pytest.mark.integration

DEPLOY = ROOT / "deploy"
#: The only commands Redis refuses the worker: redis-py's ``CLIENT SETINFO`` (library
#: name and version) on each new connection, which it ignores when refused.
WORKER_REFUSED = {"client"}
#: The monitor's: the same, and ``status``'s ping (a broadcast and its reply queue:
#: remote control is not the monitor's), which falls back to the heartbeats.
MONITOR_REFUSED_COMMANDS = {"client", "multi", "exec"}
MONITOR_REFUSED_KEYS = ".reply.celery.pidbox"

#: What an application does as ``worker``: a token pool filled and served, a solve
#: and a page fetch (a challenge solved, cookies shared, a session lock).
CLIENT = """
import json, sys
from captcha_tasks import fetch_page, solve_recaptcha_v2
from captcha_tasks_dev.procs import wait_until
from captcha_tasks.engine.pool import TokenPool
from captcha_tasks.provider import RecaptchaV2
from captcha_tasks.settings import get_settings
from captcha_tasks.state import state_redis

key, demo = sys.argv[1], sys.argv[2]
pool = TokenPool(state_redis(get_settings()), get_settings())
pool.fill(RecaptchaV2(key, "https://example.com/pooled"), target=1)
wait_until(lambda: pool.status()[0]["size"] >= 1, timeout=60, what="a pooled token")
pool.fill(RecaptchaV2(key, "https://example.com/pooled"), target=0)
pooled = solve_recaptcha_v2.delay(key, "https://example.com/pooled").get(timeout=60)
solved = solve_recaptcha_v2.delay(key, "https://example.com/acl").get(timeout=60)
page = fetch_page.delay(demo + "/page/1").get(timeout=90)
print(json.dumps([pooled["source"], solved["source"], page["status"], page["solved"]]))
"""
SITEKEY = "6Le-wvkSAAAAAPBMRTvw0Q4Muexq9bi0DJwx_mJ-"


class AclRedis:
    def __init__(self, server: RedisServer, passwords: dict[str, str]) -> None:
        self.server = server
        self.passwords = passwords

    def url(self, user: str) -> str:
        return f"redis://{user}:{self.passwords[user]}@{self.server.host}:{self.server.port}/0"

    def client(self, user: str) -> redis.Redis:
        return redis.Redis.from_url(self.url(user), socket_timeout=5, decode_responses=True)


@pytest.fixture
def acl_redis(tmp_path: Path) -> Iterator[AclRedis]:
    passwords = {user: secrets.token_hex(16) for user in ("default", "worker", "monitor")}
    env = {
        **os.environ,
        "REDIS_PASSWORD": passwords["default"],
        "REDIS_WORKER_PASSWORD": passwords["worker"],
        "REDIS_MONITOR_PASSWORD": passwords["monitor"],
    }
    rendered = tmp_path / "users.acl"
    subprocess.run(
        ["sh", str(DEPLOY / "redis-acl.sh"), str(DEPLOY / "users.acl"), str(rendered)],
        env=env,
        check=True,
        timeout=30,
    )
    assert passwords["worker"] not in rendered.read_text()  # hashes only
    server = RedisServer(password=passwords["default"], extra_args=["--aclfile", str(rendered)])
    server.start()
    try:
        yield AclRedis(server, passwords)
    finally:
        server.stop()


@pytest.fixture
def acl_worker(acl_redis: AclRedis, demo_sandbox: Any, tmp_path: Path) -> Iterator[Child]:
    """A worker as the image runs it (gossip and mingle on), as ``worker``."""
    env = {
        **os.environ,
        "CAPTCHA_TASKS_REDIS_URL": acl_redis.url("worker"),
        "CAPTCHA_TASKS_SOLVER_URL": demo_sandbox.url,
        "CAPTCHAAI_API_KEY": DEV_API_KEY,
        "CAPTCHA_TASKS_TIME_SCALE": str(TEST_TIME_SCALE),
        "CAPTCHA_TASKS_HTTP_TIMEOUT": "5",
        "CAPTCHA_TASKS_ALLOWED_DOMAINS": demo_sandbox.demo_url.split("//")[1],
        "CAPTCHA_TASKS_BALANCE_FLOOR": "1",  # the balance watch writes and reads too
        "CAPTCHA_TASKS_METRICS_PORT": str(free_port()),
        "PYTHONUNBUFFERED": "1",
    }
    argv = [
        sys.executable,
        "-m",
        "celery",
        "-A",
        "captcha_tasks",
        "worker",
        "-n",
        "acl@127.0.0.1",
        "-c",
        "2",
        "-l",
        "INFO",
    ]
    worker = spawn("acl@127.0.0.1", argv, tmp_path / "acl.log", env=env, cwd=ROOT)
    worker.metrics_port = int(env["CAPTCHA_TASKS_METRICS_PORT"])  # type: ignore[attr-defined]
    try:
        wait_for_worker(worker)
        yield worker
    finally:
        stop_process(worker.proc, timeout=30, group=True)


def _refused(client: redis.Redis) -> dict[str, set[str]]:
    """ACL LOG: the refused commands and keys, by user."""
    out: dict[str, set[str]] = {}
    for entry in client.acl_log(count=200):  # type: ignore[no-untyped-call]
        out.setdefault(entry["username"], set()).add(f"{entry['reason']}:{entry['object']}")
    return out


def test_a_worker_a_solve_and_status_under_least_privilege_users(
    acl_redis: AclRedis, acl_worker: Child, demo_sandbox: Any
) -> None:
    monitor_env = {
        "CAPTCHA_TASKS_REDIS_URL": acl_redis.url("monitor"),
        "CAPTCHAAI_API_KEY": DEV_API_KEY,
        "CAPTCHA_TASKS_SOLVER_URL": demo_sandbox.url,
    }
    watch = Cli(["watch", "--json", "--limit", "1", "--timeout", "90"], monitor_env)
    watch.wait_for_stderr("watching task events")

    client_env = {**os.environ, "CAPTCHA_TASKS_REDIS_URL": acl_redis.url("worker")}
    done = subprocess.run(
        [sys.executable, "-c", CLIENT, SITEKEY, demo_sandbox.demo_url],
        env=client_env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr[-3000:] + acl_worker.output()[-3000:]
    assert json.loads(done.stdout.splitlines()[-1]) == ["pool", "api", 200, True]

    code, out, err = watch.finish()
    assert code == 0, err
    assert json.loads(out.splitlines()[0])["state"] == "SUCCESS"

    code, out, err = run_cli(["status", "--json"], monitor_env)
    assert code == 0, err
    report = json.loads(out)
    assert report["workers"]["source"] == "heartbeat"  # the ping is refused
    assert report["workers"]["names"] == ["acl@127.0.0.1"]
    assert report["budget"]["limit"] == 5 and report["broker"]["queues"] == {"celery": 0}
    assert report["providers"][0]["solves_last_hour"] >= 3
    assert report["token_pools"][0]["size"] == 0
    code, out, err = run_cli(["check", "--worker", "acl@127.0.0.1"], monitor_env)
    assert code == 0, out + err

    # The worker's own scrape (as worker), and a scrape's reads as monitor.
    port = acl_worker.metrics_port  # type: ignore[attr-defined]
    scrape = requests.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
    assert "captcha_tasks_state_up 1.0" in scrape
    monitor_settings = Settings.from_env({"CAPTCHA_TASKS_REDIS_URL": acl_redis.url("monitor")})
    families = {f.name: f for f in StateCollector.from_settings(monitor_settings).collect()}
    assert families["captcha_tasks_state_up"].samples[0].value == 1

    refused = _refused(acl_redis.server.client())
    assert refused.get("worker", set()) <= {f"command:{c}" for c in WORKER_REFUSED}, refused
    for what in refused.get("monitor", set()):
        reason, _, name = what.partition(":")
        assert (reason == "command" and name in MONITOR_REFUSED_COMMANDS) or (
            reason == "key" and MONITOR_REFUSED_KEYS in name
        ), refused
    assert "NOPERM" not in acl_worker.output() and "NoPermission" not in acl_worker.output()

    _monitor_cannot_write(acl_redis.client("monitor"))
    _worker_stays_in_its_keys(acl_redis.client("worker"))


def _monitor_cannot_write(monitor: redis.Redis) -> None:
    refusals = [
        lambda: monitor.set("ct:solve:provider_limit", 1),
        lambda: monitor.zadd("ct:solve:waiting", {"x": 1}),
        lambda: monitor.delete("ct:heartbeat:acl@127.0.0.1"),
        lambda: monitor.lpush("celery", "{}"),
        lambda: monitor.publish("/0.celery.pidbox", "{}"),  # remote control: shutdown, ...
        lambda: monitor.evalsha("0" * 40, 0),
        lambda: monitor.get("celery-task-meta-x"),  # results hold tokens
        lambda: monitor.hgetall("ct:cookies:example.com"),  # the sites' sessions
        lambda: monitor.hgetall("ct:job:x"),  # page tasks' arguments
        lambda: monitor.flushall(),
    ]
    for refusal in refusals:
        with pytest.raises(redis.exceptions.NoPermissionError):
            refusal()
    assert monitor.zcard("ct:solve:waiting") == 0  # reads do work


def _worker_stays_in_its_keys(worker: redis.Redis) -> None:
    for refusal in (
        lambda: worker.set("someone-else:key", 1),
        lambda: worker.flushall(),
        lambda: worker.config_get("*"),
        lambda: worker.keys("*"),
        lambda: worker.publish("some-channel", "x"),
    ):
        with pytest.raises(redis.exceptions.NoPermissionError):
            refusal()
