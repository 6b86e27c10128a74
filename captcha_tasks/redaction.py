"""Hiding secrets wherever a text or a task's arguments are shown.

URL passwords: :func:`mask_url` and :func:`mask_urls_in` mask ``scheme://user:pw@`` as
``scheme://user:***@`` in a URL or in any text that may quote one. :mod:`.errors`
(every message), :mod:`.settings` (``captcha-tasks settings``, ``repr``) and the
worker's logs mask through them.

Known secrets: :func:`known_secrets` (the API keys and the passwords in our Redis and
solver URLs, which the settings hand this module) and :func:`mask_secrets` (any
given secrets replaced by ``***`` wherever they occur, as the provider clients do with
what an answer quotes of a request).

Task arguments: solve and page tasks carry page URLs (query strings may hold secrets),
image payloads of up to 100 kB, cookies, form fields (passwords), proxy ids and
session lock tokens. The message itself must carry them, but everything that *shows* a
task (``task-sent``/``task-received`` events and so Flower, worker logs, ``celery
inspect reserved/active/scheduled``, Flower's worker pages) shows a redacted repr
(:func:`redact`, :func:`redact_args`, :func:`scrub_result_repr`) instead:

- image payloads as ``<image 12345 B base64>``;
- cookies, forms and fields named like secrets (password, token, solution, ...)
  masked as ``***``, field names kept;
- URL query and fragment values masked (``?sid=***``, :func:`mask_url_values`), URL
  and proxy credentials (``user:pass@host``) masked as ``user:***@host``
  (:func:`mask_urls_in`, :func:`mask_credentials_in`);
- the API key and the passwords in our Redis and solver URLs replaced by ``***``
  wherever they occur;
- long strings truncated.

Pure functions: no Celery, no Redis, nothing of the package (errors and settings import
this module, and the settings name where :func:`known_secrets` reads from:
:func:`read_secrets_from`). :class:`captcha_tasks.worker.redacted.RedactedTask` applies
the policy to task arguments at send time (``apply_async`` and ``retry`` pass
``argsrepr``/``kwargsrepr``) and, through its ``RedactedRequest``, again in the worker,
so messages sent by other clients (``send_task``) are shown redacted too.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit, urlunsplit

__all__ = [
    "HIDDEN",
    "MASK",
    "known_secrets",
    "mask_credentials_in",
    "mask_secrets",
    "mask_url",
    "mask_url_values",
    "mask_urls_in",
    "read_secrets_from",
    "redact",
    "redact_args",
    "scrub_result_repr",
    "scrub_text",
]

#: What a secret is shown as.
MASK = "***"

# The start of a URL: a scheme (RFC 3986) and "://", not inside a longer word.
_SCHEME = re.compile(r"(?<![A-Za-z0-9+.-])[A-Za-z][A-Za-z0-9+.-]*://")
# From a quote inside a URL's authority: the rest of a userinfo up to its "@".
_USERINFO_REST = re.compile(r"[^\s/?#@]*@")
# The ";" that starts the next URL of a list (``sentinel://h1;sentinel://h2``).
_NEXT_URL = re.compile(r";(?=[A-Za-z][A-Za-z0-9+.-]*://)")
# user:password@host anywhere in a text (proxy URLs, with or without a scheme).
_USERINFO = re.compile(r"(?P<user>[^\s:/@'\"]+):(?P<password>[^\s@/'\"]+)@(?=[\w.\[\]-])")


def _mask_authority(rest: str) -> str:
    """``rest`` (what follows ``scheme://``) with its password replaced by ``***``.

    The userinfo is what :func:`urllib.parse.urlsplit` takes it to be (up to the last
    ``@`` before the first ``/``, ``?`` or ``#``), so ``:p@ss@host`` loses ``p@ss``.
    A password holding ``/``, ``?`` or ``#`` unencoded makes the URL ambiguous
    (``user:pa/ss@host`` parses as host ``user``, ``u:p@ss/w@host`` as host ``ss``):
    the mask then runs to a later ``@`` unless what lies before it reads as a path or
    query (an ``=`` in it, or the ``@`` right after a ``/``, as in ``/@user``). A user
    name alone (``user@host``) is kept, as in ``user:***@host``.
    """
    netloc_end = len(rest)
    for stop in "/?#":
        found = rest.find(stop)
        if 0 <= found < netloc_end:
            netloc_end = found
    netloc = rest[:netloc_end]
    last = rest.rfind("@")
    if last < 0:
        return rest
    between = rest[netloc_end:last]
    later = last >= netloc_end and "=" not in between and not between.endswith("/")
    at = netloc.rfind("@")
    if at >= 0:
        user, has_password, _ = netloc[:at].partition(":")
        if not has_password:
            return rest
        return f"{user}:{MASK}{rest[last if later else at :]}"
    host_end = netloc.find("]") + 1 if netloc.startswith("[") else 0  # [::1]:port
    colon = netloc.find(":", host_end)
    if colon < 0 or netloc[colon + 1 :].isdigit() or not later:  # host:port/path@...
        return rest
    return f"{netloc[:colon]}:{MASK}{rest[last:]}"


def mask_url(url: str) -> str:
    """``url`` with the password of its userinfo masked: ``redis://:pw@h:6379/0`` ->
    ``redis://:***@h:6379/0``, ``https://user:pw@h/p`` -> ``https://user:***@h/p``.

    Everything else is kept as written (host, port, path, query). A string that is not
    a ``scheme://`` URL is returned as it is.
    """
    scheme = _SCHEME.match(url)
    if scheme is None or "@" not in url:
        return url
    if _NEXT_URL.search(url):  # sentinel://:pw@h1;sentinel://h2 (kombu's alternates)
        return ";".join(mask_url(part) for part in _NEXT_URL.split(url))
    return url[: scheme.end()] + _mask_authority(url[scheme.end() :])


def _run_end(text: str, begin: int, end: int, quote: str | None) -> int:
    """Where the URL starting at ``begin`` ends: whitespace, the quote it was opened
    with (unless escaped), or ``end`` (the next URL)."""
    i = begin
    while i < end:
        char = text[i]
        if char.isspace() or (char == quote and not _in_userinfo(text, begin, i, end)):
            return i
        i += 2 if char == "\\" and quote is not None else 1
    return min(i, end)


def _in_userinfo(text: str, begin: int, i: int, end: int) -> bool:
    """Whether the quote at ``i`` is a password's character rather than the end of the
    quoted URL: it comes before any ``/?#@`` of the authority and an ``@`` follows it
    before whitespace or a path (``url="http://:"@h``). Ambiguous text is read the way
    that masks more."""
    if any(stop in text[begin:i] for stop in "/?#@"):
        return False
    return _USERINFO_REST.match(text, i, end) is not None


def mask_urls_in(text: str) -> str:
    """``text`` with the password of every ``scheme://user:password@`` in it masked
    (``scheme://user:***@``): in messages, reprs and log lines.

    Idempotent; the rest of the text is kept as written. ``user@host`` (no password)
    and scheme-less ``user:pass@host`` are left to :func:`scrub_text`.
    """
    if "://" not in text or "@" not in text:
        return text
    starts = list(_SCHEME.finditer(text))
    out: list[str] = []
    last = 0
    for n, match in enumerate(starts):
        begin = match.end()
        if begin < last:
            continue
        end = starts[n + 1].start() if n + 1 < len(starts) else len(text)
        before = text[match.start() - 1] if match.start() > 0 else ""
        stop = _run_end(text, begin, end, before if before in ("'", '"') else None)
        out += [text[last:begin], _mask_authority(text[begin:stop])]
        last = stop
    out.append(text[last:])
    return "".join(out)


def mask_credentials_in(text: str) -> str:
    """``text`` with every ``user:password@host`` masked as ``user:***@host``, with or
    without a scheme (proxies are often written ``user:pw@203.0.113.5:8080``)."""
    return _USERINFO.sub(lambda m: f"{m['user']}:{MASK}@", text)


def _mask_pairs(text: str, sep: str) -> str:
    """``a=1&b`` -> ``a=***&***``: names kept, values (and bare items) masked."""
    out = []
    for item in text.split(sep):
        name, eq, _ = item.partition("=")
        out.append(f"{name}={MASK}" if eq else (MASK if item else item))
    return sep.join(out)


def mask_url_values(url: str) -> str:
    """``url`` as task arguments show it: its userinfo masked (``user:***@host``, and a
    user name alone as ``***@host``) and every query and fragment value masked, names
    kept: ``https://u:pw@h/p?sid=1&x=2#t=3`` -> ``https://u:***@h/p?sid=***&x=***#t=***``.

    A URL :func:`urllib.parse.urlsplit` cannot read gets :func:`mask_credentials_in`.
    """
    try:
        parts = urlsplit(url)
        host = parts.hostname  # raises ValueError for a malformed netloc
    except ValueError:
        return mask_credentials_in(url)
    netloc = parts.netloc
    if "@" in netloc and host is not None:
        userinfo, _, hostport = netloc.rpartition("@")
        user, colon, _ = userinfo.partition(":")
        netloc = f"{user}:{MASK}@{hostport}" if colon else f"{MASK}@{hostport}"
    query = _mask_pairs(parts.query, "&") if parts.query else ""
    fragment = _mask_pairs(parts.fragment, "&") if "=" in parts.fragment else parts.fragment
    return urlunsplit((parts.scheme, netloc, parts.path, query, fragment))


def mask_secrets(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every one of ``secrets`` replaced by ``***`` wherever it occurs
    (empty ones ignored). Mask before cutting a text short: a secret cut in two would
    no longer match."""
    for secret in secrets:
        if secret and secret in text:
            text = text.replace(secret, MASK)
    return text


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
# A URL in a text, up to whitespace, a quote or an angle bracket.
_URL = re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\s'\"<>]+")
_DATA_URL = re.compile(r"^data:[\w/+.-]*;base64,", re.IGNORECASE)
_BASE64 = re.compile(r"^[A-Za-z0-9+/\r\n]+={0,2}$")
_MIXED = re.compile(r"^(?=[^0-9]*[0-9])(?=[^a-z]*[a-z])(?=[^A-Z]*[A-Z])")
_IMAGE_MAGIC = (b"\x89PNG", b"\xff\xd8\xff", b"GIF8", b"BM", b"RIFF")
# A task result's token in a ``task-succeeded`` event's repr (pooled tokens are
# returned by the task body itself): a string, or a dict whose values may be dicts
# (Cloudflare's ``cookies`` and ``headers``).
_SOLUTION_REPR = re.compile(
    r"""(['"]solution['"]: )('(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*"|\{(?:[^{}]|\{[^{}]*\})*\})"""
)


class _Shown:
    """A value shown as its text, without quotes (``<image 12 B base64>``)."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


#: Where :func:`known_secrets` reads them: :mod:`captcha_tasks.settings` names itself
#: when it is imported (:func:`read_secrets_from`), as the settings sit above this module
#: and import it. Until then, none are known.
_source: Callable[[], tuple[str, ...]] = tuple


def read_secrets_from(source: Callable[[], tuple[str, ...]]) -> None:
    """Make ``source`` what :func:`known_secrets` returns (the settings' secrets)."""
    global _source
    _source = source


def known_secrets() -> tuple[str, ...]:
    """The API keys and the passwords of our Redis and solver URLs: the settings' secrets
    (:func:`captcha_tasks.settings.known_secrets`), longest first."""
    return _source()


def scrub_text(text: str, secrets: Iterable[str] | None = None) -> str:
    """``text`` with known secrets, ``user:pass@`` credentials and URL query values masked."""
    text = mask_secrets(text, known_secrets() if secrets is None else secrets)
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
