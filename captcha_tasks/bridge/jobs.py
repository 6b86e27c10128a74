"""Solve jobs as they travel on NATS, and the result messages sent back: pure functions.

A job is a JSON object in the format of the NATS guide (../shared/seeds/002): a
``task_id`` chosen by the publisher, the 2Captcha ``in.php`` ``method`` and that
method's parameters under their ``in.php`` names::

    {"task_id": "task_0", "method": "userrecaptcha",
     "sitekey": "6Le-wvkSAAAAAPBMRTvw0Q4Muexq9bi0DJwx_mJ-",
     "pageurl": "https://example.com/page/0"}

:func:`parse_job` reads the bytes, :func:`task_call` maps the job to the solve task
that does the work (name, positional and keyword arguments), :func:`solved` and
:func:`failed` build the messages published on the results subject. Nothing here
validates captcha parameters beyond their shape: the solve tasks do that at the
edge and fail with :class:`~captcha_tasks.errors.InvalidTaskInput`, which comes
back as an error result like any other failure.
"""

from __future__ import annotations

import dataclasses
import json
import re
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from ..errors import CaptchaTasksError, InvalidTaskInput
from ..provider.captchas import CAPTCHA_CLASSES, Captcha
from ..provider.kind import parameters
from ..redaction import scrub_text

__all__ = [
    "IGNORED_PARAMS",
    "METHODS",
    "Job",
    "TaskCall",
    "failed",
    "jetstream_task_id",
    "parse_job",
    "solved",
    "task_call",
]

#: Error code of a message that is not a job (not JSON, not an object, no usable task_id).
BAD_JOB = "BAD_JOB"
#: Error code of a job whose ``method`` the bridge does not map to a solve task.
UNKNOWN_METHOD = "UNKNOWN_METHOD"
#: Longest ``task_id`` accepted (it is echoed in every result).
MAX_TASK_ID = 256
#: Longest error text published (the code comes first, so it always survives the cut).
MAX_ERROR = 500

#: ``in.php`` transport parameters a job may carry and the bridge ignores: the workers
#: use their own key, and results always come back as JSON on the results subject.
IGNORED_PARAMS = frozenset({"key", "json", "soft_id", "header_acao"})

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
# Deterministic Celery task ids for JetStream messages (uuid5 in this namespace).
_NAMESPACE = uuid.UUID("5b0f3c52-8a4e-4c1e-9a57-2f6a1c7d9e21")


@dataclasses.dataclass(frozen=True)
class Job:
    """A decoded job: its ``task_id`` (echoed verbatim), ``method`` and other fields."""

    task_id: str | int
    method: object
    params: Mapping[str, object]


@dataclasses.dataclass(frozen=True)
class TaskCall:
    """The solve task a job becomes: ``task`` (Celery name), ``args`` and ``kwargs``."""

    task: str
    args: tuple[object, ...]
    kwargs: dict[str, object]


def parse_job(data: bytes) -> Job:
    """Decode a job. Raises :class:`InvalidTaskInput` (code ``BAD_JOB``) when the message
    is not a JSON object with a usable ``task_id``: then no result can name the job."""
    try:
        obj = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InvalidTaskInput(f"job is not JSON: {exc}", BAD_JOB) from None
    if not isinstance(obj, dict):
        raise InvalidTaskInput(f"job must be a JSON object, got {type(obj).__name__}", BAD_JOB)
    task_id = obj.get("task_id")
    if isinstance(task_id, bool) or not isinstance(task_id, str | int):
        raise InvalidTaskInput("job needs a task_id (a string or an integer)", BAD_JOB)
    if isinstance(task_id, str) and (
        not task_id or len(task_id) > MAX_TASK_ID or _CONTROL.search(task_id)
    ):
        raise InvalidTaskInput(f"task_id must be 1 to {MAX_TASK_ID} printable characters", BAD_JOB)
    params = {name: value for name, value in obj.items() if name not in ("task_id", "method")}
    return Job(task_id, obj.get("method"), params)


# -- in.php values to task arguments ---------------------------------------------------
# in.php takes every value as text ("1", "0.3"); the tasks take typed values. A value
# that does not convert is passed as it is, for the task's validation to name it.


