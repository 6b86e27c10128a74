"""The metric names a PromQL expression reads, and every expression of the operator's
files (deploy/grafana/dashboards/*.json, deploy/prometheus/alerts.yml).

Conservative on purpose: strings, label matchers (``{...}``), ranges (``[...]``) and
the label lists of ``by`` / ``without`` / ``on`` / ``ignoring`` / ``group_left`` /
``group_right`` are dropped, then every identifier that is not a function call (followed
by ``(``), a keyword or a number is a metric name. A name it cannot see is a test that
passes wrongly, so :func:`metric_names` also refuses an expression it would misread.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import yaml

__all__ = ["alert_expressions", "dashboard_expressions", "metric_names"]

ROOT = Path(__file__).resolve().parents[2]
DASHBOARDS = ROOT / "deploy" / "grafana" / "dashboards"
ALERTS = ROOT / "deploy" / "prometheus" / "alerts.yml"

KEYWORDS = {
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
    "and",
    "or",
    "unless",
    "bool",
    "offset",
    "inf",
    "nan",
}
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'')
_MATCHERS = re.compile(r"\{[^{}]*\}")
_RANGE = re.compile(r"\[[^\[\]]*\]")
_LABEL_LIST = re.compile(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)")
_IDENTIFIER = re.compile(r"[A-Za-z_:][A-Za-z0-9_:]*")


def metric_names(expr: str) -> set[str]:
    """Metric names ``expr`` reads (``_bucket`` and the like as written)."""
    text = _STRING.sub(" ", expr)
    text = _MATCHERS.sub(" ", text)
    text = _RANGE.sub(" ", text)
    text = _LABEL_LIST.sub(" ", text)
    if any(c in text for c in "{}[]\"'"):
        raise ValueError(f"cannot read the metric names of {expr!r}")
    names = set()
    for match in _IDENTIFIER.finditer(text):
        word, rest = match.group(), text[match.end() :].lstrip()
        if rest.startswith("(") or word.lower() in KEYWORDS:
            continue
        before = text[match.start() - 1] if match.start() else " "
        if before in "$." or before.isdigit():  # $__interval, 1.5e3
            continue
        names.add(word)
    return names


def dashboard_expressions() -> Iterator[tuple[str, str]]:
    """``(where, expr)`` of every target of every panel of every dashboard."""
    for path in sorted(DASHBOARDS.glob("*.json")):
        for panel in json.loads(path.read_text())["panels"]:
            for target in panel.get("targets", []):
                yield f"{path.name}: {panel['title']} {target['refId']}", target["expr"]


def alert_expressions() -> Iterator[tuple[str, str]]:
    """``(alert name, expr)`` of every rule of the alert file."""
    for group in yaml.safe_load(ALERTS.read_text())["groups"]:
        for rule in group["rules"]:
            yield rule.get("alert") or rule["record"], rule["expr"]
