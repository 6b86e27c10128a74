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

Plain functions, no Celery: :class:`captcha_tasks.worker.redacted.RedactedTask` applies
them at send time (``apply_async`` and ``retry`` pass ``argsrepr``/``kwargsrepr``) and,
through its ``RedactedRequest``, again in the worker, so messages sent by other clients
(``send_task``) are shown redacted too.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any
from urllib.parse import unquote, urlsplit

from .masking import MASK, mask_credentials_in, mask_url, mask_url_values, mask_urls_in
from .settings.redis_urls import split_urls

__all__ = [
    "HIDDEN",
    "MASK",
    "known_secrets",
    "mask_url",
    "mask_urls_in",
    "redact",
    "redact_args",
    "scrub_result_repr",
    "scrub_text",
]

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
    providers = settings.providers()  # every configured provider's key and URL
    found = {settings.redis_sentinel_password, *(p.api_key for p in providers)}
    redis = (settings.redis_url, settings.broker_url, settings.result_backend, settings.state_url)
    # A list of sentinels (sentinel://h1;sentinel://h2) is one URL each.
    for url in (
        *(part for r in redis for part in split_urls(r)),
        *(p.url for p in providers),
    ):
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
        text = _URL.sub(lambda m: mask_url_values(m.group(0)), text)
    if "@" in text:
        text = mask_credentials_in(text)
    return text


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
        return {
            _cut(scrub_text(str(k), secrets)): each(v, secrets)
            for k, v in list(value.items())[:MAX_ITEMS]
        }
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
        shown = {
            _cut(scrub_text(str(k), secrets)): _redact(v, str(k), secrets, depth + 1)
            for k, v in items[:MAX_ITEMS]
        }
        if len(items) > MAX_ITEMS:
            shown["..."] = _Shown(f"<{len(items) - MAX_ITEMS} more>")
        return shown
    if isinstance(value, list | tuple | set | frozenset):
        seq = list(value)
        out = [_redact(v, None, secrets, depth + 1) for v in seq[:MAX_ITEMS]]
        if len(seq) > MAX_ITEMS:
            out.append(_Shown(f"<{len(seq) - MAX_ITEMS} more>"))
        return tuple(out) if isinstance(value, tuple) else out
    return _Shown(_cut(scrub_text(_safe_repr(value), secrets)))


def _safe_repr(value: Any) -> str:
    try:
        return repr(value)
    except Exception:  # a broken __repr__ must not lose the message
        return f"<unrepresentable {type(value).__name__}>"


def redact(value: Any, name: str | None = None) -> Any:
    """``value`` with secrets masked and payloads shortened, ready for ``repr``;
    ``name`` is its parameter name or dict key (it decides how some values are shown)."""
    return _redact(value, name, known_secrets(), 0)


def redact_args(args: Any, kwargs: Any, names: Sequence[str] = ()) -> tuple[Any, Any]:
    """A call's arguments with secrets masked and payloads shortened, ready for ``repr``:
    ``names`` are the positional parameters' names (so ``solve_image``'s first argument
    is known to be the image)."""
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
    return shown_args, shown_kwargs


def scrub_result_repr(text: str, secrets: Iterable[str] | None = None) -> str:
    """A task result's repr (as a ``task-succeeded`` event carries it) with its
    ``solution`` token masked and known secrets scrubbed."""
    return scrub_text(_SOLUTION_REPR.sub(rf"\1'{MASK}'", text), secrets)
