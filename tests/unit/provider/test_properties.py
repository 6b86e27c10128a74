"""Property-based checks of every edge that takes outside input: bad input is refused with
a typed error and loses nothing.

For arbitrary arguments, each public task and each validator either accepts them or
raises :class:`~captcha_tasks.errors.InvalidTaskInput` (or another error of the one
hierarchy) naming the argument; never ``TypeError``, ``KeyError``, ``OverflowError``
and friends. What is accepted yields provider parameters that are plain, encodable
strings without secrets, and the API key travels only in the POST body.

Tasks run eagerly (``task.apply``) against the session's Redis under a key prefix of
their own, with a solver URL nobody listens on; target pages go through a fake resolver
and a fake HTTP transport, and the provider client through a recording session, so
nothing here leaves the machine.
"""

from __future__ import annotations

import base64
import dataclasses
import inspect
import io
import math
import socket
import string
from collections.abc import Iterator
from typing import Any

import pytest
import requests
import urllib3
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from captcha_tasks import (
    fill_token_pool,
    report_solution,
    solve_geetest,
    solve_hcaptcha,
    solve_image,
    solve_recaptcha_v2,
    solve_recaptcha_v3,
    solve_turnstile,
)
from captcha_tasks.errors import (
    CaptchaTasksError,
    ClientError,
    InvalidTaskInput,
    SolverError,
    TargetNotAllowed,
)
from captcha_tasks.provider import (
    GeeTest,
    HCaptcha,
    Image,
    Proxy,
    RecaptchaV2,
    RecaptchaV3,
    SolverClient,
    Turnstile,
)
from captcha_tasks.provider.captchas import Captcha
from captcha_tasks.provider.classic_params import proxy_params, submit_files, submit_params
from captcha_tasks.provider.protocol import parse_many, parse_response
from captcha_tasks.session.pages import check_url
from captcha_tasks.session.proxies import ProxyView, masked, proxy_id
from captcha_tasks.settings import Settings, get_settings
from captcha_tasks.worker.page_tasks import fetch_page, submit_challenge
from tests.support.canned_http import CannedResponse

#: Deterministic, bounded, no example database: the same run on every machine. No
#: deadline: a shared 2-core CI machine makes per-example timings meaningless.
PROPS = settings(derandomize=True, database=None, max_examples=200, deadline=None)
#: Properties that run a task eagerly (a few Redis round trips each).
TASK_PROPS = settings(PROPS, max_examples=100)

V2_KEY = "6Le-wvkSAAAAAPBMRTvw0Q4Muexq9bi0DJwx_mJ-"
TURNSTILE_KEY = "0x4AAAAAAABkMYinukE8nzY"
HCAPTCHA_KEY = "a5f74b19-9e45-40e0-b45d-47ff91b7a6c2"
GT = "f1ab2cdefa3456789012345678901234"
CHALLENGE = "12345678abc90123d45678ef90123a456b"
PAGE = "https://example.com/login"
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256))
PNG_B64 = base64.b64encode(PNG).decode()
API_KEY = "0123456789abcdef0123456789ABCDEF"

# -- strategies -----------------------------------------------------------------------

#: Numbers that break naive range checks: NaN fails every comparison, 10**400 does
#: not fit a float, infinities pass one-sided bounds.
ODD_NUMBERS = st.sampled_from(
    [math.nan, math.inf, -math.inf, -0.0, 1e308, 10**400, -(10**400), 2**63, -1, 0, 1, 2]
)
#: Characters that must never reach the provider inside a field.
CONTROL = st.sampled_from(["\x00", "\x01", "\t", "\n", "\r", "\x1b", "\x7f", "\x85", "\x9f"])
#: Lone surrogates: JSON carries them (escaped), UTF-8 cannot encode them.
SURROGATES = st.sampled_from(["\ud800", "a\udfffb", V2_KEY[:-1] + "\udc80"])
NASTY_TEXT = st.one_of(
    st.just(""),
    st.text(st.sampled_from(" \t\n\u00a0\u2028\u3000"), min_size=1, max_size=4),
    st.builds(lambda a, c, b: a + c + b, st.text(max_size=12), CONTROL, st.text(max_size=12)),
    st.builds(
        lambda c, n: c * n, st.sampled_from("aZ9_-/%é"), st.sampled_from([101, 257, 2049, 5000])
    ),
    SURROGATES,
    st.text(max_size=40),
)
BAD_URLS = st.one_of(
    st.sampled_from(
        [
            "javascript:alert(1)",
            "ftp://example.com/",
            "file:///etc/passwd",
            "http://",
            "https://",
            "http://[::1",
            "http://[",
            "https://example.com:99999/",
            "https://example.com:-1/",
            "https://example.com:port/",
            "data:text/html,x",
            "//example.com/x",
            "example.com/login",
            "http:example.com",
            "https:///x",
            "https://example.com/\x00",
            "https://exa mple.com/",
            " https://example.com/",
            "https://exa\nmple.com/",
            "https://user:pw@example.com/",
            "https://" + "a" * 64 + ".example.com/",
            "https://a..example.com/",
            "https://example.com/" + "a" * 3000,
        ]
    ),
    st.builds(lambda s, rest: f"{s}://{rest}", st.text(max_size=8), st.text(max_size=30)),
    st.builds(lambda s, rest: f"{s}://{rest}", st.sampled_from(["http", "https"]), NASTY_TEXT),
)
#: What a worker can receive in a JSON message: no bytes, no tuples, str keys.
JSON_SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(), ODD_NUMBERS, NASTY_TEXT, BAD_URLS
)
JSON_JUNK = st.recursive(
    JSON_SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=6,
)
#: What a Python caller can pass: anything above, plus bytes, tuples and objects.
PY_JUNK = st.one_of(
    JSON_JUNK,
    st.binary(max_size=40),
    st.tuples(JSON_SCALARS),
    st.sampled_from([object(), bytearray(b"GIF89a"), {1, 2}, 1j, Ellipsis]),
)

