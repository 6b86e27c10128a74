"""deploy/ is correct by construction: no Docker engine or cluster runs here, so these
tests parse the Dockerfile, the compose file, the Kubernetes manifests, the systemd
units and the env templates, and check them against each other and against the code:

- every variable they set is in the documented contract (the ``variable`` tables of the
  settings reference and the site's pages) or a
  known Celery / Flower / Python one (Flower stops on an unknown ``FLOWER_*``);
- stop grace periods cover the drain (reCAPTCHA v2 ceiling, 120 s) and
  ``worker_soft_shutdown_timeout`` plus a margin;
- the commands they run exist (the Celery app, its subcommands and options,
  ``captcha-tasks check`` and its options);
- Flower always has basic auth, Redis never evicts and keeps an AOF, secrets are only
  placeholders or references, probes run the check, KEDA watches the ``celery`` list.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[3]
DEPLOY = ROOT / "deploy"
K8S = DEPLOY / "k8s"
SYSTEMD = DEPLOY / "systemd"

#: Seed 003: the drain ceiling of a reCAPTCHA v2 fleet (its solves take up to 60 s).
DRAIN_CEILING_SECONDS = 120
#: What a grace period must leave on top of the drain (exit, AOF flush, slow probes).
MARGIN_SECONDS = 30

#: Variables that are not ours but that the deploy files may set.
CELERY_VARIABLES = {"REMAP_SIGTERM"}
PYTHON_VARIABLES = {
    "PYTHONUNBUFFERED",
    "PYTHONDONTWRITEBYTECODE",
    "PIP_NO_CACHE_DIR",
    "PIP_DISABLE_PIP_VERSION_CHECK",
}
#: The Redis containers' only variables (read by their command line, from a secret): the
#: administrator's password, and the ACL users' (deploy/redis-acl.sh, compose only).
REDIS_VARIABLES = {"REDIS_PASSWORD", "REDIS_WORKER_PASSWORD", "REDIS_MONITOR_PASSWORD"}
#: Compose interpolation for the monitoring profile's Grafana (not a process of ours).
GRAFANA_VARIABLES = {"GRAFANA_ADMIN_PASSWORD"}
#: Variables whose values are secrets: only placeholders or references in deploy/.
SECRET_VARIABLES = {
    "CAPTCHAAI_API_KEY",
    "CAPTCHA_TASKS_API_KEY",
    "FLOWER_BASIC_AUTH",
    "REDIS_PASSWORD",
    "REDIS_WORKER_PASSWORD",
    "REDIS_MONITOR_PASSWORD",
    "GRAFANA_ADMIN_PASSWORD",
    "GF_SECURITY_ADMIN_PASSWORD",
    "CAPTCHA_TASKS_REDIS_URL",
    "CAPTCHA_TASKS_BROKER_URL",
    "CAPTCHA_TASKS_RESULT_BACKEND",
    "CAPTCHA_TASKS_STATE_URL",
}
#: A placeholder (``<...>``), an environment reference (``${X}``, ``$(X)``, ``$X``),
#: or redis.conf's commented example password.
PLACEHOLDER = re.compile(r"<[^<>\s]+>|\$\{[^}]+\}|\$\([A-Z_]+\)|\$[A-Z_]+|change-me")


# --------------------------------------------------------------------------- helpers


def _yaml_docs(path: Path) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


def _k8s_docs() -> list[dict[str, Any]]:
    return [doc for path in sorted(K8S.glob("*.yaml")) for doc in _yaml_docs(path)]


def _k8s(kind: str, name: str) -> dict[str, Any]:
    found = [d for d in _k8s_docs() if d.get("kind") == kind and d["metadata"].get("name") == name]
    assert len(found) == 1, f"expected one {kind} {name} in deploy/k8s, found {len(found)}"
    return found[0]


def _compose() -> dict[str, Any]:
    data = yaml.safe_load((DEPLOY / "docker-compose.yml").read_text())
    assert isinstance(data, dict)
    return data


def _compose_env(service: dict[str, Any]) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.split("=", 1) for item in env)
    return {str(k): str(v) for k, v in env.items()}


def _env_file(path: Path) -> dict[str, str]:
    values = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            name, sep, value = line.partition("=")
            assert sep, f"{path.name}: not NAME=VALUE: {line!r}"
            values[name.strip()] = value.strip()
    return values


def _env_templates() -> list[Path]:
    return sorted(
        {*DEPLOY.glob("*.env.example"), DEPLOY / ".env.example", *SYSTEMD.glob("*.example")}
    )


def _dockerfile() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    text = re.sub(r"\\\n", " ", (DEPLOY / "Dockerfile").read_text())
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def _dockerfile_final_stage() -> list[tuple[str, str]]:
    lines = _dockerfile()
    last_from = max(i for i, (word, _) in enumerate(lines) if word == "FROM")
    return lines[last_from:]


def _dockerfile_env() -> dict[str, str]:
    env = {}
    for word, rest in _dockerfile_final_stage():
        if word == "ENV":
            for item in shlex.split(rest):
                name, _, value = item.partition("=")
                env[name] = value
    return env


def _dockerfile_json(word: str) -> list[str]:
    import json

    (rest,) = [rest for w, rest in _dockerfile_final_stage() if w == word]
    if word == "HEALTHCHECK":
        rest = rest[rest.index("CMD") + len("CMD") :].strip()
    value = json.loads(rest)
    assert isinstance(value, list), f"{word} must be in exec (JSON) form"
    return [str(v) for v in value]


def _unit(path: Path) -> dict[str, list[str]]:
    """systemd unit: key -> values (keys repeat), sections flattened."""
    values: dict[str, list[str]] = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith(("#", ";", "[")):
            continue
        key, sep, value = line.partition("=")
        assert sep, f"{path.name}: not Key=Value: {line!r}"
        values.setdefault(key.strip(), []).append(value.strip())
    return values


def _unit_one(unit: dict[str, list[str]], key: str) -> str:
    assert key in unit, f"missing {key}="
    assert len(unit[key]) == 1, f"{key}= set more than once"
    return unit[key][0]


def _seconds(value: str | int) -> float:
    """``180``, ``3m``, ``2m30s``, ``3min``, ``1h`` (compose and systemd durations)."""
    if isinstance(value, int):
        return float(value)
    text = value.strip().replace(" ", "")
    if re.fullmatch(r"\d+(\.\d+)?", text):
        return float(text)
    units = {"h": 3600, "min": 60, "m": 60, "s": 1, "ms": 0.001}
    total, pos = 0.0, 0
    for match in re.finditer(r"(\d+(?:\.\d+)?)(ms|min|h|m|s)", text):
        assert match.start() == pos, f"unparsable duration {value!r}"
        total += float(match.group(1)) * units[match.group(2)]
        pos = match.end()
    assert pos == len(text) and pos, f"unparsable duration {value!r}"
    return total


def _containers() -> Iterator[tuple[str, dict[str, Any], dict[str, Any]]]:
    """(workload name, pod spec, container) of every workload in deploy/k8s."""
    for doc in _k8s_docs():
        if doc.get("kind") in ("Deployment", "StatefulSet"):
            spec = doc["spec"]["template"]["spec"]
            for container in spec["containers"]:
                yield doc["metadata"]["name"], spec, container


def _is_app(command: list[str]) -> bool:
    return command[:3] == ["celery", "-A", "captcha_tasks"]


def _contract() -> set[str]:
    """Every variable in a documentation table whose first column is ``variable``: the
    settings reference (generated from the code) and the site's pages."""
    from captcha_tasks_dev.settings_reference import render

    pages = [render(), *(path.read_text() for path in sorted((ROOT / "docs").rglob("*.md")))]
    names: set[str] = set()
    in_table = False
    for line in "\n".join(pages).splitlines():
        if line.startswith("|"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if cells[0] == "variable":
                in_table = True
            elif in_table and not set(cells[0]) <= set("-: "):
                names.update(re.findall(r"`([A-Z][A-Z0-9_]+)`", cells[0]))
        else:
            in_table = False
    return names


def _flower_variables() -> set[str]:
    from flower.options import options

    return {"FLOWER_" + name.replace("-", "_").upper() for name in options._options}


def _soft_shutdown_timeout() -> float:
    from captcha_tasks import app

    return float(app.conf.worker_soft_shutdown_timeout or 0)


def _check_command() -> click.Command:
    from captcha_tasks.cli.main import main

    command = main.commands.get("check")
    if command is None:
        pytest.skip(
            "`captcha-tasks check` is not in the CLI yet (captcha_tasks/fleet, in progress): "
            "the probes in deploy/ cannot be checked against it"
        )
    return command


# ----------------------------------------------------------------- the env contract


def test_readme_contract_is_parsed() -> None:
    names = _contract()
    assert {"CAPTCHAAI_API_KEY", "CAPTCHA_TASKS_REDIS_URL", "CAPTCHA_TASKS_THREADS"} <= names
    assert {"CAPTCHA_TASKS_PROVIDER", "CAPTCHA_TASKS_API_KEY"} <= names
    assert "CAPTCHA_TASKS_METRICS_PORT" in names  # the Prometheus table


def _app_variables() -> dict[str, set[str]]:
    """Variable names each deploy file sets for processes that run our code."""
    found: dict[str, set[str]] = {}
    found["Dockerfile"] = set(_dockerfile_env())
    compose = _compose()
    for name, service in compose["services"].items():
        image = str(service.get("image", ""))
        if name != "redis" and image and not image.startswith(("prom/", "grafana/")):
            found[f"docker-compose.yml:{name}"] = set(_compose_env(service))
    for name, _spec, container in _containers():
        if _is_app(container.get("command", [])):
            found[f"k8s:{name}"] = {e["name"] for e in container.get("env", [])}
    settings = _k8s("ConfigMap", "captcha-tasks-settings")
    found["k8s:configmap"] = set(settings["data"])
    secret = _k8s("Secret", "captcha-tasks")
    found["k8s:secret"] = set(secret["stringData"]) - REDIS_VARIABLES
    for unit in SYSTEMD.glob("*.service"):
        found[unit.name] = {v.split("=", 1)[0] for v in _unit(unit).get("Environment", [])}
    for template in _env_templates():
        names = set(_env_file(template))
        if template.name == ".env.example":  # compose interpolation, not a process env
            names -= REDIS_VARIABLES | GRAFANA_VARIABLES
        found[template.name] = names
    return found


def test_every_variable_set_is_in_the_contract_or_known() -> None:
    known = _contract() | CELERY_VARIABLES | PYTHON_VARIABLES | _flower_variables()
    for where, names in _app_variables().items():
        unknown = names - known
        assert not unknown, f"{where} sets variables outside the documented contract: {unknown}"


def _worker_settings() -> dict[str, dict[str, str]]:
    """What each way of running a worker gives it: provider and key settings included
    (Kubernetes: its ConfigMap plus the env it maps from the Secret)."""
    worker = _k8s("Deployment", "captcha-worker")
    (container,) = worker["spec"]["template"]["spec"]["containers"]
    k8s = dict(_k8s("ConfigMap", "captcha-tasks-settings")["data"])
    secret = _k8s("Secret", "captcha-tasks")["stringData"]
    for env in container["env"]:
        ref = env.get("valueFrom", {}).get("secretKeyRef")
        k8s[env["name"]] = secret[ref["key"]] if ref else str(env.get("value", ""))
    return {
        "k8s": k8s,
        "systemd/env.example": _env_file(SYSTEMD / "env.example"),
        "captcha-tasks.env.example": _env_file(DEPLOY / "captcha-tasks.env.example"),
    }


def test_workers_are_told_their_provider_and_its_key_by_the_new_names() -> None:
    from captcha_tasks.settings import PROTOCOLS, Settings
    from captcha_tasks_sandbox import DEV_API_KEY

    for where, env in _worker_settings().items():
        assert env.get("CAPTCHA_TASKS_PROVIDER") in PROTOCOLS, where
        assert PLACEHOLDER.search(env.get("CAPTCHA_TASKS_API_KEY", "")), where
        # The old name still works, but the templates teach the new one only.
        assert "CAPTCHAAI_API_KEY" not in env, where
        # With a real key in place of the placeholder, the settings read as they stand.
        real = {k: v for k, v in env.items() if not PLACEHOLDER.search(v)}
        settings = Settings.from_env({**real, "CAPTCHA_TASKS_API_KEY": DEV_API_KEY})
        assert settings.provider_config().protocol == env["CAPTCHA_TASKS_PROVIDER"], where
        assert settings.provider_config().api_key == DEV_API_KEY, where


def test_redis_containers_get_only_their_password() -> None:
    assert set(_compose_env(_compose()["services"]["redis"])) <= REDIS_VARIABLES
    for _name, _spec, container in _containers():
        if container["image"].startswith("redis:"):
            assert {e["name"] for e in container.get("env", [])} <= REDIS_VARIABLES


def test_flower_variables_are_flower_options() -> None:
    # Flower turns every FLOWER_* variable into an option and stops on unknown ones.
    flower = _flower_variables()
    assert "FLOWER_BASIC_AUTH" in flower
    assert "FLOWER_UNAUTHENTICATED_API" not in flower
    for where, names in _app_variables().items():
        stray = {n for n in names if n.startswith("FLOWER_")} - flower
        assert not stray, f"{where}: {stray} are not Flower options"


# ------------------------------------------------------------ shutdown and draining


def test_soft_shutdown_is_configured_for_remap_sigterm() -> None:
    # REMAP_SIGTERM=SIGQUIT with worker_soft_shutdown_timeout 0 is a cold shutdown.
    assert _dockerfile_env()["REMAP_SIGTERM"] == "SIGQUIT"
    _check_command()  # the fleet change (soft shutdown + probe) has landed
    assert _soft_shutdown_timeout() > 0, "REMAP_SIGTERM=SIGQUIT needs a soft shutdown timeout"


def _pre_stop() -> str:
    worker = _k8s("Deployment", "captcha-worker")
    (container,) = worker["spec"]["template"]["spec"]["containers"]
    command = container["lifecycle"]["preStop"]["exec"]["command"]
    assert command[:2] == ["sh", "-c"]
    return str(command[2])


def _pre_stop_drain_seconds() -> int:
    match = re.search(r"^\s*DRAIN_TIMEOUT=(\d+)\s*$", _pre_stop(), re.MULTILINE)
    assert match, "preStop must bound its wait with DRAIN_TIMEOUT=<seconds>"
    return int(match.group(1))


def test_k8s_pre_stop_drains_this_worker_within_the_drain_timeout() -> None:
    from captcha_tasks import app

    script = _pre_stop()
    drain = _pre_stop_drain_seconds()
    assert drain >= DRAIN_CEILING_SECONDS
    assert 'node="celery@$HOSTNAME"' in script
    queue = app.conf.task_default_queue
    assert f'control cancel_consumer {queue} -d "$node"' in script
    assert "deadline=$(( $(date +%s) + DRAIN_TIMEOUT ))" in script
    assert re.search(r'while \[ "\$\(date \+%s\)" -lt "\$deadline" \]', script)
    # The only sleep is inside the bounded loop, and short.
    assert re.findall(r"\bsleep (\d+)", script) == ["5"]


def test_k8s_grace_covers_pre_stop_and_soft_shutdown() -> None:
    worker = _k8s("Deployment", "captcha-worker")
    grace = worker["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
    # The grace period runs from the start of preStop; SIGTERM comes after it.
    needed = _pre_stop_drain_seconds() + _soft_shutdown_timeout() + MARGIN_SECONDS
    assert grace >= needed, f"terminationGracePeriodSeconds {grace} < {needed}"


def test_compose_grace_covers_the_drain() -> None:
    worker = _compose()["services"]["worker"]
    grace = _seconds(worker["stop_grace_period"])
    needed = max(DRAIN_CEILING_SECONDS, _soft_shutdown_timeout()) + MARGIN_SECONDS
    assert grace >= needed, f"stop_grace_period {grace} s < {needed} s"
    assert worker.get("stop_signal", "SIGTERM") == "SIGTERM"
    assert _compose_env(worker)["REMAP_SIGTERM"] == "SIGQUIT"


def test_systemd_worker_stops_softly_within_its_timeout() -> None:
    unit = _unit(SYSTEMD / "captcha-worker@.service")
    timeout = _seconds(_unit_one(unit, "TimeoutStopSec"))
    needed = max(DRAIN_CEILING_SECONDS, _soft_shutdown_timeout()) + MARGIN_SECONDS
    assert timeout >= needed, f"TimeoutStopSec {timeout} s < {needed} s"
    assert _unit_one(unit, "KillSignal") == "SIGTERM"
    # SIGTERM to the main process only: it manages its pool's children.
    assert _unit_one(unit, "KillMode") == "mixed"
    assert "REMAP_SIGTERM=SIGQUIT" in unit["Environment"]
    assert _unit_one(unit, "EnvironmentFile") == "/etc/captcha-tasks/env"
    assert _unit_one(unit, "Restart") == "on-failure"
    for key, value in {
        "NoNewPrivileges": "yes",
        "PrivateTmp": "yes",
        "ProtectSystem": "strict",
        "ProtectHome": "yes",
        "CapabilityBoundingSet": "",
    }.items():
        assert _unit_one(unit, key) == value, f"{key}={value} expected"
    assert _unit_one(unit, "User") not in ("root", "0")


def test_dockerfile_stops_softly_as_a_non_root_user() -> None:
    stage = _dockerfile_final_stage()
    assert stage[0] == ("FROM", "python:3.11-slim")
    (stop,) = [rest for word, rest in stage if word == "STOPSIGNAL"]
    assert stop == "SIGTERM"
    (user,) = [rest for word, rest in stage if word == "USER"]
    assert user.split(":")[0] not in ("root", "0")
    # Numeric, so Kubernetes can verify runAsNonRoot, and the same uid as the pods'.
    assert user.split(":")[0].isdigit()
    for _name, spec, container in _containers():
        if _is_app(container.get("command", [])):
            assert spec["securityContext"]["runAsUser"] == int(user.split(":")[0])
            assert spec["securityContext"]["runAsNonRoot"] is True


def test_dockerfile_copies_what_the_build_needs() -> None:
    # pyproject.toml by regex: tomllib is 3.11+, the project supports 3.10.
    pyproject = (ROOT / "pyproject.toml").read_text()
    readme = re.search(r'^readme = "([^"]+)"$', pyproject, re.MULTILINE)
    assert readme
    # The app's configuration is inside the package: no top-level module is installed.
    assert "py-modules" not in pyproject
    copied: set[str] = set()
    for word, rest in _dockerfile():
        if word == "COPY" and not rest.startswith("--from"):
            copied.update(rest.split()[:-1])
    needed = {
        readme.group(1),
        "pyproject.toml",
        "captcha_tasks",
    }
    assert needed <= copied
    for name in copied:
        assert (ROOT / name).exists(), f"COPY {name}: not in the repository"
    ignore = (DEPLOY / "Dockerfile.dockerignore").read_text().splitlines()
    for name in needed:
        assert f"!{name}" in ignore or f"!{name}/" in ignore, f"{name} excluded from the context"


# ------------------------------------------------------------ the commands they run


def _celery_commands() -> Iterator[tuple[str, list[str]]]:
    yield "Dockerfile CMD", _dockerfile_json("CMD")
    for name, service in _compose()["services"].items():
        if isinstance(service.get("command"), list) and service["command"][0] == "celery":
            yield f"compose:{name}", service["command"]
    for name, _spec, container in _containers():
        if _is_app(container.get("command", [])):
            yield f"k8s:{name}", container["command"]
    for unit in SYSTEMD.glob("*.service"):
        argv = shlex.split(_unit_one(_unit(unit), "ExecStart"))
        assert argv[0].endswith("/bin/celery"), f"{unit.name}: runs {argv[0]}"
        yield unit.name, ["celery", *argv[1:]]


def test_the_app_is_found_by_celery_a() -> None:
    from celery import Celery
    from celery.app.utils import find_app

    assert isinstance(find_app("captcha_tasks"), Celery)
    commands = list(_celery_commands())
    assert len(commands) >= 6
    for where, argv in commands:
        assert argv[:3] == ["celery", "-A", "captcha_tasks"], where


def test_worker_command_lines_parse() -> None:
    from celery.bin.base import CLIContext
    from celery.bin.celery import celery as celery_cli
    from celery.bin.worker import worker

    from captcha_tasks import app

    obj = CLIContext(app=app, no_color=True, workdir=None, quiet=True)
    workers = [(w, a) for w, a in _celery_commands() if a[3] == "worker"]
    assert {w for w, _ in workers} >= {"Dockerfile CMD", "k8s:captcha-worker"}
    for where, argv in workers:
        args = [a.replace("%%", "%").replace("%i", "1") for a in argv[4:]]  # systemd
        try:
            ctx = worker.make_context("worker", args, parent=click.Context(celery_cli, obj=obj))
        except click.UsageError as exc:
            pytest.fail(f"{where}: celery worker {' '.join(argv[4:])}: {exc}")
        assert ctx.params["hostname"], where


def test_worker_names_match_the_probes() -> None:
    # The probes and preStop name the worker celery@$HOSTNAME; the worker names itself
    # celery@%h, Celery's expansion of the same host name.
    assert _dockerfile_json("CMD")[4:6] == ["-n", "celery@%h"]
    worker = _k8s("Deployment", "captcha-worker")
    (container,) = worker["spec"]["template"]["spec"]["containers"]
    command = container["command"]
    assert command[command.index("-n") + 1] == "celery@%h"
    exec_start = _unit_one(_unit(SYSTEMD / "captcha-worker@.service"), "ExecStart")
    # %i: systemd's instance; %%h reaches Celery as %h.
    assert "-n worker%i@%%h" in exec_start


def test_flower_command_lines_name_known_options() -> None:
    from importlib.metadata import entry_points

    from flower.options import options

    assert "flower" in {e.name for e in entry_points(group="celery.commands")}
    flowers = [(w, a) for w, a in _celery_commands() if a[3] == "flower"]
    assert {w for w, _ in flowers} == {
        "compose:flower",
        "k8s:captcha-flower",
        "captcha-flower.service",
    }
    for where, argv in flowers:
        for arg in argv[4:]:
            name = arg.removeprefix("--").split("=", 1)[0]
            assert name in options._options or name.replace("_", "-") in options._options, (
                f"{where}: {arg}"
            )
            assert name not in ("basic_auth", "basic-auth"), f"{where}: password on argv"


def test_remote_control_commands_exist() -> None:
    from celery.worker.control import Panel

    assert "cancel_consumer" in Panel.data
    assert "active" in Panel.data
    assert "celery -A captcha_tasks control cancel_consumer" in _pre_stop()
    assert "celery -A captcha_tasks inspect active" in _pre_stop()


def _probe_commands() -> Iterator[tuple[str, list[str]]]:
    yield "Dockerfile HEALTHCHECK", _dockerfile_json("HEALTHCHECK")
    worker = _k8s("Deployment", "captcha-worker")
    (container,) = worker["spec"]["template"]["spec"]["containers"]
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert probe in container, f"worker has no {probe}"
        yield f"k8s {probe}", container[probe]["exec"]["command"]


def test_probes_run_captcha_tasks_check() -> None:
    check = _check_command()
    for where, command in _probe_commands():
        assert command[:2] == ["sh", "-c"], where
        argv = shlex.split(command[2])
        assert argv[:3] == ["exec", "captcha-tasks", "check"], where
        try:
            ctx = check.make_context("check", argv[3:])
        except click.UsageError as exc:
            pytest.fail(f"{where}: captcha-tasks {' '.join(argv[2:])}: {exc}")
        assert ctx.params["worker"] == "celery@$HOSTNAME", where


# ------------------------------------------------------------------------- Flower


def test_flower_always_requires_basic_auth() -> None:
    compose_flower = _compose()["services"]["flower"]
    value = _compose_env(compose_flower)["FLOWER_BASIC_AUTH"]
    assert re.fullmatch(r"\$\{FLOWER_BASIC_AUTH:\?[^}]+\}", value), "compose: must be required"
    # Loopback of the host only.
    assert all(str(p).startswith("127.0.0.1:") for p in compose_flower["ports"])

    deployment = _k8s("Deployment", "captcha-flower")
    spec = deployment["spec"]["template"]["spec"]
    (container,) = spec["containers"]
    env = {e["name"]: e for e in container["env"]}
    ref = env["FLOWER_BASIC_AUTH"]["valueFrom"]["secretKeyRef"]
    assert ref == {"name": "captcha-tasks", "key": "FLOWER_BASIC_AUTH"}
    assert spec["enableServiceLinks"] is False  # FLOWER_PORT=tcp://... would crash it
    service = _k8s("Service", "captcha-flower")
    assert service["spec"].get("type", "ClusterIP") == "ClusterIP"
    for doc in _k8s_docs():
        if doc["kind"] == "Service":
            assert not doc["metadata"]["name"].upper().replace("-", "_").startswith("FLOWER")

    unit = _unit(SYSTEMD / "captcha-flower.service")
    env_file = _unit_one(unit, "EnvironmentFile")
    assert env_file == "/etc/captcha-tasks/flower.env"
    assert "FLOWER_BASIC_AUTH" in _env_file(SYSTEMD / "flower.env.example")
    (guard,) = unit["ExecStartPre"]
    assert "$${FLOWER_BASIC_AUTH}" in guard and "exit 1" in guard
    assert "--address=127.0.0.1" in _unit_one(unit, "ExecStart")


def test_flower_api_is_never_opened_without_auth() -> None:
    for path in sorted(DEPLOY.rglob("*")):
        if path.is_file() and path.name != "README.md":
            assert "FLOWER_UNAUTHENTICATED_API" not in path.read_text(), path


# -------------------------------------------------------------------------- Redis


def _redis_directives(text: str) -> dict[str, list[str]]:
    directives: dict[str, list[str]] = {}
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            words = shlex.split(line)
            # Redis has no trailing comments: "noeviction  # ..." fails at start-up.
            assert not any(w.startswith("#") for w in words), f"comment after: {line!r}"
            directives[words[0].lower()] = words[1:]
    return directives


def test_redis_never_evicts_and_keeps_an_aof() -> None:
    conf = _redis_directives((DEPLOY / "redis.conf").read_text())
    assert conf["maxmemory-policy"] == ["noeviction"]
    assert conf["appendonly"] == ["yes"]
    assert conf["appendfsync"] == ["everysec"]


def test_redis_deployments_use_deploy_redis_conf() -> None:
    text = (DEPLOY / "redis.conf").read_text()
    configmap = _k8s("ConfigMap", "captcha-redis-conf")
    assert configmap["data"]["redis.conf"] == text, "k8s copy of redis.conf drifted"

    (statefulset,) = [d for d in _k8s_docs() if d["kind"] == "StatefulSet"]
    (container,) = statefulset["spec"]["template"]["spec"]["containers"]
    args = container["args"]
    assert args[:2] == ["redis-server", "/etc/redis/redis.conf"]
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in statefulset["spec"]["template"]["spec"]["volumes"]}
    assert volumes[mounts["/etc/redis"]]["configMap"]["name"] == "captcha-redis-conf"
    assert mounts["/data"] in {
        t["metadata"]["name"] for t in statefulset["spec"]["volumeClaimTemplates"]
    }

    redis = _compose()["services"]["redis"]
    command = " ".join(redis["command"])
    assert "redis-server /usr/local/etc/redis/redis.conf" in command
    assert "./redis.conf:/usr/local/etc/redis/redis.conf:ro" in redis["volumes"]
    # Overrides on the command line may not weaken what redis.conf guarantees.
    for line in (command, " ".join(args)):
        for directive in ("maxmemory-policy", "appendonly", "appendfsync", "save"):
            assert f"--{directive}" not in line


# ------------------------------------------------------------------------ secrets


def test_no_secret_is_inlined() -> None:
    credentials = re.compile(r"[a-z]+://[^/\s:@]*:([^@\s/]+)@")
    for path in sorted(DEPLOY.rglob("*")):
        if not path.is_file():
            continue
        text = path.read_text()
        # An API key's shape: 32 letters and digits.
        assert not re.search(r"(?<![A-Za-z0-9_])[A-Za-z0-9]{32}(?![A-Za-z0-9_])", text), path
        for match in credentials.finditer(text):
            assert PLACEHOLDER.fullmatch(match.group(1)), f"{path.name}: {match.group(0)}"
        for match in re.finditer(r"--requirepass(?:\s*\n\s*-)?\s+(\S+)", text):
            assert PLACEHOLDER.search(match.group(1)), f"{path.name}: {match.group(0)}"


def test_env_templates_hold_placeholders_only() -> None:
    templates = _env_templates()
    assert len(templates) == 4
    for template in templates:
        for name, value in _env_file(template).items():
            if name in SECRET_VARIABLES:
                assert PLACEHOLDER.search(value), f"{template.name}: {name} is not a placeholder"


def test_k8s_secret_is_a_template() -> None:
    secret = _k8s("Secret", "captcha-tasks")
    assert "data" not in secret
    for key, value in secret["stringData"].items():
        assert PLACEHOLDER.search(value), f"Secret {key} is not a placeholder"
    kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    assert "secret.template.yaml" not in kustomization["resources"]
    assert "k8s/secret.yaml" in (DEPLOY / ".gitignore").read_text().split()


def test_secrets_come_from_references() -> None:
    secret_keys = set(_k8s("Secret", "captcha-tasks")["stringData"])
    for name, _spec, container in _containers():
        for env in container.get("env", []):
            if env["name"] in SECRET_VARIABLES:
                assert "value" not in env, f"{name}: {env['name']} inlined"
                ref = env["valueFrom"]["secretKeyRef"]
                assert ref["name"] == "captcha-tasks" and ref["key"] in secret_keys
    configmap = _k8s("ConfigMap", "captcha-tasks-settings")
    assert not set(configmap["data"]) & SECRET_VARIABLES

    compose = _compose()
    for name, service in compose["services"].items():
        for key, value in _compose_env(service).items():
            if key in SECRET_VARIABLES:
                assert "${" in value, f"compose {name}: {key} inlined"
        # The API key only ever arrives through the workers' env_file.
        assert not {"CAPTCHAAI_API_KEY", "CAPTCHA_TASKS_API_KEY"} & set(_compose_env(service))
    (env_file,) = compose["services"]["worker"]["env_file"]
    assert env_file["path"] == "${CAPTCHA_TASKS_ENV_FILE:-captcha-tasks.env}"
    assert (DEPLOY / "captcha-tasks.env.example").exists()
    assert "captcha-tasks.env" in (DEPLOY / ".gitignore").read_text().split()
    # Every required ${VAR:?} of the compose file is in the .env template.
    required = set(re.findall(r"\$\{([A-Z_]+):\?", (DEPLOY / "docker-compose.yml").read_text()))
    assert required <= set(_env_file(DEPLOY / ".env.example"))


# ------------------------------------------------------------- Kubernetes specifics


def test_k8s_worker_rolls_one_at_a_time() -> None:
    worker = _k8s("Deployment", "captcha-worker")
    strategy = worker["spec"]["strategy"]
    assert strategy["type"] == "RollingUpdate"
    rolling = strategy["rollingUpdate"]
    assert {"maxUnavailable", "maxSurge"} <= set(rolling)
    assert rolling["maxUnavailable"] in (0, 1) and rolling["maxSurge"] in (0, 1)
    assert rolling["maxUnavailable"] or rolling["maxSurge"]
    (container,) = worker["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e for e in container["env"]}
    assert env["REMAP_SIGTERM"]["value"] == "SIGQUIT"
    refs = {r["configMapRef"]["name"] for r in container["envFrom"]}
    assert refs == {"captcha-tasks-settings"}


def test_keda_scales_the_worker_on_the_celery_list() -> None:
    from captcha_tasks import app

    scaled = _k8s("ScaledObject", "captcha-worker")
    assert scaled["spec"]["scaleTargetRef"]["name"] == "captcha-worker"
    assert scaled["spec"]["minReplicaCount"] >= 1
    (trigger,) = scaled["spec"]["triggers"]
    assert trigger["type"] == "redis"
    assert trigger["metadata"]["listName"] == app.conf.task_default_queue == "celery"
    assert trigger["metadata"]["address"].startswith("captcha-redis.")
    auth = _k8s("TriggerAuthentication", trigger["authenticationRef"]["name"])
    secret_keys = set(_k8s("Secret", "captcha-tasks")["stringData"])
    for ref in auth["spec"]["secretTargetRef"]:
        assert ref["name"] == "captcha-tasks" and ref["key"] in secret_keys


def test_metrics_port_agrees_everywhere() -> None:
    port = _k8s("ConfigMap", "captcha-tasks-settings")["data"]["CAPTCHA_TASKS_METRICS_PORT"]
    worker = _k8s("Deployment", "captcha-worker")["spec"]["template"]
    assert worker["metadata"]["annotations"]["prometheus.io/port"] == port
    (container,) = worker["spec"]["containers"]
    assert [p["containerPort"] for p in container["ports"]] == [int(port)]
    compose_env = _compose_env(_compose()["services"]["worker"])
    assert compose_env["CAPTCHA_TASKS_METRICS_PORT"] == port
    assert compose_env["CAPTCHA_TASKS_METRICS_ADDRESS"] == "0.0.0.0"
    prom = yaml.safe_load((DEPLOY / "prometheus-compose.yml").read_text())
    (job,) = prom["scrape_configs"]
    (sd,) = job["dns_sd_configs"]
    assert sd["names"] == ["worker"] and sd["port"] == int(port)
    exposed = next(rest for word, rest in _dockerfile_final_stage() if word == "EXPOSE")
    assert port in exposed.split()
