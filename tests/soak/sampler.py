"""What the soak watches while it runs: Redis keys and memory, keys without a TTL, the
workers' RSS, and the result keys' TTLs; written out as a table, a JSON file and a plot.

A sample every :data:`EVERY` seconds (keys, ``used_memory``, each worker's RSS with its
pool processes); every :data:`SCAN_EVERY` seconds a full ``SCAN`` counts the keys with
no TTL and the result keys whose TTL is longer than the configured expiry.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import psutil
import redis

__all__ = [
    "BROKER_KEYS",
    "EVERY",
    "SCAN_EVERY",
    "Outcomes",
    "Sample",
    "Sampler",
    "is_broker_key",
    "rss_growth",
    "summary",
    "write_plot",
]

#: Seconds between samples.
EVERY = 5.0
#: Seconds between full scans for keys without a TTL.
SCAN_EVERY = 60.0


@dataclass
class Sample:
    at: float  #: seconds since the soak started
    keys: int
    used_memory: int
    #: worker name -> [pid, RSS of its main process, RSS of its pool processes] (bytes)
    rss: dict[str, list[int]]
    solved: int  #: results stored so far (final states)
    phase: str  #: "load" or "drain"
    no_ttl: int | None = None  #: keys without a TTL (scans only), the broker's aside
    #: the broker's own keys without a TTL (kombu's bindings, queues, unacked), by name
    broker_no_ttl: list[str] | None = None
    long_results: int | None = None  #: result keys with a TTL above the expiry (scans)
    events: list[str] = field(default_factory=list)


class Sampler:
    """Samples from a thread until :meth:`stop`; Redis being away skips a sample."""

    def __init__(
        self,
        client: Callable[[], redis.Redis],
        workers: Callable[[], dict[str, int]],
        solved: Callable[[], int],
        result_expires: int,
    ) -> None:
        self._client = client
        self._workers = workers
        self._solved = solved
        self._result_expires = result_expires
        self.samples: list[Sample] = []
        self.phase = "load"
        self._events: list[str] = []
        self._started = time.monotonic()
        self._last_scan = -SCAN_EVERY
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="soak-sampler", daemon=True)

    def start(self) -> Sampler:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=60)

    def event(self, what: str) -> None:
        """Mark what just happened (a kill, a restart) on the next sample."""
        self._events.append(what)

    def now(self) -> float:
        return time.monotonic() - self._started

    def take(self, *, scan: bool = False) -> Sample | None:
        at = self.now()
        try:
            with self._client() as raw:
                sample = Sample(
                    at=round(at, 1),
                    keys=int(raw.dbsize()),
                    used_memory=int(raw.info("memory")["used_memory"]),
                    rss=self._rss(),
                    solved=self._solved(),
                    phase=self.phase,
                )
                if scan or at - self._last_scan >= SCAN_EVERY:
                    sample.no_ttl, sample.broker_no_ttl, sample.long_results = self._scan(raw)
                    self._last_scan = at
        except (redis.RedisError, OSError):
            return None
        sample.events, self._events = self._events, []
        self.samples.append(sample)
        return sample

    def _run(self) -> None:
        while not self._stop.wait(EVERY):
            self.take()

    def _rss(self) -> dict[str, list[int]]:
        sizes = {}
        for name, pid in self._workers().items():
            with contextlib.suppress(psutil.Error):
                proc = psutil.Process(pid)
                pool = 0
                for child in proc.children(recursive=True):
                    with contextlib.suppress(psutil.Error):
                        pool += child.memory_info().rss
                sizes[name] = [pid, proc.memory_info().rss, pool]
        return sizes

    def _scan(self, raw: redis.Redis) -> tuple[int, list[str], int]:
        no_ttl = long_results = 0
        broker: list[str] = []
        batch: list[bytes] = []

        def flush() -> None:
            nonlocal no_ttl, long_results
            pipe = raw.pipeline(transaction=False)
            for key in batch:
                pipe.ttl(key)
            for key, ttl in zip(batch, pipe.execute(), strict=True):
                if ttl == -1 and is_broker_key(key.decode(errors="replace")):
                    broker.append(key.decode(errors="replace"))
                elif ttl == -1:
                    no_ttl += 1
                    print(f"soak: a key without a TTL: {key[:120]!r}")
                elif key.startswith(b"celery-task-meta-") and ttl > self._result_expires:
                    long_results += 1
            batch.clear()

        for key in raw.scan_iter(count=1000):
            batch.append(key)
            if len(batch) >= 1000:
                flush()
        if batch:
            flush()
        return no_ttl, sorted(broker), long_results

    def dump(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(json.dumps(asdict(s)) for s in self.samples) + "\n")


#: kombu's Redis transport keeps these without a TTL, by design: everything under
#: ``_kombu.`` (the exchange bindings, ``_kombu.binding.<exchange>``, where a publish
#: finds its queues, so an expired one would drop messages; kombu 5.5's
#: ``binding_permanent`` / ``binding_deadlines``, its own expiry of fanout bindings),
#: the queues themselves (a list, gone once empty) and the unacked
#: bookkeeping (``unacked``, ``unacked_index``: emptied as messages are acknowledged).
BROKER_KEYS = ("_kombu.", "unacked", "unacked_index", "unacked_mutex")


def is_broker_key(key: str) -> bool:
    """Whether ``key`` is kombu's own (a binding, the unacked bookkeeping, a queue)."""
    return key.startswith(BROKER_KEYS[0]) or key in BROKER_KEYS[1:] or _is_queue(key)


