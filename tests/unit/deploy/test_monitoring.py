"""The operator's view as deployed (parsed, not run: no Docker here): the Grafana
dashboard's panels and queries, its provisioning, the monitoring profile of the compose
file, and the compose Redis running the ACL users. (tests/integration/
test_dashboard_metrics.py checks every query's metrics against a running worker.)"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml

from tests.support.promql import alert_expressions, dashboard_expressions, metric_names

ROOT = Path(__file__).resolve().parents[3]
DEPLOY = ROOT / "deploy"
GRAFANA = DEPLOY / "grafana"
DASHBOARD = GRAFANA / "dashboards" / "captcha-tasks.json"
#: The issue's panels.
PANELS = {
    "Throughput",
    "In flight vs budget",
    "Queue wait",
    "Latency by type",
    "Errors by code",
    "Spend",
}


def _compose() -> dict[str, Any]:
    data = yaml.safe_load((DEPLOY / "docker-compose.yml").read_text())
    assert isinstance(data, dict)
    return data


def _readme_metrics() -> set[str]:
    """The metric names of the monitoring guide's "Prometheus metrics" table."""
    text = (ROOT / "docs" / "guides" / "monitoring.md").read_text()
    section = text[text.index("## Prometheus metrics") : text.index("## Flower")]
    return set(re.findall(r"^\| `(captcha_tasks_[a-z_]+)` \|", section, re.MULTILINE))


def test_the_dashboard_has_the_panels_on_one_datasource_variable() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    panels = dashboard["panels"]
    assert {p["title"] for p in panels} >= PANELS
    assert len({p["id"] for p in panels}) == len(panels)
    (variable,) = dashboard["templating"]["list"]
    assert (variable["name"], variable["type"], variable["query"]) == (
        "datasource",
        "datasource",
        "prometheus",
    )
    for panel in panels:
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            assert target["datasource"]["uid"] == "${datasource}"
    # Panels do not overlap on the 24-column grid.
    cells: set[tuple[int, int]] = set()
    for panel in panels:
        g = panel["gridPos"]
        assert g["x"] + g["w"] <= 24, panel["title"]
        area = {
            (x, y) for x in range(g["x"], g["x"] + g["w"]) for y in range(g["y"], g["y"] + g["h"])
        }
        assert not area & cells, panel["title"]
        cells |= area


def test_every_query_and_alert_reads_a_documented_metric() -> None:
    documented = _readme_metrics()
    assert (
        "captcha_tasks_solves_total" in documented and "captcha_tasks_workers_alive" in documented
    )
    suffix = re.compile(r"_(bucket|sum|count)$")
    for where, expr in [*dashboard_expressions(), *alert_expressions()]:
        for name in metric_names(expr):
            assert name in documented or suffix.sub("", name) in documented, (where, name)


def test_grafana_is_provisioned_by_the_compose_file() -> None:
    compose = _compose()
    grafana = compose["services"]["grafana"]
    assert grafana["profiles"] == ["monitoring"]
    assert grafana["ports"] == ["127.0.0.1:${GRAFANA_PORT_ON_HOST:-3000}:3000"]
    assert grafana["environment"]["GF_SECURITY_ADMIN_PASSWORD"].startswith(
        "${GRAFANA_ADMIN_PASSWORD:?"
    )
    mounts = dict(
        v.rsplit(":", 1)[0].split(":", 1) for v in grafana["volumes"] if v.startswith("./")
    )
    assert mounts["./grafana/provisioning"] == "/etc/grafana/provisioning"
    for local in mounts:
        assert (DEPLOY / local).is_dir(), local

    provider = yaml.safe_load(
        (GRAFANA / "provisioning" / "dashboards" / "captcha-tasks.yml").read_text()
    )
    (dashboards,) = provider["providers"]
    assert mounts["./grafana/dashboards"] == dashboards["options"]["path"]
    datasources = yaml.safe_load(
        (GRAFANA / "provisioning" / "datasources" / "prometheus.yml").read_text()
    )
    (prometheus,) = datasources["datasources"]
    assert prometheus["type"] == "prometheus" and prometheus["isDefault"]
    # The compose Prometheus, by its service name and its listen port.
    listen = next(a for a in compose["services"]["prometheus"]["command"] if "listen-address" in a)
    assert prometheus["url"] == f"http://prometheus:{listen.rsplit(':', 1)[1]}"
    assert grafana["depends_on"] == ["prometheus"]


def test_compose_redis_runs_the_acl_users_and_workers_log_in_as_worker() -> None:
    compose = _compose()
    redis = compose["services"]["redis"]
    command = " ".join(redis["command"])
    assert (
        "sh /usr/local/etc/redis/redis-acl.sh /usr/local/etc/redis/users.acl /tmp/users.acl"
        in command
    )
    assert "--aclfile /tmp/users.acl" in command and "--requirepass" not in command
    assert "./users.acl:/usr/local/etc/redis/users.acl:ro" in redis["volumes"]
    assert "./redis-acl.sh:/usr/local/etc/redis/redis-acl.sh:ro" in redis["volumes"]
    for name in ("worker", "flower"):
        url = compose["services"][name]["environment"]["CAPTCHA_TASKS_REDIS_URL"]
        assert url.startswith("redis://worker:${REDIS_WORKER_PASSWORD:?"), name
    # The template carries placeholders only, never a hash or a password.
    text = (DEPLOY / "users.acl").read_text()
    placeholders = {f"<{user}-password-sha256>" for user in ("default", "worker", "monitor")}
    assert set(re.findall(r"#(\S+)", text)) == placeholders