def _flag(value: object) -> object:
    if isinstance(value, str) and value.strip().lower() in ("0", "1", "true", "false"):
        return value.strip().lower() in ("1", "true")
    if isinstance(value, int) and not isinstance(value, bool) and value in (0, 1):
        return bool(value)
    return value


def _integer(value: object) -> object:
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    return value


def _number(value: object) -> object:
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return value
    return value


def _same(value: object) -> object:
    return value


@dataclasses.dataclass(frozen=True)
class _Method:
    task: str
    #: Positional arguments: (argument, accepted job field names, first one preferred).
    positional: tuple[tuple[str, tuple[str, ...]], ...]
    #: Keyword arguments: job field name -> (argument name, converter).
    options: Mapping[str, tuple[str, Callable[[object], object]]]


#: A parameter's in.php value converted by its type (a
#: :class:`~captcha_tasks.provider.kind.Parameter`'s annotation); any other is passed as
#: it is.
_CONVERTERS: Mapping[str, Callable[[object], object]] = {
    "bool": _flag,
    "bool | None": _flag,
    "int": _integer,
    "int | None": _integer,
    "float": _number,
    "float | None": _number,
}


def _method(kind: type[Captcha]) -> _Method:
    """The job fields of ``kind``'s solve task, from its declaration: each parameter under
    its in.php names (:func:`~captcha_tasks.provider.kind.in_php`) and its own, the
    positional ones first; ``provider`` and ``exclude`` are the workers' to choose."""
    positional: list[tuple[str, tuple[str, ...]]] = []
    options: dict[str, tuple[str, Callable[[object], object]]] = {}
    for param in parameters(kind):
        if param.name in ("provider", "exclude"):
            continue
        names = tuple(dict.fromkeys((*param.in_php, param.name)))
        if param.required:
            positional.append((param.name, names))
        else:
            convert = _CONVERTERS.get(param.annotation, _same)
            options.update(dict.fromkeys(names, (param.name, convert)))
    return _Method(f"captcha_tasks.solve_{kind.type}", tuple(positional), options)


#: Every kind's job fields, by its ``type``.
_METHODS: Mapping[str, _Method] = {
    cls.type: _method(cls) for cls in CAPTCHA_CLASSES.values() if cls.solve_call is not None
}
#: The in.php methods that name one kind alone (its declaration's ``in_php``).
_BY_NAME: Mapping[str, _Method] = {
    cls.solve_call.in_php: _METHODS[cls.type]
    for cls in CAPTCHA_CLASSES.values()
    if cls.solve_call is not None and cls.solve_call.in_php
}

#: ``in.php`` methods the bridge maps (reCAPTCHA v3 is ``userrecaptcha`` + ``version=v3``;
#: image to coordinates is ``base64`` + ``coordinatescaptcha=1``, a grid ``base64`` +
#: ``recaptcha=1``).
METHODS: Mapping[str, str] = {
    "userrecaptcha": "captcha_tasks.solve_recaptcha_v2 (version=v3: solve_recaptcha_v3)",
    "base64": "captcha_tasks.solve_image (coordinatescaptcha=1: solve_coordinates, "
    "recaptcha=1: solve_grid)",
    **{name: method.task for name, method in _BY_NAME.items()},
}


def _method_of(job: Job) -> tuple[_Method, dict[str, object]]:
    params = {k: v for k, v in job.params.items() if k not in IGNORED_PARAMS}
    method = job.method
    if not isinstance(method, str) or not method:
        raise InvalidTaskInput("job needs a method (an in.php method name)", BAD_JOB)
    if method == "userrecaptcha":
        version = params.pop("version", "v2")
        if version not in ("v2", "v3"):
            raise InvalidTaskInput(f"userrecaptcha: version must be v2 or v3, got {version!r}")
        return _METHODS["recaptcha_v3" if version == "v3" else "recaptcha_v2"], params
    if method == "base64":
        coordinates = _flag(params.pop("coordinatescaptcha", False))
        if not isinstance(coordinates, bool):
            raise InvalidTaskInput("base64: coordinatescaptcha must be 0 or 1")
        grid = _flag(params.pop("recaptcha", False))
        if not isinstance(grid, bool):
            raise InvalidTaskInput("base64: recaptcha must be 0 or 1")
        if grid and coordinates:
            raise InvalidTaskInput("base64: recaptcha=1 and coordinatescaptcha=1 together")
        if grid:
            return _METHODS["grid"], params
        return _METHODS["coordinates" if coordinates else "image"], params
    found = _BY_NAME.get(method)
    if found is None:
        shown = method if len(method) <= 40 else method[:37] + "..."
        raise InvalidTaskInput(
            f"unknown method {shown!r}; known: {', '.join(METHODS)}", UNKNOWN_METHOD
        )
    return found, params


