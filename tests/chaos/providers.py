"""The fault suite's cluster with two providers: ``main`` (the classic
sandbox the suite always starts, CaptchaAI's dialect) and ``backup`` (a second sandbox
speaking the JSON task API, CapSolver's dialect), configured with
``CAPTCHA_TASKS_PROVIDERS=main,backup``.

What changes against :class:`~tests.chaos.harness.Cluster`:

- the figures add up both sandboxes (requests, submits, fault answers);
- a duplicate submit is a job's page host seen twice over **both** sandboxes (each
  task's page has its own host, recorded per captcha whatever the wire format), while
  an earlier submit of it was not unsolvable;
- the secret scan looks for both keys;
- :meth:`TwoProviders.take_down` stops ``main``'s sandbox (its port refuses
  connections), waits, and starts its successor on the same port with the same memory
  (captchas in flight, balance, counters): the sandbox serves from this process, so
  "stopped" is its listening socket closed, not a process killed.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections import Counter
from pathlib import Path
from typing import Any

import redis
import requests

from captcha_tasks.settings.providers import SINGLE_PROVIDER_VARIABLES
from captcha_tasks.state import Keys
from captcha_tasks_sandbox import SandboxServer
from tests.chaos.harness import KINDS, SITEKEYS, TASK_NAMES, Cluster

NAMES = ("main", "backup")
PROTOCOLS = {"main": "captchaai", "backup": "capsolver"}
#: Sandbox counters that add up over both providers.
COUNTERS = (
    "requests",
    "submitted",
    "no_slot",
    "zero_balance",
    "errors_injected",
    "slow_injected",
    "unsolvable",
    "bad_key",
    "duplicates",
)


class TwoProviders(Cluster):
    """A :class:`Cluster` whose workers buy from ``sandbox`` (main) and ``backup``."""

    def __init__(
        self,
        tmp: Path,
        sandbox: SandboxServer,
        api_key: str,
        backup: SandboxServer,
        backup_key: str,
        **options: Any,
    ) -> None:
        super().__init__(tmp, sandbox, api_key, **options)
        self.backup = backup
        self.backup_key = backup_key
        #: Sandboxes started by :meth:`take_down` (the fixture stops the first ones).
        self.successors: list[SandboxServer] = []
        #: What :meth:`take_down` saw of the outage, for the row.
        self.outages: list[float] = []

    def server(self, name: str) -> SandboxServer:
        return self.sandbox if name == "main" else self.backup

    def worker_env(self) -> dict[str, str]:
        env = super().worker_env()
        for name in SINGLE_PROVIDER_VARIABLES:
            env.pop(name, None)  # refused beside CAPTCHA_TASKS_PROVIDERS
        env["CAPTCHA_TASKS_PROVIDERS"] = ",".join(NAMES)
        for name, key in (("main", self.api_key), ("backup", self.backup_key)):
            upper = name.upper()
            env[f"CAPTCHA_TASKS_{upper}_PROTOCOL"] = PROTOCOLS[name]
            env[f"CAPTCHA_TASKS_{upper}_URL"] = self.server(name).url
            env[f"CAPTCHA_TASKS_{upper}_API_KEY"] = key
            env[f"CAPTCHA_TASKS_{upper}_THREADS"] = str(self.threads)
        return env

    def send(self, n: int) -> str:
        """As :meth:`Cluster.send`, with a page host of the task's own."""
        kind = KINDS[n % len(KINDS)]
        kwargs: dict[str, Any] = {
            "sitekey": SITEKEYS[kind],
            "pageurl": f"https://c{n}.example.com/chaos",
        }
        if n % 3 == 0:
            kwargs["proxy_id"] = self.proxy_id
        return str(self.app.send_task(TASK_NAMES[kind], kwargs=kwargs).id)

    def take_down(self, seconds: float) -> float:
        """``main``'s port refuses connections for ``seconds``; returns how long it did."""
        down = time.monotonic()
        self.sandbox.stop()
        time.sleep(seconds)
        successor = self.sandbox.successor()
        self.successors.append(successor)
        successor.start()
        self.sandbox = successor
        self.outages.append(time.monotonic() - down)
        return self.outages[-1]

    def stop(self) -> None:
        super().stop()
        for server in self.successors:
            server.stop()

    # -- figures over both sandboxes ------------------------------------------------

    def provider_stats(self, name: str) -> dict[str, Any]:
        reply = requests.get(f"{self.server(name).url}/stats", timeout=10)
        stats: dict[str, Any] = reply.json()
        return stats

    def sandbox_stats(self) -> dict[str, Any]:
        total: Counter[str] = Counter()
        for name in NAMES:
            stats = self.provider_stats(name)
            total.update({c: int(stats.get(c, 0)) for c in COUNTERS})
        return dict(total)

    def sandbox_captchas(self) -> list[dict[str, Any]]:
        """Both sandboxes' captchas, each job known by its page host (the fingerprint
        of its parameters differs between the wire formats), and which one had it."""
        out = []
        for name in NAMES:
            reply = requests.get(f"{self.server(name).url}/admin/captchas", timeout=10)
            for captcha in reply.json()["captchas"]:
                out.append({**captcha, "fingerprint": captcha["hostname"], "provider": name})
        return out

    def more_notes(self) -> list[str]:
        """Each provider's submits and requests, and what main's breaker did (its log lines)."""
        out = []
        for name in NAMES:
            stats = self.provider_stats(name)
            out.append(f"{name}: {stats['submitted']} submits, {stats['requests']} requests")
        logs = "\n".join(w.log() for w in self.workers.values())
        opened = logs.count("provider main: breaker open for")
        closed = logs.count("provider main: breaker closed")
        out.append(f"main's breaker opened {opened}x, closed {closed}x")
        return out

    def secrets(self) -> tuple[str, ...]:
        return (self.api_key, self.backup_key, self.proxy_password)

    def breaker(self, name: str) -> dict[str, str]:
        with self._raw() as raw:
            fields = raw.hgetall(Keys(self.settings.key_prefix).breaker(name))
        return {k.decode(): v.decode() for k, v in fields.items()}

    def keep_evidence(self, dest: Path) -> None:
        super().keep_evidence(dest)
        evidence: dict[str, Any] = {"outages": self.outages}
        with contextlib.suppress(redis.RedisError):
            evidence["breakers"] = {name: self.breaker(name) for name in NAMES}
        with contextlib.suppress(requests.RequestException):
            evidence["stats"] = {name: self.provider_stats(name) for name in NAMES}
        (dest / "providers.json").write_text(json.dumps(evidence, indent=1, default=str))
