"""What task arguments look like wherever Celery and Flower show them.

Solve and page tasks carry page URLs (query strings may hold secrets), image
payloads of up to 100 kB, cookies, form fields (passwords), proxy ids and session
lock tokens. The message itself must carry them, but everything that *shows* a task
(``task-sent``/``task-received`` events and so Flower, worker logs, ``celery inspect
reserved/active/scheduled``, Flower's worker pages) shows a redacted repr instead:

- image payloads as ``<image 12345 B base64>``;
- cookies, forms and fields named like secrets (password, token, solution, ...)
  masked as ``***``, field names kept;
- URL query and fragment values masked (``?sid=***``), URL and proxy credentials
  (``user:pass@host``) masked as ``user:***@host`` (by :func:`mask_urls_in`, the one
  helper error messages and ``captcha-tasks settings`` use too);
- the API key and the passwords in our Redis and solver URLs replaced by ``***``
  wherever they occur;
- long strings truncated.

:class:`RedactedTask` applies this at send time (``apply_async`` and ``retry`` pass
``argsrepr``/``kwargsrepr``) and, through :class:`RedactedRequest`, again in the
worker, so messages sent by other clients (``send_task``) are shown redacted too.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import inspect
import logging
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

from celery import Task
from celery.exceptions import MaxRetriesExceededError
from celery.utils.saferepr import saferepr
from celery.worker.request import Request

from .masking import MASK, mask_url, mask_urls_in

__all__ = [
    "HIDDEN",
    "MASK",
    "RedactedRequest",
    "RedactedTask",
    "known_secrets",
    "mask_url",
    "mask_urls_in",
    "redact",
    "redact_call",
    "scrub_text",
]

log = logging.getLogger(__name__)

#: What arguments that could not be redacted are shown as.
HIDDEN = "<hidden>"
#: Longest string shown whole (characters, after masking); longer ones are cut.
MAX_TEXT = 160
#: Longest ``argsrepr``/``kwargsrepr`` (Celery's own limit for them).
MAX_REPR = 1024
#: Items of a list or dict shown before ``...``.
MAX_ITEMS = 20
#: Nesting shown before ``...``.
MAX_DEPTH = 4
#: Shortest unlabelled string taken for a binary payload when it is all base64.
MIN_BLOB = 256

#: Parameter names (and dict keys, at any depth) whose values are images.
IMAGE_NAMES = frozenset({"image_b64", "image"})
#: Parameter names whose values are cookies: names kept, values masked.
COOKIE_NAMES = frozenset({"cookies", "cookie"})
#: Parameter names whose values are form fields: names kept, every value masked.
FORM_NAMES = frozenset({"form", "fields", "data"})
#: Names (parameters, dict keys) whose whole value is a secret.
_SECRET_NAME = re.compile(
    r"(?:^|[_-])(?:pass(?:word)?|passwd|pwd|secret|token|api_?key|key|auth(?:orization)?"
    r"|credentials?|csrf|xsrf|sid|session(?:id)?|solution|data_s|signature|response)$",
    re.IGNORECASE,
)
# user:password@host anywhere in a text (proxy URLs, with or without a scheme).
_USERINFO = re.compile(r"(?P<user>[^\s:/@'\"]+):(?P<password>[^\s@/'\"]+)@(?=[\w.\[\]-])")
_URL = re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\s'\"<>]+")
_DATA_URL = re.compile(r"^data:[\w/+.-]*;base64,", re.IGNORECASE)
_BASE64 = re.compile(r"^[A-Za-z0-9+/\r\n]+={0,2}$")
_MIXED = re.compile(r"^(?=[^0-9]*[0-9])(?=[^a-z]*[a-z])(?=[^A-Z]*[A-Z])")
_IMAGE_MAGIC = (b"\x89PNG", b"\xff\xd8\xff", b"GIF8", b"BM", b"RIFF")
# A task result's token in a ``task-succeeded`` event's repr (pooled tokens are
# returned by the task body itself).
_SOLUTION_REPR = re.compile(
    r"""(['"]solution['"]: )('(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*"|\{[^{}]*\})"""
)


class _Shown:
    """A value shown as its text, without quotes (``<image 12 B base64>``)."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


_secrets_of: tuple[object, tuple[str, ...]] = (None, ())


def known_secrets() -> tuple[str, ...]:
    """The API key and the passwords of our Redis and solver URLs (from the settings)."""
    global _secrets_of
    try:
        from .settings import get_settings

        settings = get_settings()
    except Exception:  # a malformed environment stops the process elsewhere
        return ()
    if _secrets_of[0] is settings:
        return _secrets_of[1]
    found = {settings.api_key}
    for url in (settings.redis_url, settings.broker_url, settings.result_backend,
                settings.state_url, settings.solver_url):  # fmt: skip
        try:
            password = urlsplit(url).password or ""
        except ValueError:
            continue
        found.update((password, unquote(password)))  # as written in URLs, and as used
    # Very short secrets would mask ordinary text; none of ours is that short.
    secrets = tuple(sorted((s for s in found if len(s) >= 4), key=len, reverse=True))
    _secrets_of = (settings, secrets)
    return secrets


def scrub_text(text: str, secrets: Iterable[str] | None = None) -> str:
    """``text`` with known secrets, ``user:pass@`` credentials and URL query values masked."""
    for secret in known_secrets() if secrets is None else secrets:
        if secret in text:
            text = text.replace(secret, MASK)
    text = mask_urls_in(text)
    if "://" in text:
        text = _URL.sub(lambda m: _mask_url(m.group(0)), text)
    if "@" in text:
        text = _USERINFO.sub(lambda m: f"{m['user']}:{MASK}@", text)
    return text


def _mask_pairs(text: str, sep: str) -> str:
    """``a=1&b`` -> ``a=***&***``: names kept, values (and bare items) masked."""
    out = []
    for item in text.split(sep):
        name, eq, _ = item.partition("=")
        out.append(f"{name}={MASK}" if eq else (MASK if item else item))
    return sep.join(out)


def _mask_url(url: str) -> str:
    try:
        parts = urlsplit(url)
        host = parts.hostname  # raises ValueError for a malformed netloc
    except ValueError:
        return _USERINFO.sub(lambda m: f"{m['user']}:{MASK}@", url)
    netloc = parts.netloc
    if "@" in netloc and host is not None:
        userinfo, _, hostport = netloc.rpartition("@")
        user, colon, _ = userinfo.partition(":")
        netloc = f"{user}:{MASK}@{hostport}" if colon else f"{MASK}@{hostport}"
    query = _mask_pairs(parts.query, "&") if parts.query else ""
    fragment = _mask_pairs(parts.fragment, "&") if "=" in parts.fragment else parts.fragment
    return urlunsplit((parts.scheme, netloc, parts.path, query, fragment))


def _cut(text: str) -> str:
    if len(text) <= MAX_TEXT:
        return text
    return f"{text[:MAX_TEXT]} ...(+{len(text) - MAX_TEXT} chars)"


def _base64_size(text: str) -> int | None:
    """Decoded size of base64 ``text`` (a data URL allowed), or None if it is not base64."""
    body = "".join(_DATA_URL.sub("", text.strip(), count=1).split())
    if not body or len(body) % 4 or not _BASE64.match(body):
        return None
    return len(body) * 3 // 4 - body.count("=", -2)


def _is_image(text: str) -> bool:
    head = "".join(_DATA_URL.sub("", text.strip(), count=1).split())[:16]
    try:
        magic = base64.b64decode(head[: len(head) // 4 * 4])
    except (binascii.Error, ValueError):
        return False
    return magic.startswith(_IMAGE_MAGIC)


def _image(value: Any) -> _Shown:
    if isinstance(value, bytes | bytearray):
        return _Shown(f"<image {len(value)} B>")
    if not isinstance(value, str):
        return _Shown(f"<image: {type(value).__name__}>")
    size = _base64_size(value)
    if size is None:
        return _Shown(f"<image: {len(value)} chars, not base64>")
    return _Shown(f"<image {size} B base64>")


def _text(value: str, secrets: Sequence[str]) -> Any:
    if len(value) >= MIN_BLOB and (size := _base64_size(value)) is not None:
        if _is_image(value):
            return _Shown(f"<image {size} B base64>")
        # Encoded binary mixes cases and digits; long words and repeats are text.
        if _DATA_URL.match(value) or _MIXED.match(value):
            return _Shown(f"<data {size} B base64>")
    return _cut(scrub_text(value, secrets))


def _mask_cookies(value: Any, secrets: Sequence[str]) -> Any:
    """``a=1; b=2`` (or 2Captcha's ``a:1;b:2``) -> ``a=***; b=***``; Playwright-style
    cookie dicts keep their name, domain and path."""
    if isinstance(value, str):
        shown = []
        for item in value.split(";"):
            name, sep, _ = item.partition("=")
            if not sep:
                name, sep, _ = item.partition(":")
            shown.append(f"{name}{sep}{MASK}" if sep else (MASK if item.strip() else item))
        return _cut(scrub_text(";".join(shown), secrets))
    if isinstance(value, Mapping) and "name" in value and "value" in value:
        keep = {"name", "domain", "path"}
        return {
            str(k): (_redact(v, None, secrets, 1) if k in keep else MASK)
            for k, v in list(value.items())[:MAX_ITEMS]
        }
    return _masked_values(value, secrets, _mask_cookies)


def _mask_form(value: Any, secrets: Sequence[str]) -> Any:
    return _masked_values(value, secrets, _mask_form)


def _masked_values(value: Any, secrets: Sequence[str], each: Any) -> Any:
    if isinstance(value, Mapping):
        return {_cut(scrub_text(str(k), secrets)): each(v, secrets)
                for k, v in list(value.items())[:MAX_ITEMS]}  # fmt: skip
    if isinstance(value, list | tuple):
        return [each(v, secrets) for v in value[:MAX_ITEMS]]
    return MASK if value not in (None, "") else value


def _redact(value: Any, name: str | None, secrets: Sequence[str], depth: int) -> Any:
    if name is not None:
        lowered = name.lower()
        if lowered in IMAGE_NAMES and value is not None:
            return _image(value)
        if lowered in COOKIE_NAMES:
            return _mask_cookies(value, secrets)
        if lowered in FORM_NAMES:
            return _mask_form(value, secrets)
        if _SECRET_NAME.search(name) and value not in (None, ""):
            return MASK
    if value is None or isinstance(value, bool | int | float):
        return value
    if isinstance(value, str):
        return _text(value, secrets)
    if isinstance(value, bytes | bytearray):
        return _Shown(f"<{len(value)} bytes>")
    if depth >= MAX_DEPTH:
        return _Shown("...")
    if isinstance(value, Mapping):
        items = list(value.items())
        shown = {_cut(scrub_text(str(k), secrets)): _redact(v, str(k), secrets, depth + 1)
                 for k, v in items[:MAX_ITEMS]}  # fmt: skip
        if len(items) > MAX_ITEMS:
            shown["..."] = _Shown(f"<{len(items) - MAX_ITEMS} more>")
        return shown
    if isinstance(value, list | tuple | set | frozenset):
        seq = list(value)
        out = [_redact(v, None, secrets, depth + 1) for v in seq[:MAX_ITEMS]]
        if len(seq) > MAX_ITEMS:
            out.append(_Shown(f"<{len(seq) - MAX_ITEMS} more>"))
        return tuple(out) if isinstance(value, tuple) else out
    return _Shown(_cut(scrub_text(saferepr(value, maxlen=MAX_TEXT * 2), secrets)))


def redact(value: Any, name: str | None = None) -> Any:
    """``value`` with secrets masked and payloads shortened, ready for ``repr``;
    ``name`` is its parameter name or dict key (it decides how some values are shown)."""
    return _redact(value, name, known_secrets(), 0)


def redact_call(
    args: Any, kwargs: Any, names: Sequence[str] = (), *, limit: int = MAX_REPR
) -> tuple[str, str]:
    """``(argsrepr, kwargsrepr)`` for a call; ``names`` are the positional parameters'
    names (so ``solve_image``'s first argument is known to be the image)."""
    secrets = known_secrets()
    if isinstance(args, list | tuple):
        shown_args: Any = tuple(
            _redact(v, names[i] if i < len(names) else None, secrets, 1)
            for i, v in enumerate(args[:MAX_ITEMS])
        )
        if len(args) > MAX_ITEMS:
            shown_args += (_Shown(f"<{len(args) - MAX_ITEMS} more>"),)
    else:
        shown_args = _redact(args, None, secrets, 1)
    if isinstance(kwargs, Mapping):
        shown_kwargs: Any = _redact(dict(kwargs), None, secrets, 0)
    else:
        shown_kwargs = _redact(kwargs, None, secrets, 1)
    return (
        scrub_text(saferepr(shown_args, maxlen=limit, maxlevels=MAX_DEPTH + 1), secrets),
        scrub_text(saferepr(shown_kwargs, maxlen=limit, maxlevels=MAX_DEPTH + 1), secrets),
    )


def _positional_names(task: Any) -> tuple[str, ...]:
    """Names of ``task.run``'s positional parameters (``self`` excluded for bound tasks)."""
    cached: tuple[str, ...] | None = getattr(task, "_redaction_names", None)
    if cached is None:
        positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
        try:
            params = inspect.signature(task.run).parameters.values()
            cached = tuple(p.name for p in params if p.kind in positional)
        except (TypeError, ValueError):
            cached = ()
        with contextlib.suppress(AttributeError):
            task._redaction_names = cached
    return cached


def task_reprs(task: Any, args: Any, kwargs: Any) -> tuple[str, str]:
    """``(argsrepr, kwargsrepr)`` for a call of ``task``; never raises (a failure shows
    nothing rather than losing the message or showing the real arguments)."""
    try:
        return redact_call(args if args is not None else (), kwargs if kwargs is not None else {},
                           _positional_names(task))  # fmt: skip
    except Exception:
        log.exception("could not redact the arguments of %s", getattr(task, "name", task))
        return HIDDEN, HIDDEN


class RedactedTask(Task):  # type: ignore[misc]  # celery ships no type hints
    """A Task mixin: events, logs, ``inspect`` and Flower show redacted arguments.

    Cooperative with the other mixins (no ``__init__``, no hooks). Reprs passed by
    the caller are kept, after known secrets are scrubbed from them.
    """

    abstract = True
    Request = "captcha_tasks.redaction:RedactedRequest"

    def redacted_reprs(self, args: Any, kwargs: Any) -> tuple[str, str]:
        return task_reprs(self, args, kwargs)

    def _with_reprs(self, args: Any, kwargs: Any, options: dict[str, Any]) -> None:
        if options.get("argsrepr") is None or options.get("kwargsrepr") is None:
            argsrepr, kwargsrepr = self.redacted_reprs(args, kwargs)
            if options.get("argsrepr") is None:
                options["argsrepr"] = argsrepr
            if options.get("kwargsrepr") is None:
                options["kwargsrepr"] = kwargsrepr
        secrets = known_secrets()
        for field in ("argsrepr", "kwargsrepr"):
            options[field] = scrub_text(str(options[field]), secrets)

    def apply_async(self, args: Any = None, kwargs: Any = None, *rest: Any, **options: Any) -> Any:
        self._with_reprs(args, kwargs, options)
        return super().apply_async(args, kwargs, *rest, **options)

    def retry(
        self,
        args: Any = None,
        kwargs: Any = None,
        exc: BaseException | None = None,
        throw: bool = True,
        eta: Any = None,
        countdown: float | None = None,
        max_retries: int | None = None,
        **options: Any,
    ) -> Any:
        request = self.request
        # With only one of args/kwargs given Celery merges them with the request's;
        # apply_async then shows the merged call (it sees the final arguments).
        if (args is None) == (kwargs is None):
            shown_args = request.args if args is None else args
            shown_kwargs = request.kwargs if kwargs is None else kwargs
            self._with_reprs(shown_args, shown_kwargs, options)
        try:
            return super().retry(args, kwargs, exc, throw, eta, countdown, max_retries,
                                 **options)  # fmt: skip
        except MaxRetriesExceededError as error:
            if exc is not None and error is exc:
                raise
            # Celery's message carries the real arguments; it is stored and logged.
            argsrepr, kwargsrepr = self.redacted_reprs(request.args, request.kwargs)
            raise MaxRetriesExceededError(
                f"Can't retry {self.name}[{request.id}] args:{argsrepr} kwargs:{kwargsrepr}"
            ) from None


class RedactedRequest(Request):  # type: ignore[misc]  # celery ships no type hints
    """A worker's view of a message of a :class:`RedactedTask`: reprs computed again
    from the real arguments (whoever sent it), and shown by ``inspect`` in any mode."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        argsrepr, kwargsrepr = task_reprs(self._task, self._args, self._kwargs)
        self._argsrepr = argsrepr
        self._kwargsrepr = kwargsrepr
        # What the execution's own logs read (trace.py: request.get("argsrepr")).
        self._request_dict["argsrepr"] = argsrepr
        self._request_dict["kwargsrepr"] = kwargsrepr

    def info(self, safe: bool = False) -> dict[str, Any]:
        """``inspect reserved/scheduled/active`` and ``query_task``: the reprs, never the
        real arguments (Celery shows them unless ``active(safe=True)``)."""
        shown: dict[str, Any] = super().info(safe=True)
        return shown

    def send_event(self, type: str, **fields: Any) -> None:
        secrets = known_secrets()
        for name in ("exception", "traceback"):
            if isinstance(fields.get(name), str):
                fields[name] = scrub_text(fields[name], secrets)
        result = fields.get("result")
        if isinstance(result, str):
            fields["result"] = scrub_text(_SOLUTION_REPR.sub(rf"\1'{MASK}'", result), secrets)
        super().send_event(type, **fields)