_ALNUM = string.ascii_letters + string.digits
RECAPTCHA_KEYS = st.from_regex(r"[A-Za-z0-9_-]{20,100}", fullmatch=True)
TURNSTILE_KEYS = st.from_regex(r"[0-9]x[A-Za-z0-9_-]{6,98}", fullmatch=True)
HCAPTCHA_KEYS = st.uuids().map(str)
GTS = st.from_regex(r"[0-9a-fA-F]{32}", fullmatch=True)
CHALLENGES = st.from_regex(r"[0-9A-Za-z_-]{32,100}", fullmatch=True)
LABELS = st.from_regex(r"[a-z0-9]([a-z0-9-]{0,10}[a-z0-9])?", fullmatch=True)
HOSTS = st.lists(LABELS, min_size=1, max_size=4).map(".".join)
PAGE_URLS = st.builds(
    lambda scheme, host, port, path: f"{scheme}://{host}{port}/{path}",
    st.sampled_from(["http", "https", "HTTPS"]),
    HOSTS,
    st.sampled_from(["", ":8080", ":443", ":1"]),
    st.text(_ALNUM + "/-._~?=&%", max_size=60),
)
#: Printable text without whitespace (``spaces``: with inner spaces), no surrogates.
WORDS = st.text(st.characters(categories=("L", "N", "P", "S")), min_size=1, max_size=40)
PHRASES = st.builds(lambda a, b: f"{a} {b}", WORDS, WORDS)
SCORES = st.floats(min_value=0.0, max_value=1.0, exclude_min=True) | st.just(1)


def _image_body(magic: bytes) -> st.SearchStrategy[bytes]:
    return st.binary(min_size=100, max_size=400).map(lambda tail: magic + tail)


VALID_CAPTCHAS: st.SearchStrategy[Captcha] = st.one_of(
    st.builds(
        RecaptchaV2,
        RECAPTCHA_KEYS,
        PAGE_URLS,
        invisible=st.booleans(),
        enterprise=st.booleans(),
        data_s=st.none() | WORDS,
        cookies=st.none() | PHRASES,
        user_agent=st.none() | PHRASES,
    ),
    st.builds(
        RecaptchaV3,
        RECAPTCHA_KEYS,
        PAGE_URLS,
        action=WORDS,
        min_score=SCORES,
        enterprise=st.booleans(),
    ),
    st.builds(
        Turnstile, TURNSTILE_KEYS, PAGE_URLS, action=st.none() | WORDS, cdata=st.none() | WORDS
    ),
    st.builds(GeeTest, GTS, CHALLENGES, PAGE_URLS, api_server=st.none() | HOSTS),
    st.builds(HCaptcha, HCAPTCHA_KEYS, PAGE_URLS),
    st.builds(
        Image,
        st.sampled_from([b"\x89PNG\r\n\x1a\n", b"\xff\xd8\xff", b"GIF89a"]).flatmap(_image_body),
        numeric=st.none() | st.integers(0, 4),
        min_len=st.none() | st.integers(0, 5),
        max_len=st.none() | st.integers(5, 20),
        phrase=st.none() | st.booleans(),
        lang=st.none() | st.sampled_from(["en", "RU"]),
        textinstructions=st.none() | PHRASES,
        multipart=st.booleans(),
    ),
)

#: A valid instance of each type, and the fields a caller sets.
BASE: dict[type[Captcha], dict[str, Any]] = {
    RecaptchaV2: {"sitekey": V2_KEY, "pageurl": PAGE},
    RecaptchaV3: {"sitekey": V2_KEY, "pageurl": PAGE},
    Turnstile: {"sitekey": TURNSTILE_KEY, "pageurl": PAGE},
    GeeTest: {"gt": GT, "challenge": CHALLENGE, "pageurl": PAGE},
    HCaptcha: {"sitekey": HCAPTCHA_KEY, "pageurl": PAGE},
    Image: {"body": PNG},
}
TYPE_FIELDS = [(cls, f.name) for cls in BASE for f in dataclasses.fields(cls)]


