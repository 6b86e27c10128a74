"""deploy/callbacks: the opt-in files that expose the workers' callback receiver agree
with the settings and each other, and never carry the token itself."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from captcha_tasks.settings import _SOURCES

CALLBACKS = Path(__file__).resolve().parents[3] / "deploy" / "callbacks"
VARIABLES = {variable for variable, _ in _SOURCES.values()} | {"CAPTCHA_TASKS_CALLBACK_TOKEN_FILE"}


def _yaml(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((CALLBACKS / name).read_text()) if d]


def _worker_patch() -> dict[str, Any]:
    (doc,) = _yaml("k8s-worker-patch.yaml")
    (container,) = doc["spec"]["template"]["spec"]["containers"]
    return dict(container)


def test_every_variable_is_a_setting_and_the_token_is_never_inlined() -> None:
    for path in CALLBACKS.iterdir():
        text = path.read_text()
        for name in re.findall(r"CAPTCHA_TASKS_[A-Z_]+", text):
            assert name in VARIABLES, f"{path.name}: {name} is no setting"
        assert not re.search(r"CAPTCHA_TASKS_CALLBACK_TOKEN\s*[=:]", text), path.name


def test_the_callback_port_agrees_everywhere() -> None:
    container = _worker_patch()
    env = {e["name"]: e["value"] for e in container["env"]}
    (port,) = [p for p in container["ports"] if p["name"] == "callbacks"]
    assert int(env["CAPTCHA_TASKS_CALLBACK_PORT"]) == port["containerPort"]
    service = next(d for d in _yaml("k8s-callbacks.yaml") if d["kind"] == "Service")
    assert service["spec"]["ports"][0]["targetPort"] == "callbacks"
    assert service["spec"]["selector"]["app.kubernetes.io/component"] == "worker"
    compose = _yaml("docker-compose.callbacks.yml")[0]["services"]
    port_env = compose["worker"]["environment"]["CAPTCHA_TASKS_CALLBACK_PORT"]
    assert f"worker:{port_env}" in compose["callbacks-proxy"]["command"]


def test_the_ingress_forwards_the_callback_path_of_the_url() -> None:
    ingress = next(d for d in _yaml("k8s-callbacks.yaml") if d["kind"] == "Ingress")
    (rule,) = ingress["spec"]["rules"]
    (path,) = rule["http"]["paths"]
    env = {e["name"]: e["value"] for e in _worker_patch()["env"]}
    assert env["CAPTCHA_TASKS_CALLBACK_URL"] == f"https://{rule['host']}{path['path'].rstrip('/')}"


def test_the_token_is_read_from_a_file_everywhere() -> None:
    env = {e["name"]: e["value"] for e in _worker_patch()["env"]}
    mounts = _worker_patch()["volumeMounts"]
    assert any(env["CAPTCHA_TASKS_CALLBACK_TOKEN_FILE"].startswith(m["mountPath"]) for m in mounts)
    unit = (CALLBACKS / "captcha-worker-callbacks.conf").read_text()
    assert "LoadCredential=callback_token:" in unit
    assert "CAPTCHA_TASKS_CALLBACK_TOKEN_FILE=%d/callback_token" in unit
