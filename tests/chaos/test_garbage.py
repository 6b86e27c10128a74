"""The fault suite's rows for a provider answering garbage, one per protocol.

A steady load against a sandbox that replaces about one answer in six (in.php and
res.php, createTask and getTaskResult alike) with garbage of every kind
(``captcha_tasks_sandbox.garbage``): the answer cut short, padded past the
client's read cap, labelled with a wrong content type, an HTML page under HTTP 200,
no body, random bytes, JSON of the wrong shape. The request took effect before its
answer was replaced, so a garbled submit is at the provider (and billed): the client
cannot read it and must not send it again.

Besides the row's promises (nothing lost, no duplicate submit, typed errors only,
bounded requests, no leaked secret), every solved task's solution must be a token (no
garbage handed on as a solve) and every failed one a ``SubmitUncertain`` that says the
answer could not be read.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from typing import Any

import pytest

from captcha_tasks_sandbox.garbage import GARBAGE_KINDS
from tests.chaos.harness import Cluster, Row, scale, sized
from tests.chaos.test_faults import RESULT_TIMEOUT, check, steady

pytestmark = [pytest.mark.integration, pytest.mark.chaos, pytest.mark.timeout(sized(170, 420))]

#: The share of answers replaced (about one in six).
GARBAGE_RATE = 0.17


def _served(cluster: Cluster) -> list[str]:
    """The row's note: how many garbage answers of each kind the sandbox served."""
    stats = cluster.sandbox_stats()
    kinds = ", ".join(f"{kind} {stats[f'garbage_{kind}']}" for kind in GARBAGE_KINDS)
    return [f"{stats['garbage_injected']} garbage answers: {kinds}"]


def _check_outcomes(cluster: Cluster, ids: list[str]) -> None:
    """Every solve is a token; every failure a submit whose answer could not be read."""
    metas = cluster.wait_results(ids, timeout=10)
    for meta in metas.values():
        result: dict[str, Any] = meta.get("result") or {}
        if meta["status"] == "SUCCESS":
            solution = result.get("solution")
            assert isinstance(solution, str) and len(solution) > 20, result
        else:
            message = " ".join(map(str, result.get("exc_message") or ()))
            assert result.get("exc_type") == "SubmitUncertain", result
            assert "cannot be read" in message, message


def _run(cluster: Cluster, fault: str, protocol: str) -> Row:
    cluster.more_notes = lambda: _served(cluster)  # type: ignore[method-assign]
    note = f"{protocol}: {GARBAGE_RATE:.0%} of answers replaced with garbage of every kind"
    load = steady(cluster, lambda: note, sized(50, 200), sized(10.0, 30.0))
    row = cluster.finish(Row(fault, cluster.note), load, timeout=RESULT_TIMEOUT)
    # A garbled submit may hold a billed captcha: it fails SubmitUncertain, never resent
    # (a wrong content type over a sound answer is read as the answer). A garbled read
    # is asked again.
    check(row, allowed={"SubmitUncertain"}, requests_per_task=4, solved_at_least=0.6)
    _check_outcomes(cluster, load.ids)
    if scale() == "full":  # about 70 garbage answers, the kinds in turn: every one served
        stats = cluster.sandbox_stats()
        assert all(stats[f"garbage_{kind}"] for kind in GARBAGE_KINDS), row.notes
    return row


def test_garbage_answers_classic(cluster: Callable[..., Cluster]) -> None:
    c = cluster(workers=2, sandbox={"garbage_rate": GARBAGE_RATE})
    _run(c, "Garbage answers (classic)", "in.php/res.php, CaptchaAI dialect")


def test_garbage_answers_json(cluster: Callable[..., Cluster]) -> None:
    key = "CAP-" + secrets.token_hex(16)
    c = cluster(
        workers=2,
        key=key,
        env={"CAPTCHA_TASKS_PROVIDER": "capsolver"},
        sandbox={
            "api_keys": (key,),
            "protocol": "json",
            "dialect": "capsolver",
            "garbage_rate": GARBAGE_RATE,
        },
    )
    _run(c, "Garbage answers (JSON)", "createTask/getTaskResult, CapSolver dialect")
