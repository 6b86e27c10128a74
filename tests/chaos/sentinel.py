"""The fault suite's cluster on Redis Sentinel: a primary, a replica and three sentinels
(:class:`~captcha_tasks_dev.redis_sentinel.SentinelDeployment`, quorum 2, a master
called down after 3 s), with passwords on the data nodes and on the sentinels.

What changes against :class:`~tests.chaos.harness.Cluster`:

- workers, Flower and the client reach Redis through ``sentinel://`` URLs
  (``CAPTCHA_TASKS_REDIS_SENTINEL_MASTER`` / ``_PASSWORD``): broker, result backend and
  shared state all follow a failover;
- the test's own reads (results, snapshots, evidence) ask the sentinels for the master;
- :meth:`SentinelCluster.kill_master` SIGKILLs the master, waits until the sentinels
  have promoted the replica, and says how far behind the replica was (replication
  offsets: the bytes of acknowledged writes the promoted node never got);
- :meth:`SentinelCluster.cut_replication` stops the replica from receiving anything
  more from the master (its ``masterauth`` made wrong, its link cut): from then on every
  write the master acknowledges is one the replica will not have, the asynchronous-
  replication window held open on purpose;
- the secret scan also looks for both Redis passwords.
"""

from __future__ import annotations

import contextlib
import json
import re
import time
from pathlib import Path
from typing import Any

import redis

from captcha_tasks.state import redis_client
from captcha_tasks_dev.redis_sentinel import SentinelDeployment
from captcha_tasks_dev.redis_server import RedisServer
from captcha_tasks_sandbox import SandboxServer
from tests.chaos.harness import Cluster, Load, Row, _secret
from tests.support.secret_scan import redis_dump

MASTER = "chaos-primary"
#: A send that returned this close to a window's ends may or may not be in the promoted
#: replica's copy (the cut is a CLIENT KILL the master acts on in its own time).
EDGE = 0.05
#: What the workers' logs say while they ride out a failover, for the row's notes.
LOG_MARKS = {
    "broker reconnects": r"Connection to broker lost",
    "engine retries while Redis was away": r"engine \S+: Redis (unavailable|error)",
    "submits held (mark on no replica)": r"sending mark is not on a replica",
}


