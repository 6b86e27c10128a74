"""Fixtures of the fault suite: ``cluster(...)`` starts a :class:`~tests.chaos.harness.Cluster`
on a sandbox with the given faults; everything it started is stopped by PID at teardown.

When a row fails, its evidence (logs, job hashes, lost task ids, the sandbox's captchas)
is kept under ``.run/chaos/<test>-<time>/`` before the cluster stops."""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Generator, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.chaos.harness import ROOT, TIME_SCALE, Cluster, _secret
from tests.chaos.providers import TwoProviders

ClusterFactory = Callable[..., Cluster]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: Any) -> Generator[None, Any, None]:
    outcome = yield
    report = outcome.get_result()
    if report.when == "call":
        item.stash[_CALL_FAILED] = report.failed


_CALL_FAILED = pytest.StashKey[bool]()


@pytest.fixture
def cluster(
    request: pytest.FixtureRequest, tmp_path: Path, sandbox_factory: Any
) -> Iterator[ClusterFactory]:
    """``cluster(sandbox={...config...}, key=None, backup=None, cls=Cluster,
    **cluster_options)``; with ``backup`` (a config, ``{}`` for the defaults) a
    :class:`TwoProviders` whose second provider is a JSON-protocol sandbox (CapSolver's
    dialect); ``cls``: another kind of cluster (``SentinelCluster``)."""
    started: list[Cluster] = []

    def start(
        *,
        sandbox: dict[str, Any] | None = None,
        key: str | None = None,
        backup: dict[str, Any] | None = None,
        cls: type[Cluster] = Cluster,
        **options: Any,
    ) -> Cluster:
        accepted = _secret("Ck", 32)
        scale = options.get("time_scale", TIME_SCALE)
        config = {"api_keys": (accepted,), "time_scale": scale, **(sandbox or {})}
        server = sandbox_factory(**config)
        tmp = tmp_path / f"cluster{len(started) + 1}"
        made: Cluster
        if backup is None:
            made = cls(tmp, server, key or accepted, **options)
        else:
            backup_key = "CAP-" + secrets.token_hex(16)
            json_config = {"protocol": "json", "dialect": "capsolver", **backup}
            second = sandbox_factory(api_keys=(backup_key,), time_scale=scale, **json_config)
            made = TwoProviders(tmp, server, key or accepted, second, backup_key, **options)
        path, line, name = request.node.location
        made.test = (path, line or 0, name)
        made.tmp.mkdir(parents=True, exist_ok=True)
        started.append(made)
        return made.start()

    yield start
    if request.node.stash.get(_CALL_FAILED, False):
        dest = ROOT / ".run" / "chaos" / f"{request.node.name}-{time.strftime('%Y%m%d-%H%M%S')}"
        for i, made in enumerate(started, 1):
            made.keep_evidence(dest / f"cluster{i}")
        print(f"\nevidence of the failed row kept in {dest}")
    for made in reversed(started):
        made.stop()