def _is_queue(key: str) -> bool:
    # The default queue and its priority steps (``celery``, ``celery\x06\x163``...).
    return key.split("\x06\x16")[0] in ("celery", "celery.pidbox", "celeryev")


def rss_growth(samples: list[Sample], name: str) -> tuple[int, int, int]:
    """A worker's main process: median RSS over the second tenth of its life in the load
    and over its last tenth (the first tenth is warm-up: imports, pools, connections),
    and how many samples that life had. Only its latest process counts (a SIGKILLed
    worker's restart starts afresh)."""
    load = [s.rss[name] for s in samples if s.phase == "load" and name in s.rss]
    if not load:
        return 0, 0, 0
    latest = load[-1][0]
    sizes = [rss for pid, rss, _ in load if pid == latest]
    if len(sizes) < 10:
        return sizes[0], sizes[-1], len(sizes)
    tenth = len(sizes) // 10
    early = int(statistics.median(sizes[tenth : 2 * tenth]))
    return early, int(statistics.median(sizes[-tenth:])), len(sizes)


def write_plot(samples: list[Sample], path: Path, title: str) -> None:
    """Keys, Redis memory, worker RSS and solves per second over the soak, one panel each."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    xs = [s.at / 60 for s in samples]
    fig, axes = plt.subplots(4, 1, figsize=(9, 9), dpi=100, sharex=True)
    axes[0].plot(xs, [s.keys for s in samples], color="tab:blue")
    axes[0].set_ylabel("Redis keys")
    axes[1].plot(xs, [s.used_memory / 2**20 for s in samples], color="tab:purple")
    axes[1].set_ylabel("used_memory (MiB)")
    names = sorted({n for s in samples for n in s.rss})
    for name in names:
        main = [s.rss[name][1] / 2**20 if name in s.rss else float("nan") for s in samples]
        pool = [s.rss[name][2] / 2**20 if name in s.rss else float("nan") for s in samples]
        line = axes[2].plot(xs, main, label=f"{name} main")[0]
        axes[2].plot(xs, pool, linestyle=":", color=line.get_color(), label=f"{name} pool")
    axes[2].set_ylabel("worker RSS (MiB)")
    axes[2].legend(fontsize="x-small", loc="lower right", ncol=3)
    rates = [0.0] + [
        max(0, b.solved - a.solved) / max(0.001, b.at - a.at)
        for a, b in itertools.pairwise(samples)
    ]
    axes[3].plot(xs, rates, color="tab:green")
    axes[3].set_ylabel("submits / s")
    axes[3].set_xlabel("minutes since the soak started")
    for sample in samples:
        if sample.events:
            for ax in axes:
                ax.axvline(sample.at / 60, color="red", alpha=0.25, linewidth=1)
    drain = next((s.at / 60 for s in samples if s.phase == "drain"), None)
    if drain is not None:
        for ax in axes:
            ax.axvline(drain, color="grey", linestyle="--", linewidth=1)
    for ax in axes:
        ax.set_ylim(bottom=0)
    fig.suptitle(title + "  (red: a SIGKILL or the Redis restart; dashed: load ends)", fontsize=9)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)


def summary(samples: list[Sample]) -> dict[str, Any]:
    """Start, peak and end of keys and memory; the worst keys-without-TTL count."""
    load = [s for s in samples if s.phase == "load"]
    first, last = samples[0], samples[-1]
    scans = [s.no_ttl for s in samples if s.no_ttl is not None]
    broker = sorted({k for s in samples for k in (s.broker_no_ttl or ())})
    long = [s.long_results for s in samples if s.long_results is not None]
    return {
        "keys": (first.keys, max(s.keys for s in samples), last.keys),
        "used_memory": (first.used_memory, max(s.used_memory for s in samples), last.used_memory),
        "no_ttl_max": max(scans) if scans else None,
        "scans": len(scans),
        "broker_no_ttl": broker,
        "long_results_max": max(long) if long else None,
        "load_seconds": load[-1].at if load else 0.0,
        "seconds": last.at,
    }


class Outcomes:
    """Every task's final state as the result backend publishes it (``PSUBSCRIBE
    celery-task-meta-*``): the soak keeps results only 120 s, so reading them at the end
    (as the fault suite does) would count a task finished long ago as lost. A lost
    connection (the Redis restart) is reopened, and the tasks sent so far with no
    outcome yet are read once from their still-stored results, so none is missed."""

    FINAL = ("SUCCESS", "FAILURE", "REVOKED")

    def __init__(self, client: Callable[[], redis.Redis], sent: Callable[[], list[str]]) -> None:
        self._client = client
        self._sent = sent
        self.metas: dict[str, dict[str, Any]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="soak-outcomes", daemon=True)
        self._subscribed = threading.Event()

    def start(self) -> Outcomes:
        self._thread.start()
        assert self._subscribed.wait(30), "could not subscribe to the results"
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                with self._client() as raw, raw.pubsub() as pubsub:
                    pubsub.psubscribe("celery-task-meta-*")
                    while pubsub.get_message(timeout=1.0) is None:
                        if self._stop.is_set():
                            return
                    self._catch_up(raw)
                    self._subscribed.set()
                    while not self._stop.is_set():
                        message = pubsub.get_message(timeout=0.5)
                        if message and message["type"] == "pmessage":
                            self._note(message["data"])
            except (redis.RedisError, OSError):
                self._stop.wait(0.5)

    def _catch_up(self, raw: redis.Redis) -> None:
        missing = [i for i in list(self._sent()) if i not in self.metas]
        for start in range(0, len(missing), 500):
            chunk = missing[start : start + 500]
            for value in raw.mget([f"celery-task-meta-{i}" for i in chunk]):
                if value is not None:
                    self._note(value)

    def _note(self, data: bytes) -> None:
        try:
            meta = json.loads(data)
        except ValueError:
            return
        if isinstance(meta, dict) and meta.get("status") in self.FINAL and meta.get("task_id"):
            self.metas.setdefault(str(meta["task_id"]), meta)

    def wait(self, ids: list[str], timeout: float) -> dict[str, dict[str, Any]]:
        """The outcomes of ``ids``, once all are in or ``timeout`` s passed."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and any(i not in self.metas for i in ids):
            time.sleep(0.5)
        return {i: self.metas[i] for i in ids if i in self.metas}
