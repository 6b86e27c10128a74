"""Fixtures of the fault suite: ``cluster(...)`` starts a :class:`~tests.chaos.harness.Cluster`
on a sandbox with the given faults; everything it started is stopped by PID at teardown."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.chaos.harness import TIME_SCALE, Cluster, _secret

ClusterFactory = Callable[..., Cluster]


@pytest.fixture
def cluster(tmp_path: Path, sandbox_factory: Any) -> Iterator[ClusterFactory]:
    """``cluster(sandbox={...config...}, key=None, **cluster_options)``."""
    started: list[Cluster] = []

    def start(
        *, sandbox: dict[str, Any] | None = None, key: str | None = None, **options: Any
    ) -> Cluster:
        accepted = _secret("Ck", 32)
        config = {"api_keys": (accepted,), "time_scale": options.get("time_scale", TIME_SCALE),
                  **(sandbox or {})}  # fmt: skip
        server = sandbox_factory(**config)
        made = Cluster(tmp_path / f"cluster{len(started) + 1}", server, key or accepted, **options)
        made.tmp.mkdir(parents=True, exist_ok=True)
        started.append(made)
        return made.start()

    yield start
    for made in reversed(started):
        made.stop()
