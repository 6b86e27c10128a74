"""pytest fixtures for the solver sandbox (registered by ``tests/conftest.py``).

``sandbox`` is a started :class:`SandboxServer` on a free loopback port, serving in
a background thread and stopped after the test; ``sandbox_factory(**config)``
starts more, each with its own :class:`SandboxConfig`; ``demo_sandbox`` also serves
the demo target site (``demo_sandbox.demo_url``); ``tls_sandbox`` serves https with a
certificate that chains to a test CA named by ``REQUESTS_CA_BUNDLE``.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import trustme

from captcha_tasks.settings import get_settings
from captcha_tasks_sandbox import SandboxConfig, SandboxServer

__all__ = [
    "DEFAULT_SANDBOX_TIME_SCALE",
    "demo_sandbox",
    "sandbox",
    "sandbox_factory",
    "sandbox_time_scale",
    "tls_sandbox",
    "trusted_certificate",
]

#: Time scale of test sandboxes when CAPTCHA_TASKS_TIME_SCALE is not set.
DEFAULT_SANDBOX_TIME_SCALE = 0.05

SandboxFactory = Callable[..., SandboxServer]


def sandbox_time_scale() -> float:
    """The session's CAPTCHA_TASKS_TIME_SCALE (so workers and sandbox agree), else 0.05."""
    if os.environ.get("CAPTCHA_TASKS_TIME_SCALE"):
        return get_settings().time_scale
    return DEFAULT_SANDBOX_TIME_SCALE


@pytest.fixture
def sandbox_factory() -> Iterator[SandboxFactory]:
    """``make(config=None, **fields)``: start a sandbox; every one is stopped at teardown.

    ``fields`` are :class:`SandboxConfig` fields, applied over ``config`` (default: a
    config with the test time scale), e.g. ``make(threads=2, dialect="2captcha")``.
    """
    started: list[SandboxServer] = []

    def make(config: SandboxConfig | None = None, **fields: Any) -> SandboxServer:
        if config is None:
            config = SandboxConfig(**{"time_scale": sandbox_time_scale(), **fields})
        elif fields:
            config = dataclasses.replace(config, **fields)
        server = SandboxServer(config)
        started.append(server)
        return server.start()

    yield make
    for server in reversed(started):
        server.stop()


@pytest.fixture
def sandbox(sandbox_factory: SandboxFactory) -> SandboxServer:
    """A started sandbox with the default plan (5 threads, captchaai dialect)."""
    return sandbox_factory()


@pytest.fixture
def demo_sandbox(sandbox_factory: SandboxFactory) -> SandboxServer:
    """A started sandbox that also serves the demo target site on a free port."""
    return sandbox_factory(demo_port=0)


def trusted_certificate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """A certificate and key for 127.0.0.1 in ``tmp_path``, chained to a new test CA that
    ``REQUESTS_CA_BUNDLE`` names for the rest of the test (requests and the provider
    transport trust it); returns their paths."""
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1")
    cert_path, key_path, ca_path = tmp_path / "cert.pem", tmp_path / "key.pem", tmp_path / "ca.pem"
    cert_path.write_bytes(b"".join(blob.bytes() for blob in cert.cert_chain_pems))
    cert.private_key_pem.write_to_path(str(key_path))
    ca.cert_pem.write_to_path(str(ca_path))
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(ca_path))
    return cert_path, key_path


@pytest.fixture
def tls_sandbox(
    sandbox_factory: SandboxFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> SandboxServer:
    """A https sandbox whose certificate (for 127.0.0.1) chains to a test CA that
    requests, and the provider transport as requests does, trust through
    REQUESTS_CA_BUNDLE. reCAPTCHA v2 takes 15 s * 0.02 = 0.3 s there."""
    cert_path, key_path = trusted_certificate(tmp_path, monkeypatch)
    return sandbox_factory(time_scale=0.02, tls_cert=str(cert_path), tls_key=str(key_path))
