"""Masking the passwords of URLs, wherever a text may quote one.

Pure: no Celery, nothing of the package but this. :mod:`.errors` (every message),
:mod:`.settings` (``captcha-tasks settings``, ``repr``) and :mod:`.redaction` (task
arguments in events, logs and Flower) all mask through :func:`mask_url` and
:func:`mask_urls_in`. Task arguments hide more than a password (a page URL's query may
hold a session id): :func:`mask_url_values` and :func:`mask_credentials_in` are for them.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit, urlunsplit

__all__ = ["MASK", "mask_credentials_in", "mask_url", "mask_url_values", "mask_urls_in"]

#: What a secret is shown as.
MASK = "***"

# The start of a URL: a scheme (RFC 3986) and "://", not inside a longer word.
_SCHEME = re.compile(r"(?<![A-Za-z0-9+.-])[A-Za-z][A-Za-z0-9+.-]*://")
# user:password@host anywhere in a text (proxy URLs, with or without a scheme).
# From a quote inside a URL's authority: the rest of a userinfo up to its "@".
_USERINFO_REST = re.compile(r"[^\s/?#@]*@")
# The ";" that starts the next URL of a list (``sentinel://h1;sentinel://h2``).
_NEXT_URL = re.compile(r";(?=[A-Za-z][A-Za-z0-9+.-]*://)")
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