def assert_plain_params(captcha: Captcha) -> dict[str, str]:
    """What an accepted captcha sends: strings the HTTP layer can encode, no key."""
    params = submit_params(captcha)
    assert params["method"]
    assert not {"key", "json", "proxy", "proxytype"} & set(params)
    for name, value in params.items():
        assert isinstance(name, str) and isinstance(value, str), (name, value)
        value.encode("utf-8")  # lone surrogates would only fail inside requests
        if name not in ("cookies", "userAgent", "textinstructions"):
            assert value == value.strip() and not any(c.isspace() for c in value), (name, value)
        assert not any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in value), (name, value)
    return params


# -- the captcha types ----------------------------------------------------------------


@PROPS
@given(VALID_CAPTCHAS)
def test_valid_captchas_give_plain_provider_params_without_secrets(captcha: Captcha) -> None:
    assert captcha.validate() is captcha  # the client's second check agrees with the first
    params = assert_plain_params(captcha)
    if isinstance(captcha, RecaptchaV2):
        assert "cookies" not in repr(captcha)  # session secrets
    if isinstance(captcha, Image):
        assert (params["method"] == "post") == captcha.multipart
        files = submit_files(captcha)
        assert bool(files) == captcha.multipart
        if files:
            name, body, mime = files["file"]
            assert (
                body == captcha.body and name.startswith("captcha.") and mime.startswith("image/")
            )


@PROPS
@given(type_and_field=st.sampled_from(TYPE_FIELDS), value=PY_JUNK)
# Found by these properties (each raised OverflowError or ValueError, or was accepted):
@example(type_and_field=(RecaptchaV3, "min_score"), value=10**400)
@example(type_and_field=(RecaptchaV2, "data_s"), value="\ud800")
@example(type_and_field=(Turnstile, "pageurl"), value="https://example.com/\udfff")
@example(type_and_field=(Image, "numeric"), value=10**5000)
@example(type_and_field=(RecaptchaV2, "invisible"), value=10**5000)
def test_any_field_of_any_type_is_accepted_or_refused_by_name(
    type_and_field: tuple[type[Captcha], str], value: Any
) -> None:
    cls, field = type_and_field
    fields = {**BASE[cls], field: value}
    try:
        captcha = cls(**fields)
    except InvalidTaskInput as exc:
        # The type's own field, or (min_len > max_len) the pair it belongs to.
        assert field in str(exc), str(exc)
        assert exc.message.startswith(cls.__name__), exc.message
        return
    assert_plain_params(captcha.validate(max_image_bytes=1_048_576))


@PROPS
@given(
    image_b64=st.one_of(
        PY_JUNK,
        st.just(PNG_B64),
        st.builds(
            lambda a, b: PNG_B64[:a] + b + PNG_B64[a:],
            st.integers(0, len(PNG_B64)),
            NASTY_TEXT,
        ),
    ),
    hints=st.dictionaries(
        st.sampled_from(
            [
                "numeric",
                "min_len",
                "max_len",
                "phrase",
                "regsense",
                "calc",
                "lang",
                "textinstructions",
                "colour",
                "body",
                "multipart",
            ]
        ),
        PY_JUNK,
        max_size=3,
    ),
)
def test_images_from_base64_are_accepted_or_refused_by_name(image_b64: Any, hints: Any) -> None:
    try:
        image = Image.from_base64(image_b64, **hints)
    except InvalidTaskInput as exc:
        assert exc.message.startswith("Image"), exc.message
        named = ["body", *hints] if hints else ["body"]
        assert any(name in str(exc) for name in named), str(exc)
        return
    assert_plain_params(image.validate(max_image_bytes=1_048_576))


# -- the tasks ------------------------------------------------------------------------


#: Names under this suffix resolve to a private address (the page guard refuses
#: them); every other name to a public one, whose pages a fake transport serves.
PRIVATE = "private.example.com"
PLAIN_PAGE = b"<html><body><h1>no challenge here</h1></body></html>"


_getaddrinfo = socket.getaddrinfo


def _fake_getaddrinfo(host: str, port: Any, *args: Any, **kwargs: Any) -> list[Any]:
    if not isinstance(host, str) or not host.endswith("example.com"):
        return _getaddrinfo(host, port, *args, **kwargs)  # Redis on loopback, for one
    host.encode("idna")  # what the real getaddrinfo does first (and may fail at)
    address = "10.9.8.7" if host.endswith(PRIVATE) else "93.184.215.14"
    return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, port))]


def _fake_request(session: Any, method: str, url: str, **kwargs: Any) -> requests.Response:
    response = requests.Response()
    response.status_code, response.url, response.encoding = 200, url, "utf-8"
    # A streamed answer, as requests gives with stream=True: its body read from ``raw``.
    response.raw = urllib3.HTTPResponse(
        body=io.BytesIO(PLAIN_PAGE), status=200, preload_content=False
    )
    return response


