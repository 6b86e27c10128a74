"""The Redis ACL users (captcha_tasks/state/acl.py) cannot drift from the code: the
committed deploy/users.acl is what is generated, every key of keys.py is a decision
for the monitor, every redis-py call of the package and every command of kombu's and
redis-py's scripts is granted, kombu's and Celery's key names are theirs, and Redis's
own command table says the monitor only reads. (tests/integration/test_redis_acl.py
runs a worker, a solve and status under them.)"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

import pytest
import redis
from click.testing import CliRunner, Result

from captcha_tasks.cli.acl import acl_command
from captcha_tasks.settings import get_settings
from captcha_tasks.state import acl
from captcha_tasks.state.keys import Keys
from captcha_tasks_dev.redis_server import RedisServer

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "captcha_tasks"
USERS_ACL = ROOT / "deploy" / "users.acl"

#: redis-py client methods that are not one command of their own.
NOT_COMMANDS = {"close", "from_url", "pipeline", "pubsub", "execute", "__enter__", "__exit__"}
#: redis-py method -> the command it sends.
ALIASES = {
    "delete": "del",
    "scan_iter": "scan",
    "register_script": "evalsha",
    "script_load": "script|load",
}


def test_the_committed_acl_file_is_the_generated_one() -> None:
    assert USERS_ACL.read_text() == acl.render(), (
        "deploy/users.acl is stale: regenerate it with `captcha-tasks acl > deploy/users.acl`"
    )


def _invoke(args: list[str], env: dict[str, str]) -> Result:
    get_settings.cache_clear()  # the command reads the settings of this environment
    try:
        return CliRunner().invoke(acl_command, args, env=env)
    finally:
        get_settings.cache_clear()


def test_the_cli_prints_the_file_and_hashes_passwords(tmp_path: Path) -> None:
    env = {"CAPTCHA_TASKS_KEY_PREFIX": "ct:", "CAPTCHA_TASKS_REDIS_URL": "redis://h:6379/0"}
    out = _invoke([], env)
    assert out.exit_code == 0, out.output
    assert out.output == USERS_ACL.read_text()

    secret = tmp_path / "worker.pw"
    secret.write_text("s3cret-worker\n")
    env["CAPTCHA_TASKS_REDIS_URL"] = "redis://h:6379/3"
    out = _invoke(["--password-file", f"worker={secret}"], env)
    assert out.exit_code == 0, out.output
    worker = next(line for line in out.output.splitlines() if line.startswith("user worker"))
    assert "s3cret" not in out.output and "#<worker-password-sha256>" not in worker
    assert acl.worker_user().rule("s3cret-worker").split()[4] == worker.split()[4]
    assert "&/3.celeryev/*" in worker  # kombu's channels carry the broker's database
    bad = _invoke(["--password-file", "root=/etc/passwd"], env)
    assert bad.exit_code == 2 and "USER=PATH" in bad.output


def test_every_key_is_read_by_the_monitor_or_kept_from_it_with_a_reason() -> None:
    members = set(acl.keys_members())
    assert {"job", "waiting", "heartbeat_prefix", "spend"} <= members
    reads, excluded = set(acl.MONITOR_READS), set(acl.MONITOR_EXCLUDED)
    assert not reads & excluded
    assert members == reads | excluded, (
        f"classify {members - reads - excluded} in MONITOR_READS or MONITOR_EXCLUDED"
    )
    patterns = acl.monitor_user().keys
    assert "ct:heartbeat:*" in patterns and "ct:solve:budget:*" in patterns
    assert not any(p.startswith(("ct:job", "ct:cookies")) for p in patterns)


def test_a_different_prefix_moves_every_product_key() -> None:
    assert acl.worker_user("app1:").keys[0] == "app1:*"
    assert (
        all(not p.startswith("ct:") for p in acl.monitor_user("app1:").keys)
        and "app1:solve:waiting" in acl.monitor_user("app1:").keys
    )


def test_the_scripts_commands_are_parsed_and_granted() -> None:
    lua = acl.lua_commands()
    assert {"zadd", "hset", "publish", "time", "zremrangebyscore"} <= lua
    assert {"get", "del", "pexpire", "pttl"} == acl.lock_commands()
    worker = set(acl.worker_user().commands)
    assert lua | acl.lock_commands() <= worker
    text = (PACKAGE / "state" / "lua" / "store_result.lua").read_text()
    assert acl.script_commands([text]) == {"get", "set", "publish"}


def test_kombus_and_celerys_own_scripts_and_names_are_granted() -> None:
    from celery.backends.base import KeyValueStoreBackend
    from kombu.transport import redis as kombu_redis

    scripts = acl.script_commands([kombu_redis.REFRESH_BINDING, kombu_redis.SWEEP_BINDINGS])
    assert scripts <= set(acl.KOMBU_COMMANDS)
    channel = kombu_redis.Channel
    names = [
        channel.keyprefix_queue % "*",
        channel.keyprefix_binding_permanent % "*",
        channel.keyprefix_binding_deadlines,
        channel.unacked_key,
        channel.unacked_index_key,
        channel.unacked_mutex_key,
    ]
    assert names == list(acl.KOMBU_KEYS)
    assert channel.keyprefix_fanout == "/{db}."
    assert kombu_redis.PRIORITY_STEPS == [0, 3, 6, 9] and channel.sep == "\x06\x16"
    backend = KeyValueStoreBackend
    prefixes = (backend.task_keyprefix, backend.group_keyprefix, backend.chord_keyprefix)
    assert [f"{p}*" for p in prefixes] == list(acl.BACKEND_KEYS)


def test_celerys_queue_and_channel_names_are_those_granted() -> None:
    from captcha_tasks.worker.app import app

    assert app.conf.event_exchange == "celeryev" and app.conf.event_queue_prefix == "celeryev"
    assert app.control.mailbox.namespace == "celery"  # celery.pidbox, <uuid>.reply.celery.pidbox
    assert app.conf.worker_direct and app.conf.task_default_queue == "celery"
    from celery.utils.nodenames import worker_direct

    assert worker_direct("w@h").name == "w@h.dq2"


def _redis_calls() -> dict[str, set[str]]:
    """Commands the package's redis-py calls send (receivers named like a client)."""
    found: dict[str, set[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            name, receiver = node.func.attr, ast.unparse(node.func.value)
            if name in NOT_COMMANDS or not callable(getattr(redis.Redis, name, None)):
                continue
            if re.search(r"redis|client|pipe|conn|batch", receiver, re.IGNORECASE):
                command = ALIASES.get(name, name)
                found.setdefault(command, set()).add(str(path.relative_to(ROOT)))
    return found


def test_every_redis_call_of_the_package_is_granted_to_the_worker() -> None:
    calls = _redis_calls()
    assert {"blpop", "zadd", "scan", "hgetall"} <= set(calls)
    granted = acl.worker_user().commands
    missing = {c: sorted(where) for c, where in calls.items() if c not in granted}
    assert not missing, f"add to state/acl.py's PYTHON_COMMANDS (and check the monitor): {missing}"
    assert set(acl.PYTHON_COMMANDS) <= set(calls) | {"zrange", "pexpire"}


@pytest.fixture(scope="module")
def command_table(redis_server: RedisServer) -> dict[str, dict[str, Any]]:
    """Redis's own table: each command's flags and ACL categories."""
    with redis_server.client() as client:
        return {str(name): info for name, info in client.command().items()}


def test_the_monitor_only_reads_and_nobody_gets_a_dangerous_command(
    command_table: dict[str, dict[str, Any]],
) -> None:
    for user in (acl.worker_user(), acl.monitor_user()):
        for command in user.commands:
            base = command.split("|")[0]
            assert base in command_table, f"{user.name}: {command} is not a Redis command"
            categories = command_table[base]["acl_categories"]
            assert "@dangerous" not in categories, f"{user.name}: {command} is @dangerous"
    for command in acl.monitor_user().commands:
        assert "write" not in command_table[command]["flags"], command
    assert not {"publish", "evalsha", "script|load"} & set(acl.monitor_user().commands)


def test_a_rule_hashes_its_password_and_refuses_to_load_without_one() -> None:
    user = acl.AclUser("x", ("get",), ("k:*",), ("c",))
    assert user.rule() == "user x reset on #<x-password-sha256> ~k:* resetchannels &c -@all +get"
    hashed = user.rule("pw").split()[4]
    assert re.fullmatch(r"#[0-9a-f]{64}", hashed)
    assert Keys("ct:").heartbeat("*") in acl.monitor_user().keys
