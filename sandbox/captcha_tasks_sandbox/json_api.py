"""The JSON task API over the sandbox's solve state: createTask, getTaskResult,
getBalance and the report methods, each answered as the configured dialect does.

The counters, threads, billing, faults and tokens are the in.php/res.php ones
(:class:`.state.SandboxState`); a task is a captcha there, under its numeric id.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING

from .config import DEV_API_KEY, DEV_CAPSOLVER_KEY, KINDS
from .json_protocol import JsonError, error_answer, parse_task, solution
from .json_tasks import JsonTask, JsonTasks
from .protocol import ApiError
from .state import SandboxState

if TYPE_CHECKING:
    from .callbacks import CallbackSender

__all__ = ["JSON_METHODS", "REPORTS", "JsonApi", "fault_path"]

_RECAPTCHA = ("recaptcha_v2", "recaptcha_v3")
#: What CapMonster's token report covers.
_CAPMONSTER_TOKENS = (*_RECAPTCHA, "turnstile", "geetest", "geetest_v4", "funcaptcha", "aws_waf")
#: Report methods per dialect: name -> (good?, the kinds it applies to). CapSolver's
#: ``feedbackTask`` says good or bad in its body (``result.invalid``).
REPORTS: Mapping[str, Mapping[str, tuple[bool, tuple[str, ...]]]] = {
    "2captcha-v2": {"reportCorrect": (True, KINDS), "reportIncorrect": (False, KINDS)},
    "anticaptcha": {
        "reportIncorrectImageCaptcha": (False, ("image", "coordinates")),
        "reportIncorrectRecaptcha": (False, _RECAPTCHA),
        "reportCorrectRecaptcha": (True, _RECAPTCHA),
        "reportIncorrectHcaptcha": (False, ("hcaptcha",)),
    },
    "capmonster": {
        "reportIncorrectImageCaptcha": (False, ("image",)),
        "reportIncorrectTokenCaptcha": (False, _CAPMONSTER_TOKENS),
        "reportIncorrectRecaptcha": (False, _CAPMONSTER_TOKENS),  # alias
    },
    "capsolver": {"feedbackTask": (False, KINDS)},
}
#: Every method path the JSON API answers (a method of another dialect: ERROR_NO_SUCH_METHOD).
JSON_METHODS = frozenset(
    {"createTask", "getTaskResult", "getBalance", *(m for t in REPORTS.values() for m in t)}
)


def fault_path(method: str) -> str:
    """The ``fault_paths`` entry a JSON method falls under: submits are ``in.php``,
    everything else ``res.php``."""
    return "in.php" if method == "createTask" else "res.php"


class JsonApi:
    """Answers one JSON method call: ``handle(method, body) -> (HTTP status, document)``."""

    def __init__(self, state: SandboxState, callbacks: CallbackSender | None = None) -> None:
        self._state = state
        self._tasks = JsonTasks(state)
        self._callbacks = callbacks

    def wire_ids(self) -> dict[int, str]:
        """See :meth:`JsonTasks.wire_ids`."""
        return self._tasks.wire_ids()

    def handle(self, method: str, body: bytes) -> tuple[int, dict[str, object]]:
        dialect = self._state.config.dialect
        try:
            document = json.loads(body or b"{}")
        except ValueError:
            document = {}
        if not isinstance(document, dict):
            document = {}
        try:
            self._check_key(dialect, document.get("clientKey"))
            if method == "createTask":
                return 200, self._create(dialect, document)
            if method == "getTaskResult":
                return 200, self._read(document.get("taskId"))
            if method == "getBalance":
                return 200, self._balance(dialect)
            return 200, self._report(dialect, method, document)
        except JsonError as exc:
            status, answer = error_answer(dialect, exc.code)
            if dialect == "capmonster" and method == "createTask":
                answer["taskId"] = 0  # as CapMonster's createTask errors carry it
            return status, answer

    def _check_key(self, dialect: str, key: object) -> None:
        """DEV_API_KEY and the 32-character extra keys; at CapSolver, DEV_CAPSOLVER_KEY and
        the ``CAP-`` ones. CapMonster keys may carry ``__options`` (``__nocache``)."""
        if isinstance(key, str) and not self._state.config.refuse_keys:
            if dialect == "capmonster":
                key = key.partition("__")[0]
            capsolver = dialect == "capsolver"
            accepted = DEV_CAPSOLVER_KEY if capsolver else DEV_API_KEY
            extra = key in self._state.config.api_keys and key.startswith("CAP-") == capsolver
            if key == accepted or extra:
                return
        self._state.count("bad_key")
        raise JsonError("ERROR_KEY_DOES_NOT_EXIST")

    def _create(self, dialect: str, document: Mapping[str, object]) -> dict[str, object]:
        state = self._state
        config = state.config
        try:
            sub, _ = parse_task(
                dialect, document.get("task"), config.min_image_bytes, config.max_image_bytes
            )
        except JsonError:
            state.count("param_errors")
            raise
        # CapSolver reads images synchronously: the solution comes with the createTask answer.
        immediate = dialect == "capsolver" and sub.kind in ("image", "grid")
        try:
            captcha_id = state.submit(sub, immediate=immediate)
        except ApiError as exc:
            raise JsonError(exc.code) from None
        raw = document.get("task")
        cookie = isinstance(raw, Mapping) and raw.get("cookieSolution") is True
        task = self._tasks.add(captcha_id, sub.kind, config.price, sub.user_agent, cookie)
        task.tiles = int(sub.hints.get("tiles", "0")) if sub.kind == "grid" else 0
        if immediate:
            return self._result(task, poll=False)
        url = document.get("callbackUrl")
        if self._callbacks is not None and isinstance(url, str):
            self._callbacks.callback_url(captcha_id, url, lambda: self.callback_body(task))
        answer: dict[str, object] = {"errorId": 0, "taskId": task.wire_id}
        if dialect == "capsolver":
            answer["status"] = "idle"
        return answer

    def _read(self, raw_id: object) -> dict[str, object]:
        """getTaskResult: refused reads (unknown, too many, too fast) are polls too."""
        try:
            task = self._tasks.read(raw_id)
        except JsonError:
            self._state.count("polls")
            raise
        return self._result(task, poll=True)

    def _result(self, task: JsonTask, poll: bool) -> dict[str, object]:
        """A task's state as getTaskResult answers it (errors raised as JsonError)."""
        dialect = task.dialect
        answer: dict[str, object] = {"errorId": 0}
        if dialect == "capsolver":
            answer["taskId"] = task.wire_id
        try:
            reply = self._state.get(str(task.captcha_id), poll=poll)
        except ApiError as exc:
            if exc.code != "CAPCHA_NOT_READY":
                raise JsonError(exc.code) from None
            # CapSolver: a task nobody has picked up yet is "idle" (its first read here).
            idle = dialect == "capsolver" and task.reads <= 1
            answer["status"] = "idle" if idle else "processing"
            if dialect == "capmonster":
                answer.update(errorCode=None, errorDescription=None)
            return answer
        # Turnstile challenge mode: the user agent comes with the answer.
        agent = str(reply.extra.get("useragent", ""))
        found = solution(
            dialect,
            task.kind,
            reply.request,
            agent or task.user_agent,
            bool(agent),
            task.cookie,
            tiles=task.tiles,
        )
        answer.update(status="ready", solution=found)
        if dialect in ("2captcha-v2", "anticaptcha"):
            answer.update(_billing(task))
        return answer

    def callback_body(self, task: JsonTask) -> dict[str, object]:
        """What a ``callbackUrl`` receives: the getTaskResult answer (errors included)."""
        try:
            return self._result(task, poll=False)
        except JsonError as exc:
            return error_answer(task.dialect, exc.code)[1]

    def _balance(self, dialect: str) -> dict[str, object]:
        balance = float(self._state.get_balance().plain)
        answer: dict[str, object] = {"errorId": 0, "balance": balance}
        if dialect == "capsolver":
            answer["packages"] = []
        return answer

    def _report(
        self, dialect: str, method: str, document: Mapping[str, object]
    ) -> dict[str, object]:
        methods = REPORTS[dialect]
        if method not in methods:
            raise JsonError("ERROR_NO_SUCH_METHOD")
        good, kinds = methods[method]
        task = self._tasks.get(document.get("taskId"))
        if dialect == "capsolver":
            result = document.get("result")
            if not isinstance(result, dict) or not isinstance(result.get("invalid"), bool):
                raise JsonError("ERROR_INCORRECT_SESSION_DATA")
            good = not result["invalid"]
        if task.kind not in kinds:
            raise JsonError("ERROR_NO_SUCH_CAPCHA_ID")  # e.g. an image report for a token
        try:
            self._state.report(str(task.captcha_id), good=good)
        except ApiError as exc:
            raise JsonError(exc.code) from None
        if dialect == "capsolver":
            return {"errorId": 0, "message": "ok"}
        return {"errorId": 0, "status": "success"}


def _billing(task: JsonTask) -> dict[str, object]:
    """2Captcha's and Anti-Captcha's extra result fields; both send ``cost`` as a string,
    Anti-Captcha ``solveCount`` too (docs/PROVIDERS.md D14)."""
    end = task.created_wall + max(0.0, task.ready_at - task.created)
    anticaptcha = task.dialect == "anticaptcha"
    return {
        "cost": f"{task.cost:.6f}" if anticaptcha else f"{task.cost:.5f}",
        "ip": "127.0.0.1",
        "createTime": int(task.created_wall),
        "endTime": int(end),
        "solveCount": "1" if anticaptcha else 1,
    }