def task_call(job: Job) -> TaskCall:
    """The solve task for ``job``. Raises :class:`InvalidTaskInput`: code ``UNKNOWN_METHOD``
    for a method without a task, ``INVALID_INPUT`` for missing or unknown parameters (named,
    values never quoted: a job may carry cookies)."""
    spec, params = _method_of(job)
    name = job.method
    args: list[object] = []
    for _argument, fields in spec.positional:
        present = [field for field in fields if field in params]
        if not present:
            raise InvalidTaskInput(f"{name}: missing {' or '.join(fields)}")
        if len(present) > 1:
            raise InvalidTaskInput(f"{name}: give one of {', '.join(present)}, not both")
        args.append(params.pop(present[0]))
    kwargs: dict[str, object] = {}
    for field in sorted(params):
        if field not in spec.options:
            raise InvalidTaskInput(
                f"{name}: unknown parameter(s) "
                f"{', '.join(sorted(f for f in params if f not in spec.options))}; "
                f"allowed: {', '.join(sorted(spec.options))}"
            )
        argument, convert = spec.options[field]
        if argument in kwargs:
            raise InvalidTaskInput(f"{name}: {argument} given twice")
        kwargs[argument] = convert(params[field])
    return TaskCall(spec.task, tuple(args), kwargs)


def jetstream_task_id(stream: str, stream_seq: int, stored_at: str) -> str:
    """The Celery task id of a JetStream message: the same for every delivery of that
    message (so a redelivered job finds its solve instead of starting a second one), and
    different for a message of a stream that was deleted and created again."""
    return str(uuid.uuid5(_NAMESPACE, f"nats-js:{stream}:{stream_seq}:{stored_at}"))


# -- result messages ---------------------------------------------------------------


def solved(task_id: str | int, result: Mapping[str, Any], celery_task_id: str) -> dict[str, Any]:
    """The result message of a solve: ``solution`` is the token or text (a dict for
    GeeTest, GeeTest v4 and AWS WAF, a list of points for coordinates);
    ``celery_task_id`` is what ``report_solution`` takes. ``user_agent`` comes too where
    the token is bound to a browser (a challenge-mode Turnstile): it is useless without.
    ``provider_name`` (the configured provider that solved it: ``main``, ``default``;
    the result's ``provider``) comes when the result names one (a token served from a
    pool, with several providers configured, does not)."""
    message = {
        "task_id": task_id,
        "solution": result.get("solution"),
        "celery_task_id": celery_task_id,
    }
    if result.get("user_agent"):
        message["user_agent"] = result["user_agent"]
    # A 0.2 worker's result names it ``provider_name`` (its ``provider``: the protocol).
    name = result.get("provider") if "protocol" in result else result.get("provider_name")
    if isinstance(name, str) and name:
        message["provider_name"] = name
    return message


def failed(
    task_id: str | int | None, error: BaseException | str, celery_task_id: str | None = None
) -> dict[str, Any]:
    """The result message of a job that failed: ``error`` starts with the code
    (``ERROR_CAPTCHA_UNSOLVABLE: ...``), ``code`` is the code alone. Secrets the settings
    know of (the API key, Redis passwords) and URL query values are masked."""
    if isinstance(error, CaptchaTasksError):
        code = error.code or type(error).__name__
    elif isinstance(error, BaseException):
        code = type(error).__name__
    else:
        code = error.split(":", 1)[0]
    text = scrub_text(str(error) or code)
    if len(text) > MAX_ERROR:
        text = text[: MAX_ERROR - 3] + "..."
    message: dict[str, Any] = {"task_id": task_id, "error": text, "code": code}
    if celery_task_id is not None:
        message["celery_task_id"] = celery_task_id
    return message