@pytest.fixture(scope="module")
def tasks_env(redis_server: Any) -> Iterator[None]:
    """A key (so tasks get past the configuration check), a solver nobody listens on,
    a key prefix of this module's own in the session's Redis, a fake resolver and a
    fake HTTP transport for target pages: nothing leaves the machine."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("CAPTCHAAI_API_KEY", API_KEY)
        patch.setenv("CAPTCHA_TASKS_SOLVER_URL", "http://127.0.0.1:9")
        patch.setenv("CAPTCHA_TASKS_KEY_PREFIX", "ctprops:")
        patch.setenv("CAPTCHA_TASKS_ALLOWED_DOMAINS", "example.com")
        patch.setattr(socket, "getaddrinfo", _fake_getaddrinfo)
        patch.setattr(requests.Session, "request", _fake_request)
        get_settings.cache_clear()
        try:
            yield
        finally:
            with redis_server.client() as conn:
                for key in conn.scan_iter("ctprops:*"):
                    conn.delete(key)
            get_settings.cache_clear()


def run_task(task: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
    """The task run eagerly; returns the result or the exception it ended with."""
    result = task.apply(args=args, kwargs=kwargs)
    if result.state == "FAILURE":
        exc = result.result
        assert isinstance(exc, CaptchaTasksError), f"{type(exc).__name__}: {exc}"
        return exc
    assert result.state in ("SUCCESS", "IGNORED"), result.state
    return result.result


#: (task, positional parameter names, keyword parameter names, valid arguments)
SOLVE_CALLS: list[tuple[Any, list[str], list[str], list[Any]]] = [
    (
        solve_recaptcha_v2,
        ["sitekey", "pageurl"],
        ["invisible", "enterprise", "data_s", "cookies", "user_agent", "proxy_id"],
        [V2_KEY, PAGE],
    ),
    (
        solve_recaptcha_v3,
        ["sitekey", "pageurl"],
        ["action", "min_score", "enterprise", "proxy_id"],
        [V2_KEY, PAGE],
    ),
    (
        solve_turnstile,
        ["sitekey", "pageurl"],
        ["action", "cdata", "proxy_id"],
        [TURNSTILE_KEY, PAGE],
    ),
    (
        solve_image,
        ["image_b64"],
        ["numeric", "min_len", "max_len", "phrase", "regsense", "calc", "lang", "textinstructions"],
        [PNG_B64],
    ),
    (solve_geetest, ["gt", "challenge", "pageurl"], ["api_server"], [GT, CHALLENGE, PAGE]),
    (solve_hcaptcha, ["sitekey", "pageurl"], ["proxy_id"], [HCAPTCHA_KEY, PAGE]),
]
#: The word a refusal of each argument names (the image is checked as ``Image.body``).
SHOWN_AS = {"image_b64": "image"}


def _assert_names(exc: CaptchaTasksError, name: str) -> None:
    assert isinstance(exc, InvalidTaskInput), repr(exc)
    assert SHOWN_AS.get(name, name).lower() in str(exc).lower(), (name, str(exc))


@TASK_PROPS
@given(data=st.data())
def test_solve_tasks_accept_or_refuse_each_argument_by_name(tasks_env: None, data: Any) -> None:
    task, positional, keywords, valid = data.draw(st.sampled_from(SOLVE_CALLS), label="task")
    name = data.draw(st.sampled_from(positional + keywords), label="argument")
    value = data.draw(JSON_JUNK, label="value")
    args, kwargs = list(valid), {}
    if name in positional:
        args[positional.index(name)] = value
    else:
        kwargs[name] = value
    outcome = run_task(task, args, kwargs)
    if isinstance(outcome, CaptchaTasksError):
        _assert_names(outcome, name)


@TASK_PROPS
@given(
    data=st.data(),
    extra=st.dictionaries(st.text(min_size=1, max_size=12), JSON_JUNK, min_size=1, max_size=3),
)
def test_solve_tasks_refuse_unknown_options_by_name(
    tasks_env: None, data: Any, extra: dict[str, Any]
) -> None:
    task, positional, keywords, valid = data.draw(st.sampled_from(SOLVE_CALLS), label="task")
    assume(not set(extra) & set(positional + keywords))
    outcome = run_task(task, valid, extra)
    assert isinstance(outcome, InvalidTaskInput), repr(outcome)
    assert "unknown" in str(outcome) and any(key in str(outcome) for key in extra)


ALL_TASKS = [call[0] for call in SOLVE_CALLS] + [
    fill_token_pool,
    report_solution,
    fetch_page,
    submit_challenge,
]


@TASK_PROPS
@given(
    task=st.sampled_from(ALL_TASKS),
    args=st.lists(JSON_SCALARS, max_size=5),
    kwargs=st.dictionaries(
        st.sampled_from(["url", "form", "target", "correct", "x"]), JSON_SCALARS, max_size=2
    ),
)
def test_calls_that_do_not_fit_the_signature_fail_typed(
    tasks_env: None, task: Any, args: list[Any], kwargs: dict[str, Any]
) -> None:
    """What ``send_task`` from another client can deliver (``delay`` checks the
    signature on the caller's side): any arguments at all."""
    try:
        inspect.signature(task.run).bind(*args, **kwargs)
    except TypeError:
        fits = False
    else:
        fits = True
    outcome = run_task(task, args, kwargs)
    if not fits:
        assert isinstance(outcome, InvalidTaskInput), repr(outcome)
        assert task.name.rsplit(".", 1)[-1] in str(outcome), str(outcome)


@TASK_PROPS
@given(
    captcha_type=st.one_of(
        st.sampled_from(
            ["recaptcha_v2", "recaptcha_v3", "turnstile", "hcaptcha", "image", "geetest"]
        ),
        JSON_JUNK,
    ),
    name=st.sampled_from(
        ["captcha_type", "sitekey", "pageurl", "action", "min_score", "target", "adaptive"]
    ),
    value=JSON_JUNK,
)
@example(captcha_type="recaptcha_v2", name="captcha_type", value=[])  # TypeError: unhashable
@example(captcha_type="recaptcha_v2", name="target", value=math.nan)  # ValueError in int()
def test_fill_token_pool_accepts_or_refuses_by_name(
    tasks_env: None, captcha_type: Any, name: str, value: Any
) -> None:
    sitekey = TURNSTILE_KEY if captcha_type == "turnstile" else V2_KEY
    sitekey = HCAPTCHA_KEY if captcha_type == "hcaptcha" else sitekey
    call: dict[str, Any] = {
        "captcha_type": captcha_type,
        "sitekey": sitekey,
        "pageurl": PAGE,
        "target": 0,
        name: value,
    }
    outcome = run_task(fill_token_pool, [], call)
    if isinstance(outcome, CaptchaTasksError):
        assert isinstance(outcome, InvalidTaskInput), repr(outcome)
        # captcha_type decides which sitekey fits: a refusal may name either.
        named = [name, "captcha_type", "sitekey", "target"]
        assert any(n in str(outcome) for n in named), str(outcome)
    else:
        assert outcome["pool_id"] and 0 <= outcome["target"] <= 10_000


@TASK_PROPS
@given(task_id=st.one_of(JSON_JUNK, st.uuids().map(str)), correct=JSON_JUNK)
@example(task_id="e3e70682-c209-4cac-629f-6fbed82c07cd", correct="false")  # a reportgood
def test_report_solution_refuses_junk_before_the_provider(
    tasks_env: None, task_id: Any, correct: Any
) -> None:
    outcome = run_task(report_solution, [task_id], {"correct": correct})
    # No job is known under this prefix: a valid call ends with UNKNOWN_TASK, unsent.
    assert isinstance(outcome, InvalidTaskInput | ClientError), repr(outcome)
    if isinstance(outcome, InvalidTaskInput):
        assert "task_id" in str(outcome) or "correct" in str(outcome), str(outcome)
    else:
        assert outcome.code == "UNKNOWN_TASK"
        assert isinstance(correct, bool) or correct in (0, 1)


ALLOWED_URLS = st.builds(
    lambda scheme, sub, port, rest: f"{scheme}://{sub}example.com{port}{rest}",
    st.sampled_from(["http", "https", "HTTPS"]),
    st.sampled_from(["", "www.", "a.b.", "private.", "xn--bcher-kva."]),
    st.sampled_from(["", ":8443", ":80"]),
    st.one_of(
        st.just(""),
        st.builds(
            lambda lead, rest: lead + rest,
            st.sampled_from(["/", "?", "#"]),  # https://host?q has no path at all
            st.text(_ALNUM + "/-._~?=&%#", max_size=30),
        ),
    ),
)


@TASK_PROPS
@given(
    url=st.one_of(BAD_URLS, JSON_JUNK, ALLOWED_URLS),
    form=st.one_of(st.none(), JSON_JUNK, st.dictionaries(st.text(max_size=8), NASTY_TEXT)),
    isolated=st.one_of(st.booleans(), JSON_JUNK),
)
@example(url="http://[", form=None, isolated=False)  # ValueError: Invalid IPv6 URL
@example(url="https://" + "a" * 64 + ".example.com/", form=None, isolated=False)  # UnicodeError
@example(url="HTTP://EXAMPLE.COM?", form=None, isolated=False)  # a valid URL refused
@example(url="https://example.com/", form=None, isolated="no")  # taken as True
def test_fetch_page_fetches_or_refuses_with_typed_errors(
    tasks_env: None, url: Any, form: Any, isolated: Any
) -> None:
    outcome = run_task(fetch_page, [url], {"form": form, "isolated": isolated})
    if isinstance(outcome, CaptchaTasksError):
        assert isinstance(outcome, InvalidTaskInput), repr(outcome)
        if not isinstance(outcome, TargetNotAllowed):
            assert "form" in str(outcome) or "isolated" in str(outcome), str(outcome)
        return
    assert outcome["status"] == 200 and outcome["solved"] is False


@TASK_PROPS
@given(url=ALLOWED_URLS, form=st.none() | st.dictionaries(WORDS, PHRASES, max_size=3))
def test_fetch_page_accepts_every_allowed_public_url(
    tasks_env: None, url: str, form: dict[str, str] | None
) -> None:
    outcome = run_task(fetch_page, [url], {"form": form})
    if PRIVATE in url.lower().split("/")[2]:
        assert isinstance(outcome, TargetNotAllowed) and "non-public" in str(outcome)
    else:
        assert outcome == {"status": 200, "url": url, "solved": False, "source": None}


SUBMIT_ARGUMENTS = [
    "solved",
    "url",
    "action",
    "fields",
    "token_field",
    "challenge_type",
    "form",
    "host",
    "lock_token",
]


@TASK_PROPS
@given(name=st.sampled_from(SUBMIT_ARGUMENTS), value=JSON_JUNK)
@example(name="fields", value=None)  # TypeError: 'NoneType' object is not iterable
@example(name="token_field", value=[])  # TypeError: unhashable
@example(name="lock_token", value=[1])  # not a token to release a lock with
def test_submit_challenge_refuses_junk_with_typed_errors(
    tasks_env: None, name: str, value: Any
) -> None:
    call: dict[str, Any] = {
        "url": "https://example.com/page",
        "action": "https://example.com/verify",
        "fields": {"next": "/"},
        "token_field": "g-recaptcha-response",
        "challenge_type": "recaptcha_v2",
        "form": {},
        "host": "",
        "lock_token": "",
    }
    solved: Any = {"solution": "token", "source": "api"}
    if name == "solved":
        solved = value
    else:
        call[name] = value
    outcome = run_task(submit_challenge, [solved], call)
    if isinstance(outcome, CaptchaTasksError):
        assert isinstance(outcome, InvalidTaskInput), repr(outcome)
    else:
        assert outcome["status"] == 200


# -- the page guard -------------------------------------------------------------------


@PROPS
@given(url=st.one_of(BAD_URLS, PY_JUNK, PAGE_URLS))
@example(url="http://[::1")  # ValueError: Invalid IPv6 URL
@example(url="https://example.com/\x00")  # accepted
@example(url=" https://example.com/")  # accepted (urlsplit strips the space)
def test_check_url_accepts_or_refuses_with_target_not_allowed(url: Any) -> None:
    try:
        assert (
            check_url(
                url,
                Settings.from_env({"CAPTCHA_TASKS_ALLOWED_DOMAINS": "example.com"}),
                resolve=False,
            )
            == url
        )
    except TargetNotAllowed:
        return
    # Accepted: a plain http(s) URL on the allowlist, nothing a browser would rewrite.
    assert url.lower().startswith(("http://", "https://"))
    assert not any(c.isspace() or ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in url)


# -- proxies --------------------------------------------------------------------------

PASSWORDS = st.text(_ALNUM + "!#$%^&*()-_=+[]{};'\",.<>?/|~", min_size=1, max_size=24).map(
    lambda p: "Pw!" + p
)
USERS = st.text(_ALNUM + "-_.", min_size=1, max_size=16)


#: (text, the password in it or None): seller-style strings with odd parts, and junk.
PROXY_TEXTS = st.one_of(
    st.one_of(NASTY_TEXT, PY_JUNK).map(lambda value: (value, None)),
    st.builds(
        lambda scheme, user, password, host, port: (
            f"{scheme}{user}:{password}@{host}:{port}",
            password,
        ),
        st.sampled_from(["", "http://", "socks5://", "SOCKS5H://", "ftp://", "://"]),
        st.text(max_size=6),
        PASSWORDS,
        st.one_of(HOSTS, NASTY_TEXT, st.just("[::1]"), st.just("[nope]")),
        st.one_of(st.integers(-5, 70_000).map(str), NASTY_TEXT, st.sampled_from(["²", "٣", "1²"])),
    ),
    st.builds(
        lambda host, port, user, password: (f"{host}:{port}:{user}:{password}", password),
        st.one_of(HOSTS, NASTY_TEXT),
        st.sampled_from(["80", "²", "99999"]),
        USERS,
        PASSWORDS,
    ),
)


@PROPS
@given(
    text_and_password=PROXY_TEXTS,
    kind=st.one_of(st.none(), st.sampled_from(["http", "SOCKS4", "socks5h", "gopher"]), PY_JUNK),
)
@example(text_and_password=("proxy.example.com:²", None), kind=None)  # ValueError in int()
@example(text_and_password=("proxy.example.com:80", None), kind=[])  # TypeError: unhashable
def test_proxy_strings_parse_or_fail_typed_and_never_show_the_password(
    text_and_password: tuple[Any, str | None], kind: Any
) -> None:
    text, password = text_and_password
    try:
        proxy = Proxy.parse(text, kind)
    except InvalidTaskInput as exc:
        assert exc.message.startswith("Proxy"), exc.message
        assert password is None or password not in str(exc) + repr(exc)
        return
    assert proxy.type in ("HTTP", "HTTPS", "SOCKS4", "SOCKS5")
    assert 1 <= proxy.port <= 65535
    if proxy.password is not None:
        view = ProxyView(proxy_id(proxy), proxy.type, masked(proxy), None, quarantined=False)
        for shown in (str(proxy), repr(proxy), masked(proxy), proxy_id(proxy), repr(view)):
            assert proxy.password not in shown


@PROPS
@given(
    host=HOSTS | st.ip_addresses().map(str),
    port=st.integers(1, 65535),
    kind=st.sampled_from(["HTTP", "HTTPS", "SOCKS4", "SOCKS5"]),
    credentials=st.none() | st.tuples(USERS, PASSWORDS),
    form=st.sampled_from(["url", "seller"]),
)
def test_proxies_round_trip_through_the_sellers_formats(
    host: str, port: int, kind: str, credentials: tuple[str, str] | None, form: str
) -> None:
    user, password = credentials or (None, None)
    shown_host = f"[{host}]" if ":" in host else host
    if form == "seller" and credentials and ":" not in host:
        text = f"{host}:{port}:{user}:{password}"
    else:
        auth = f"{user}:{password}@" if credentials else ""
        text = f"{kind.lower()}://{auth}{shown_host}:{port}"
    proxy = Proxy.parse(text, kind)
    assert (proxy.host, proxy.port, proxy.type) == (host, port, kind)
    assert (proxy.username, proxy.password) == (user, password)
    assert proxy_params(proxy)["proxy"].endswith(f"{shown_host}:{port}")


@PROPS
@given(field=st.sampled_from(["host", "port", "type", "username", "password"]), value=PY_JUNK)
@example(field="type", value=bytearray(b"GIF89a"))  # TypeError: unhashable
@example(field="port", value=10**5000)  # ValueError from str() in the message
def test_proxy_fields_are_accepted_or_refused_by_name(field: str, value: Any) -> None:
    fields: dict[str, Any] = {"host": "proxy.example.com", "port": 8080, "type": "HTTP"}
    fields.update(username="alice", password="Pw!secret")
    fields[field] = value
    try:
        proxy = Proxy(**fields)
    except InvalidTaskInput as exc:
        assert exc.message.startswith("Proxy"), exc.message
        if field != "password" and isinstance(fields["password"], str):
            assert fields["password"] not in str(exc)
        return
    assert proxy.password is None or proxy.password not in repr(proxy) + str(proxy)


# -- the provider client --------------------------------------------------------------


class RecordingSession(requests.Session):
    """Answers every POST with a canned response (or ``answers[action]``) and records
    what was sent."""

    def __init__(
        self,
        status: int = 200,
        content_type: str = "",
        body: bytes = b"",
        answers: dict[str, bytes] | None = None,
    ) -> None:
        super().__init__()
        self.answer = (status, content_type, body)
        self.answers = answers or {}
        self.sent: list[dict[str, Any]] = []

    def post(self, url: Any, data: Any = None, **kwargs: Any) -> Any:  # type: ignore[override]
        self.sent.append({"url": url, "data": dict(data or {}), **kwargs})
        status, content_type, body = self.answer
        action = "ids" if "ids" in (data or {}) else (data or {}).get("action", "submit")
        return CannedResponse(status, content_type, self.answers.get(action, body))


#: 32 characters, recognisable: a piece of one cannot turn up in a message by chance.
API_KEYS = st.text(_ALNUM, min_size=24, max_size=24).map(lambda k: f"Kq7{k}Zx9Wv")


def _assert_key_only_in_body(key: str, client: SolverClient, sent: dict[str, Any]) -> None:
    assert sent["data"]["key"] == key
    assert key not in sent["url"]
    others = {name: value for name, value in sent["data"].items() if name != "key"}
    assert key not in repr(others) + repr(sent.get("files")) + repr(sent.get("headers"))
    assert key not in repr(client)
    assert sent["allow_redirects"] is False  # a redirect would resend the body as a GET


@PROPS
@given(
    key=API_KEYS,
    captcha=VALID_CAPTCHAS,
    proxy=st.none()
    | st.builds(
        Proxy,
        HOSTS,
        st.integers(1, 65535),
        st.sampled_from(["HTTP", "SOCKS5"]),
        USERS,
        PASSWORDS,
    ),
)
def test_the_api_key_travels_only_in_the_post_body(
    key: str, captcha: Captcha, proxy: Proxy | None
) -> None:
    assume(key not in repr(submit_params(captcha)) and (proxy is None or key not in str(proxy)))
    answers = {"ids": b"OK|token-1|token-2", "reportbad": b"OK_REPORT_RECORDED"}
    session = RecordingSession(200, "", b"OK|4242", answers=answers)
    client = SolverClient("http://solver.test", key, session=session)
    assert client.submit(captcha, proxy=proxy) == "4242"
    client.get("4242")
    client.get_many(["4242", "4343"])
    client.report("4242", correct=False)
    assert len(session.sent) == 4
    for sent in session.sent:
        _assert_key_only_in_body(key, client, sent)
    assert "key" not in str(session.headers).lower()


@PROPS
@given(
    key=API_KEYS,
    status=st.sampled_from([200, 200, 200, 302, 403, 500, 502]),
    content_type=st.sampled_from(["", "application/json", "text/html", "text/plain\x00x"]),
    body=st.one_of(
        st.binary(max_size=300),
        st.text(max_size=300).map(str.encode),
        st.sampled_from(
            [
                "OK|{k}",
                "ERROR_WRONG_USER_KEY {k}",
                "<html><title>{k}</title></html>",
                '{{"status":0,"request":"ERROR_X","error_text":"' + "z" * 110 + '{k}"}}',
                "garbage " + "y" * 60 + "{k}",
                '{{"status":1,"request":"{k}"}}',
                "<html>" + "x" * 100 + "{k}</html>",
            ]
        ).map(str.encode),
    ),
)
@example(  # the first 11 characters of the key were left in a cut-off snippet
    key="Kq7" + "a" * 24 + "Zx9Wv",
    status=200,
    content_type="",
    body=b"<html>" + b"x" * 100 + b"{k}",
)
def test_any_provider_answer_is_a_value_or_a_solver_error_without_the_key(
    key: str, status: int, content_type: str, body: bytes
) -> None:
    body = body.replace(b"{k}", key.encode())
    session = RecordingSession(status, content_type, body)
    client = SolverClient("http://solver.test", key, session=session)
    calls = [
        client.balance,
        lambda: client.get("77"),
        lambda: client.get_many(["77", "78"]),
        lambda: client.submit(HCaptcha(HCAPTCHA_KEY, PAGE)),
    ]
    for call in calls:
        try:
            call()
        except SolverError as exc:
            assert exc.code, repr(exc)
            for text in (str(exc), repr(exc), repr(exc.args)):
                # Neither the key nor a piece of it (a snippet cut off mid-key).
                assert key not in text and key[:6] not in text and key[-6:] not in text, text


@PROPS
@given(
    captcha_id=st.one_of(PY_JUNK, st.text(max_size=80)),
    field=st.sampled_from(["get", "report", "many"]),
)
def test_captcha_ids_are_checked_before_anything_is_sent(captcha_id: Any, field: str) -> None:
    session = RecordingSession(200, "", b"OK|token")
    client = SolverClient("http://solver.test", API_KEY, session=session)
    try:
        if field == "get":
            client.get(captcha_id)
        elif field == "report":
            client.report(captcha_id, correct=True)
        else:
            client.get_many([captcha_id, "12345"])
    except InvalidTaskInput as exc:
        assert "captcha_id" in str(exc)
        assert session.sent == []
    except SolverError:
        assert session.sent  # a well-formed id, sent; the canned answer did not fit
    else:
        assert session.sent


@PROPS
@given(captcha=VALID_CAPTCHAS, data=st.data())
def test_a_captcha_spoiled_after_construction_is_never_sent(captcha: Captcha, data: Any) -> None:
    field = data.draw(st.sampled_from([f.name for f in dataclasses.fields(captcha)]))
    value = data.draw(PY_JUNK)
    object.__setattr__(captcha, field, value)  # bypassing the constructor's checks
    session = RecordingSession(200, "", b"OK|1")
    client = SolverClient("http://solver.test", API_KEY, session=session)
    try:
        client.submit(captcha)
    except InvalidTaskInput as exc:
        assert field in str(exc) or (field == "body" and "Image" in str(exc)), str(exc)
        assert session.sent == []
        return
    params = assert_plain_params(captcha)
    assert session.sent and {**session.sent[0]["data"], "key": "", "json": ""} == {
        **params,
        "key": "",
        "json": "",
    }


# -- provider answers parsed without a client -----------------------------------------


@PROPS
@given(
    status=st.integers(100, 599),
    content_type=st.text(max_size=20),
    body=st.binary(max_size=200) | st.text(max_size=200),
    count=st.integers(1, 4),
)
def test_the_protocol_parser_only_raises_solver_errors(
    status: int, content_type: str, body: bytes | str, count: int
) -> None:
    for parse in (
        lambda: parse_response(status, content_type, body),
        lambda: parse_many(status, content_type, body, count),
    ):
        try:
            parse()
        except SolverError as exc:
            assert exc.code
