"""What the JSON API remembers of each task beyond the solve state: its wire id, its
type, and the read rules of its dialect (rate, count, retention).

The solve itself (threads, latency, answer, billing, tokens) lives in :class:`.state.SandboxState`
under the task's numeric captcha id; this is only the second wire format's bookkeeping.
"""

from __future__ import annotations

import dataclasses
import random
import threading
import time
import uuid

from .json_protocol import JsonError
from .state import SandboxState

__all__ = ["JsonTask", "JsonTasks"]

#: Unscaled seconds a task can be read after its creation (CapSolver, CapMonster: 5 minutes).
RETENTION = 300.0
#: Anti-Captcha removes a task 60 s after its worker completed it (docs/PROVIDERS.md D11).
ANTICAPTCHA_RETENTION = 60.0
#: getTaskResult reads per task before the result is lost (CapSolver, CapMonster).
MAX_READS = 120
#: Unscaled seconds CapMonster wants between two reads of one task.
CAPMONSTER_READ_INTERVAL = 2.0


@dataclasses.dataclass
class JsonTask:
    """One createTask's bookkeeping."""

    wire_id: int | str
    captcha_id: int
    kind: str
    dialect: str
    created: float  # the state's clock
    created_wall: float
    ready_at: float
    cost: float
    reads: int = 0
    last_read: float | None = None
    #: The task's ``userAgent`` (some dialects' solutions carry it back).
    user_agent: str = ""
    #: An AWS WAF task's ``cookieSolution: true`` (CapMonster: the cookie, not the voucher).
    cookie: bool = False
    #: A grid task's tile count (CapMonster answers a boolean for each).
    tiles: int = 0


class JsonTasks:
    """Tasks by wire id (as text), with the dialect's read rules; thread-safe."""

    def __init__(self, state: SandboxState) -> None:
        self._state = state
        self._lock = threading.Lock()
        self._tasks: dict[str, JsonTask] = {}
        self._rng = random.Random(state.config.seed)

    def add(
        self, captcha_id: int, kind: str, cost: float, user_agent: str = "", cookie: bool = False
    ) -> JsonTask:
        """Remember a task the state accepted; CapSolver's get UUIDs, the others the number."""
        state = self._state
        dialect = state.config.dialect
        created, ready_at = state.timing(captcha_id) or (state.now(), state.now())
        with self._lock:
            self._prune(created)
            wire: int | str = captcha_id
            if dialect == "capsolver":
                wire = str(uuid.UUID(int=self._rng.getrandbits(128), version=4))
            task = JsonTask(
                wire,
                captcha_id,
                kind,
                dialect,
                created,
                time.time(),
                ready_at,
                cost,
                user_agent=user_agent,
                cookie=cookie,
            )
            self._tasks[str(wire)] = task
            return task

    def read(self, raw_id: object) -> JsonTask:
        """The task a getTaskResult asks for, or the dialect's error (lost, too many reads,
        too fast). Counts the read."""
        now = self._state.now()
        with self._lock:
            task = self._find(raw_id, now)
            interval = CAPMONSTER_READ_INTERVAL * self._state.config.time_scale
            last = task.last_read
            if task.dialect == "capmonster" and last is not None and now - last < interval:
                raise JsonError("ERROR_TOO_MUCH_REQUESTS")
            if task.dialect in ("capmonster", "capsolver") and task.reads >= MAX_READS:
                raise JsonError("ERROR_NO_SUCH_CAPCHA_ID")
            task.reads += 1
            task.last_read = now
            return task

    def get(self, raw_id: object) -> JsonTask:
        """The task a report names (not a read), or ERROR_NO_SUCH_CAPCHA_ID."""
        with self._lock:
            return self._find(raw_id, self._state.now())

    def wire_ids(self) -> dict[int, str]:
        """The wire id of each remembered task whose id is not its captcha's number
        (CapSolver's UUIDs), by captcha id."""
        with self._lock:
            return {
                t.captcha_id: str(t.wire_id)
                for t in self._tasks.values()
                if str(t.wire_id) != str(t.captcha_id)
            }

    # -- internals (lock held) ------------------------------------------------------

    def _find(self, raw_id: object, now: float) -> JsonTask:
        if isinstance(raw_id, bool) or not isinstance(raw_id, int | str):
            raise JsonError("ERROR_NO_SUCH_CAPCHA_ID")
        task = self._tasks.get(str(raw_id).strip())
        if task is None or now > self._expires(task):
            raise JsonError("ERROR_NO_SUCH_CAPCHA_ID")
        return task

    def _expires(self, task: JsonTask) -> float:
        scale = self._state.config.time_scale
        if task.dialect == "anticaptcha":
            return task.ready_at + ANTICAPTCHA_RETENTION * scale
        return task.created + RETENTION * scale

    def _prune(self, now: float) -> None:
        """Forget expired tasks, oldest first (insertion order is creation order)."""
        while self._tasks:
            key, task = next(iter(self._tasks.items()))
            kept_until = task.created + RETENTION * self._state.config.time_scale
            if now <= max(self._expires(task), kept_until):
                return
            del self._tasks[key]