class SentinelCluster(Cluster):
    """A :class:`Cluster` whose Redis is a Sentinel deployment."""

    def __init__(self, tmp: Path, sandbox: SandboxServer, api_key: str, **options: Any) -> None:
        super().__init__(tmp, sandbox, api_key, **options)
        self.redis_password = _secret("Rd", 24)
        self.sentinel_password = _secret("Sn", 24)
        self.deployment = SentinelDeployment(
            tmp / "sentinel",
            master_name=MASTER,
            password=self.redis_password,
            sentinel_password=self.sentinel_password,
        )
        #: What each :meth:`kill_master` saw, for the row and the evidence.
        self.failovers: list[dict[str, Any]] = []
        self.cut_at: float | None = None
        #: Lost tasks of the last :meth:`wait_results` that exist nowhere in Redis.
        self.gone: list[str] = []
        #: Asynchronous-replication windows (``time.monotonic()`` from, to): while the
        #: replica was cut off, or the last second before a kill that left the promoted
        #: node behind. Filled by :meth:`cut_replication` and :meth:`kill_master`.
        self.windows: list[tuple[float, float]] = []
        #: Tasks whose send overlapped a window (:meth:`annotate`).
        self.in_window: set[str] = set()

    # -- the deployment ---------------------------------------------------------------

    @property
    def redis_url(self) -> str:
        return self.deployment.url

    def redis_env(self) -> dict[str, str]:
        return {
            "CAPTCHA_TASKS_REDIS_URL": self.deployment.url,
            "CAPTCHA_TASKS_REDIS_SENTINEL_MASTER": MASTER,
            "CAPTCHA_TASKS_REDIS_SENTINEL_PASSWORD": self.sentinel_password,
        }

    def start_redis(self) -> None:
        self.deployment.start()

    def stop_redis(self) -> None:
        self.deployment.stop()

    def _raw(self) -> redis.Redis:
        """The master now, as the sentinels say (bytes, as the harness reads)."""
        return redis_client(self.settings, self.deployment.url, timeout=5, decode=False)

    # -- the faults -------------------------------------------------------------------

    def cut_replication(self) -> float:
        """From now on the replica gets nothing more from the master: its password for
        the master is made wrong and its link cut, so it cannot reconnect. Returns when
        (``time.monotonic()``)."""
        master = self.deployment.master()
        replicas = [n for n in self.deployment.nodes if n is not master and n.proc is not None]
        for node in replicas:
            with node.client() as conn:
                conn.config_set("masterauth", "not-" + self.redis_password)
        with master.client() as conn:
            conn.client_kill_filter(_type="replica")
        self.cut_at = time.monotonic()
        for node in replicas:
            with node.client() as conn:
                assert conn.info("replication")["master_link_status"] == "down"
        return self.cut_at

    def kill_master(self, *, restart_after: float | None = None) -> dict[str, Any]:
        """SIGKILL the master; wait for the sentinels to promote the replica. Returns
        what happened: the ports, the seconds until the promoted node was master, and
        the replication offsets (``behind``: bytes the master had acknowledged that the
        promoted node never got, at least). ``restart_after``: the old master is started
        again (same port, its AOF) that many seconds after the promotion, and waited
        for until the sentinels have made it a replica."""
        old = self.deployment.master()
        offset = int(self.deployment.replication(old)["master_repl_offset"])
        killed_at = time.monotonic()
        old.kill()
        new = self.deployment.wait_for_failover(old, timeout=60)
        promoted_at = time.monotonic()
        info = self.deployment.replication(new)
        # The promoted node kept the old history up to second_repl_offset - 1.
        kept = int(info.get("second_repl_offset", 0)) - 1
        if self.cut_at is not None:
            with new.client() as conn:  # it may be a replica again one day
                conn.config_set("masterauth", self.redis_password)
        if self.cut_at is not None:
            self.windows.append((self.cut_at, killed_at))
        elif offset > kept:
            self.windows.append((killed_at - 1.0, killed_at))
        event: dict[str, Any] = {
            "old": old.port,
            "new": new.port,
            "killed_at": killed_at,
            "failover_s": round(promoted_at - killed_at, 2),
            "old_offset": offset,
            "kept_offset": kept,
            "behind": max(0, offset - kept),
        }
        if restart_after is not None:
            time.sleep(restart_after)
            old.start(timeout=30)
            event["rejoined_s"] = round(self._wait_replica(old), 2)
        self.failovers.append(event)
        return event

    def _wait_replica(self, node: RedisServer, timeout: float = 60.0) -> float:
        """Seconds until ``node`` replicates the master, in sync."""
        start = time.monotonic()
        deadline = start + timeout
        while time.monotonic() < deadline:
            with contextlib.suppress(redis.RedisError):
                info = self.deployment.replication(node)
                if info.get("role") == "slave" and info.get("master_link_status") == "up":
                    return time.monotonic() - start
            time.sleep(0.1)
        raise TimeoutError(f"redis-server on port {node.port} never became a replica")

    # -- the verdict ------------------------------------------------------------------

    def wait_results(self, ids: list[str], timeout: float) -> dict[str, dict[str, Any]]:
        """As :meth:`Cluster.wait_results`, but it stops waiting for tasks that exist
        nowhere in Redis (no message queued or unacknowledged, no job, no result: seen
        twice, two seconds apart, once the load has ended): nothing can end them any
        more. They are lost all the same (counted, and listed in :attr:`gone`)."""
        deadline = time.monotonic() + timeout
        found: dict[str, dict[str, Any]] = {}
        absent_before: set[str] = set()
        while True:
            pending = [i for i in ids if i not in found]
            found.update(super().wait_results(pending, timeout=2.0))
            pending = [i for i in pending if i not in found]
            if not pending or time.monotonic() >= deadline:
                break
            try:
                absent = self._absent(pending)
            except redis.RedisError:
                continue
            if set(pending) <= absent & absent_before:
                break
            absent_before = absent
        self.gone = sorted(set(ids) - set(found) & absent_before)
        return found

    def annotate(self, row: Row, load: Load) -> None:
        """The row's notes (what the workers' logs say of the failover, captchas billed
        and never read, tasks sent in a replication window) and its explained losses:
        lost tasks sent in a window, found nowhere in Redis."""
        # A send is in a window when Redis may have taken it inside one: it began before
        # the window closed and returned after it opened (its return alone can come well
        # after the master took it on a loaded machine, and after the master died).
        self.in_window = {
            i
            for i, (began, returned) in load.sent_span.items()
            if any(began <= b + EDGE and returned >= a - EDGE for a, b in self.windows)
        }
        logs = "\n".join(w.log() for w in self.workers.values())
        counts = {what: len(re.findall(mark, logs)) for what, mark in LOG_MARKS.items()}
        notes = [f"{n} {what}" for what, n in counts.items() if n]
        # Billed and never read: submitted, then its captcha id lost with the master.
        unread = sum(1 for captcha in self.sandbox_captchas() if not captcha["polls"])
        notes.append(f"{unread} captchas never read")
        if self.windows:
            notes.append(f"{len(self.in_window)} tasks accepted in the replication window")
        row.notes = ", ".join(filter(None, [row.notes, *notes]))
        row.explained_losses = len(set(self.lost_ids) & self.in_window & set(self.gone))

    def _absent(self, ids: list[str]) -> set[str]:
        """Which of ``ids`` appear in no key and no value of Redis."""
        with self._raw() as raw:
            dump = redis_dump(raw, exclude=set())[0]
        return {i for i in ids if i not in dump}

    def secrets(self) -> tuple[str, ...]:
        return (*super().secrets(), self.redis_password, self.sentinel_password)

    def leaks(self, metas: dict[str, dict[str, Any]], flower: str = "") -> int:
        """The harness's scan, with what ``inspect stats`` and ``inspect conf`` say too
        (the broker connection's URLs and transport options: Flower shows them)."""
        inspect = self.app.control.inspect(timeout=5)
        replies = {"stats": inspect.stats(), "conf": inspect.conf()}
        assert replies["stats"], "no worker answered inspect stats"
        assert all("broker" in reply for reply in replies["stats"].values())
        return super().leaks(metas, flower + json.dumps(replies, default=str))

    def keep_evidence(self, dest: Path) -> None:
        super().keep_evidence(dest)
        dest.mkdir(parents=True, exist_ok=True)
        for path in self.deployment.data_dir.rglob("*.log"):
            name = f"{path.parent.name}-{path.name}"
            (dest / name).write_bytes(path.read_bytes())
        evidence = {"failovers": self.failovers, "gone": self.gone}
        (dest / "failovers.json").write_text(json.dumps(evidence, indent=1))
