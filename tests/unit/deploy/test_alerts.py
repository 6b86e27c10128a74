"""deploy/prometheus/alerts.yml: the alerts the operator needs, each tested by promtool
(``promtool check rules``, ``promtool test rules`` of alerts_test.yml) with series that
fire it and series that do not, and loaded by both Prometheus configurations.

promtool is Debian's ``prometheus`` package: ``make ops-tools`` installs it; without it
the promtool tests are skipped (the file checks still run)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.promql import ALERTS, alert_expressions, metric_names

DEPLOY = Path(__file__).resolve().parents[3] / "deploy"
ALERTS_TEST = DEPLOY / "prometheus" / "alerts_test.yml"
PROMTOOL = shutil.which("promtool")
needs_promtool = pytest.mark.skipif(
    PROMTOOL is None,
    reason="promtool is not installed: `make ops-tools` installs Debian's prometheus package",
)

#: The alerts deploy/prometheus/alerts.yml must have (the breaker's included), and one for Redis.
REQUIRED = {
    "CaptchaTasksThreadBudgetSaturated": "10m",  # saturated with a backlog for 10 min
    "CaptchaTasksSolveErrors": "5m",
    "CaptchaTasksQueueWaitHigh": "5m",
    "CaptchaTasksNoWorkerHeartbeat": "2m",
    "CaptchaTasksProviderBalanceLow": "2m",
    "CaptchaTasksSubmitUncertain": "5m",
    "CaptchaTasksBreakerOpen": "2m",
    "CaptchaTasksRedisUnreachable": "2m",
}


def _rules() -> dict[str, dict[str, Any]]:
    groups = yaml.safe_load(ALERTS.read_text())["groups"]
    return {rule["alert"]: rule for group in groups for rule in group["rules"]}


def _promtool(*args: str) -> subprocess.CompletedProcess[str]:
    assert PROMTOOL is not None
    return subprocess.run(
        [PROMTOOL, *args], capture_output=True, text=True, timeout=120, cwd=DEPLOY
    )


def test_the_alerts_are_there_with_a_severity_and_words_for_the_operator() -> None:
    rules = _rules()
    assert {name: rule["for"] for name, rule in rules.items()} == REQUIRED
    for name, rule in rules.items():
        assert rule["labels"]["severity"] in {"warning", "critical"}, name
        assert rule["annotations"]["summary"] and rule["annotations"]["description"], name
    # A code of its own per error: the alert is labelled with it.
    assert '"code", "$1", "outcome"' in rules["CaptchaTasksSolveErrors"]["expr"]


def test_the_expressions_read_only_the_products_metrics() -> None:
    for name, expr in alert_expressions():
        names = metric_names(expr)
        assert names and all(n.startswith("captcha_tasks_") for n in names), (name, names)


def test_every_alert_has_series_that_fire_it_and_series_that_do_not() -> None:
    tests = yaml.safe_load(ALERTS_TEST.read_text())
    assert tests["rule_files"] == ["alerts.yml"]
    fired: set[str] = set()
    quiet: set[str] = set()
    for case in tests["tests"]:
        for check in case["alert_rule_test"]:
            (fired if check["exp_alerts"] else quiet).add(check["alertname"])
    assert fired == set(REQUIRED), set(REQUIRED) - fired
    assert quiet == set(REQUIRED), set(REQUIRED) - quiet


@needs_promtool
def test_promtool_checks_the_rules() -> None:
    done = _promtool("check", "rules", str(ALERTS))
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"SUCCESS: {len(REQUIRED)} rules found" in done.stdout


@needs_promtool
def test_promtool_runs_the_rules_unit_tests() -> None:
    done = _promtool("test", "rules", str(ALERTS_TEST))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout


@needs_promtool
def test_both_prometheus_configurations_load_the_rules(tmp_path: Path) -> None:
    done = _promtool("check", "config", str(DEPLOY / "prometheus.yml"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS: 1 rule files found" in done.stdout

    # The compose one names the container's path: check it with the file put there.
    compose_config = yaml.safe_load((DEPLOY / "prometheus-compose.yml").read_text())
    assert compose_config["rule_files"] == ["/etc/prometheus/alerts.yml"]
    compose = yaml.safe_load((DEPLOY / "docker-compose.yml").read_text())
    mounts = compose["services"]["prometheus"]["volumes"]
    assert "./prometheus/alerts.yml:/etc/prometheus/alerts.yml:ro" in mounts
    shutil.copy(ALERTS, tmp_path / "alerts.yml")
    compose_config["rule_files"] = [str(tmp_path / "alerts.yml")]
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(compose_config))
    done = _promtool("check", "config", str(tmp_path / "prometheus.yml"))
    assert done.returncode == 0, done.stdout + done.stderr
