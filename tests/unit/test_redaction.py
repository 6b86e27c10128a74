"""Hiding secrets (:mod:`captcha_tasks.redaction`): URL passwords, known secrets, and
task arguments' reprs on the send path, in retries and in the worker's Request."""

from __future__ import annotations

import base64
import pickle
import string
from collections.abc import Callable, Iterator
from unittest import mock

import pytest
from celery.app.task import Task
from celery.contrib.testing.mocks import TaskMessage
from celery.exceptions import MaxRetriesExceededError
from hypothesis import example, given, settings
from hypothesis import strategies as st
from kombu.utils.imports import symbol_by_name

from captcha_tasks import (
    app,
    errors,
    fill_token_pool,
    get_balance,
    ping,
    report_solution,
    solve_image,
    solve_recaptcha_v2,
)
from captcha_tasks.errors import CaptchaTasksError, ProxyRejected, TargetNotAllowed
from captcha_tasks.redaction import (
    MASK,
    known_secrets,
    mask_credentials_in,
    mask_secrets,
    mask_url,
    mask_url_values,
    mask_urls_in,
    scrub_text,
)
from captcha_tasks.worker.celery_internals.request import RedactedRequest
from captcha_tasks.worker.page_tasks import fetch_page, release_session_lock, submit_challenge
from captcha_tasks.worker.redacted import (
    RedactedTask,
    _positional_names,
    redact_call,
)
from tests.support.secret_scan import leaks, scan_needles, url_passwords

API_KEY = "Unit0123456789abcdefABCDEF987654"
REDIS_PASSWORD = "R3disUnitPw"
PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(3000)).decode()


@pytest.fixture
def secrets(settings_env: Callable[..., None]) -> Iterator[None]:
    settings_env(
        CAPTCHAAI_API_KEY=API_KEY,
        CAPTCHA_TASKS_STATE_URL=f"redis://:{REDIS_PASSWORD}@127.0.0.1:6399/2",
    )
    yield


def test_every_task_of_ours_shows_redacted_arguments() -> None:
    ours = [app.tasks[name] for name in app.tasks if name.startswith("captcha_tasks.")]
    assert len(ours) >= 13
    for task in ours:
        assert isinstance(task, RedactedTask), task.name
        # A subclass (solves: SolveRequest) redacts the same way.
        assert issubclass(symbol_by_name(task.Request), RedactedRequest), task.name


def test_image_payloads_are_shortened() -> None:
    args, kwargs = solve_image.redacted_reprs((PNG,), {"numeric": 1})
    assert args == "(<image 3008 B base64>,)"
    assert kwargs == "{'numeric': 1}"
    # A data URL, and an unlabelled payload found by its content.
    assert redact_call((), {"image": "data:image/png;base64," + PNG})[1] == (
        "{'image': <image 3008 B base64>}"
    )
    assert redact_call(("x", PNG), {})[0] == "('x', <image 3008 B base64>)"
    assert solve_image.redacted_reprs(("not an image",), {})[0] == (
        "(<image: 12 chars, not base64>,)"
    )


def test_cookies_forms_and_secret_fields_are_masked_names_kept() -> None:
    _, kwargs = solve_recaptcha_v2.redacted_reprs(
        ("6Le-wvkSAAAAAPBMRTvw0Q4Muexq9bi0DJwx_mJ-", "https://example.com/"),
        {"cookies": "sid=abc; lang=en", "data_s": "one-time", "proxy_id": "0a1b2c3d4e5f"},
    )
    assert kwargs == "{'cookies': 'sid=***; lang=***', 'data_s': '***', 'proxy_id': '0a1b2c3d4e5f'}"
    # 2Captcha's cookie format, and Playwright-style cookie lists.
    assert redact_call((), {"cookies": "a:1;b:2"})[1] == "{'cookies': 'a:***;b:***'}"
    jar = [{"name": "sid", "value": "abc", "domain": "example.com", "httpOnly": True}]
    assert redact_call((), {"cookies": jar})[1] == (
        "{'cookies': [{'name': 'sid', 'value': '***', 'domain': 'example.com', 'httpOnly': '***'}]}"
    )
    _, kwargs = fetch_page.redacted_reprs(
        ("https://shop.example.com/login",), {"form": {"user": "bob", "password": "hunter2"}}
    )
    assert kwargs == "{'form': {'user': '***', 'password': '***'}}"
    args, kwargs = submit_challenge.redacted_reprs(
        ({"solution": "03AF-token", "source": "api"},),
        {"fields": {"csrf": "t0k"}, "token_field": "g-recaptcha-response", "lock_token": "x"},
    )
    assert args == "({'solution': '***', 'source': 'api'},)"
    assert kwargs == (
        "{'fields': {'csrf': '***'}, 'token_field': 'g-recaptcha-response', 'lock_token': '***'}"
    )
    assert release_session_lock.redacted_reprs((), {"host": "h", "token": "t"})[1] == (
        "{'host': 'h', 'token': '***'}"
    )
    # Public identifiers stay readable.
    assert redact_call((), {"sitekey": "6Le-x", "api_key": "k"})[1] == (
        "{'sitekey': '6Le-x', 'api_key': '***'}"
    )


def test_urls_lose_query_values_fragments_and_credentials() -> None:
    url = "https://bob:pw@example.com:8443/p?session=s3cr3t&lang=en&flag#access_token=t"
    assert redact_call((url,), {})[0] == (
        "('https://bob:***@example.com:8443/p?session=***&lang=***&***#access_token=***',)"
    )
    assert redact_call(("https://example.com/#section",), {})[0] == (
        "('https://example.com/#section',)"
    )
    text = "via http://user:S3cret@10.0.0.5:3128 or user:S3cret@proxy.example.net:80"
    assert (
        scrub_text(text, ()) == "via http://user:***@10.0.0.5:3128 or user:***@proxy.example.net:80"
    )


def test_long_values_are_cut() -> None:
    args, kwargs = redact_call(("x" * 1000, list(range(100))), {"a": {"b": {"c": {"d": 1}}}})
    assert "x" * 160 + " ...(+840 chars)" in args
    assert "19, <80 more>]" in args
    assert kwargs == "{'a': {'b': {'c': {'d': 1}}}}"
    # Celery's own bound for argsrepr (saferepr may finish the item it is in).
    assert len(redact_call(tuple("y" * 150 for _ in range(20)), {})[0]) < 1024 + 160
    # Long text of one kind of character is text, not a binary payload.
    assert "<data" not in redact_call(("Mozilla" * 50,), {})[0]


def test_the_api_key_and_url_passwords_never_show(secrets: None) -> None:
    assert {API_KEY, REDIS_PASSWORD} <= set(known_secrets())
    args, kwargs = redact_call(
        (f"key={API_KEY}", [f"pw {REDIS_PASSWORD}"]), {"note": f"{API_KEY}!", "n": 1}
    )
    assert args == "('key=***', ['pw ***'])"
    assert kwargs == "{'note': '***!', 'n': 1}"


@pytest.fixture
def sent() -> Iterator[mock.MagicMock]:
    """Celery's own ``Task.apply_async``, replaced: what our override hands it."""
    with mock.patch.object(Task, "apply_async") as apply_async:
        yield apply_async


def test_apply_async_passes_the_reprs_unless_given(sent: mock.MagicMock, secrets: None) -> None:
    fetch_page.delay("https://example.com/?t=1", form={"password": "hunter2"})
    options = sent.call_args.kwargs
    assert options["argsrepr"] == "('https://example.com/?t=***',)"
    assert options["kwargsrepr"] == "{'form': {'password': '***'}}"
    assert sent.call_args.args[:2] == (
        ("https://example.com/?t=1",),
        {"form": {"password": "hunter2"}},
    )  # the message itself carries the real arguments
    ping.apply_async()
    assert sent.call_args.kwargs["argsrepr"] == "()"
    # Given reprs are kept, with known secrets scrubbed.
    get_balance.apply_async(argsrepr=f"(my {API_KEY})", kwargsrepr="{}")
    assert sent.call_args.kwargs["argsrepr"] == "(my ***)"


def test_retries_carry_the_reprs(sent: mock.MagicMock) -> None:
    fetch_page.push_request(
        id="t1",
        args=["https://example.com/login"],
        kwargs={"form": {"password": "hunter2"}},
        retries=0,
        delivery_info={"routing_key": "celery", "exchange": ""},
        called_directly=False,
    )
    try:
        retry = fetch_page.retry(countdown=1, throw=False)
    finally:
        fetch_page.pop_request()
    assert retry.sig.options["kwargsrepr"] == "{'form': {'password': '***'}}"
    assert sent.call_args.kwargs["kwargsrepr"] == "{'form': {'password': '***'}}"
    assert sent.call_args.kwargs["argsrepr"] == "('https://example.com/login',)"


def test_a_retry_past_max_retries_does_not_put_real_arguments_in_its_error(
    sent: mock.MagicMock,
) -> None:
    solve_image.push_request(
        id="t2", args=[PNG], kwargs={}, retries=0, delivery_info={}, called_directly=False
    )
    try:
        with pytest.raises(MaxRetriesExceededError) as error:
            solve_image.retry(countdown=1)  # solve tasks allow no retries
    finally:
        solve_image.pop_request()
    assert "<image 3008 B base64>" in str(error.value) and PNG[:40] not in str(error.value)
    assert not sent.called


def test_the_workers_request_recomputes_and_shows_only_the_reprs(secrets: None) -> None:
    # As sent by a client that does not redact (``send_task`` with real reprs).
    message = TaskMessage(
        "captcha_tasks.fetch_page",
        args=["https://example.com/?sid=1"],
        kwargs={"form": {"password": "hunter2"}},
        argsrepr="('https://example.com/?sid=1',)",
        kwargsrepr="{'form': {'password': 'hunter2'}}",
    )
    request = RedactedRequest(message, app=app, task=fetch_page)
    assert request.argsrepr == "('https://example.com/?sid=***',)"
    assert request.request_dict["kwargsrepr"] == "{'form': {'password': '***'}}"
    for info in (request.info(), request.info(safe=False), request.info(safe=True)):
        assert info["args"] == "('https://example.com/?sid=***',)"
        assert info["kwargs"] == "{'form': {'password': '***'}}"
    assert request.args == ["https://example.com/?sid=1"]  # execution gets the real ones

    eventer = mock.Mock(enabled=True)
    request._eventer = eventer
    request.send_event("task-succeeded", result="{'solution': '03AF-tok', 'source': 'pool'}")
    assert eventer.send.call_args.kwargs["result"] == "{'solution': '***', 'source': 'pool'}"
    request.send_event("task-failed", exception=f"Boom({API_KEY!r})", traceback=API_KEY)
    assert eventer.send.call_args.kwargs["exception"] == "Boom('***')"
    assert eventer.send.call_args.kwargs["traceback"] == MASK


def test_positional_names_come_from_the_task_signature() -> None:
    assert _positional_names(report_solution) == ("task_id", "correct")
    assert _positional_names(fill_token_pool) == ("captcha_type", "sitekey", "pageurl")
    assert _positional_names(release_session_lock) == ("request", "exc", "traceback")


# -- URL passwords: mask_url, mask_urls_in, error messages, task arguments -------------

#: Deterministic and bounded, like tests/unit/provider/test_properties.py.
PROPS = settings(derandomize=True, database=None, max_examples=300, deadline=None)
URL_PASSWORD = "Url-Pa55word"


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("redis://:pw@h:6379/0", "redis://:***@h:6379/0"),
        ("redis://default:pw@h/0", "redis://default:***@h/0"),
        ("rediss://u:p%40w@[::1]:6380/1", "rediss://u:***@[::1]:6380/1"),
        ("unix://:pw@/run/redis.sock?db=2", "unix://:***@/run/redis.sock?db=2"),
        (
            "https://user:p@ss@solver.example/in.php?x=1",
            "https://user:***@solver.example/in.php?x=1",
        ),
        ("socks5h://alice:pa/ss@10.0.0.1:1080", "socks5h://alice:***@10.0.0.1:1080"),
        ("http://u:@h/", "http://u:***@h/"),
        # Nothing to mask: kept exactly as written.
        ("https://Solver.Example:8443/p?mail=a@b.c", "https://Solver.Example:8443/p?mail=a@b.c"),
        ("http://[::1]:8080/@user", "http://[::1]:8080/@user"),
        ("https://user@h/", "https://user@h/"),
        ("redis://h:1/0", "redis://h:1/0"),
        ("h:1:user:pw", "h:1:user:pw"),
        ("", ""),
    ],
)
def test_mask_url_masks_only_the_password(url: str, shown: str) -> None:
    assert mask_url(url) == shown
    assert mask_urls_in(url) == shown


def test_mask_urls_in_finds_urls_anywhere_in_a_text() -> None:
    text = (
        'Task raised unexpected: TargetNotAllowed("no host, or credentials in the URL: '
        "'http://bob:hunter22@127.0.0.1:8/p'\") via [\"socks5://a:b'c@h:1\", "
        "'http://x:y\\'zz@h2/'] and redis://:R3d@r:6379/0, http://plain/path"
    )
    masked = mask_urls_in(text)
    for secret in ("hunter22", "b'c", "y\\'zz", "R3d"):
        assert secret not in masked
    assert "'http://bob:***@127.0.0.1:8/p'" in masked
    assert "redis://:***@r:6379/0, http://plain/path" in masked
    assert mask_urls_in(masked) == masked


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("https://u:pw@h/p?sid=1&x=2#t=3", "https://u:***@h/p?sid=***&x=***#t=***"),
        ("https://user@h/p", "https://***@h/p"),  # a user name alone is hidden too
        ("https://h/p?token", "https://h/p?***"),  # a bare item is a value
        ("https://h/p#section", "https://h/p#section"),  # an anchor, not pairs
        ("http://[::1", "http://[::1"),  # unreadable, and nothing to hide
        ("http://a:b@[::1", "http://a:***@[::1"),  # unreadable: its credentials still go
    ],
)
def test_mask_url_values_hides_what_task_arguments_may_carry(url: str, shown: str) -> None:
    assert mask_url_values(url) == shown


def test_mask_url_keeps_what_mask_url_values_hides() -> None:
    url = "https://user@h/p?sid=1"
    assert mask_url(url) == url  # only a password is masked there


def test_credentials_are_masked_with_or_without_a_scheme() -> None:
    text = "proxy u:s3cret@203.0.113.5:8080 and socks5://a:b@h:1080"
    assert mask_credentials_in(text) == "proxy u:***@203.0.113.5:8080 and socks5://a:***@h:1080"


def test_mask_secrets_replaces_each_given_secret_wherever_it_occurs() -> None:
    text = "key=K3y-123 echoed K3y-123, proxy pw Pr0xy!"
    assert mask_secrets(text, ("K3y-123", "Pr0xy!")) == "key=*** echoed ***, proxy pw ***"
    assert mask_secrets(text, ("", "absent")) == text  # an empty secret masks nothing
    assert scrub_text(text, ("K3y-123",)) == "key=*** echoed ***, proxy pw Pr0xy!"


USERS = st.text(string.ascii_letters + string.digits + "._-", max_size=12)
# Any printable password, '@' and quotes included; '/', '?' and '#' (which make a URL
# ambiguous unless percent-encoded) have examples of their own.
PASSWORDS = st.text(
    st.characters(codec="utf-8", exclude_categories=("Z", "C"), exclude_characters="/?#"),
    min_size=1,
    max_size=30,
)
HOSTS = st.sampled_from(["h", "proxy.example.com", "127.0.0.1", "[::1]", "xn--bcher-kva.ch"])
PORTS = st.sampled_from(["", ":1", ":8080"])
PATHS = st.sampled_from(["", "/", "/p?q=1", "/a/b#frag", "?x=y"])
SCHEMES = st.sampled_from(["http", "https", "redis", "rediss", "socks5h", "svn+ssh"])


@PROPS
@given(
    scheme=SCHEMES,
    user=USERS,
    password=PASSWORDS,
    host=HOSTS,
    port=PORTS,
    path=PATHS,
    before=st.sampled_from(["", "got ", "url='", 'url="', "(", "[<"]),
    quote=st.booleans(),
)
@example(
    scheme="http",
    user="u",
    password="p@ss/w?#",
    host="h",
    port="",
    path="/x",
    before="",
    quote=False,
)
@example(scheme="http", user="", password="'\"", host="h", port="", path="", before="", quote=True)
# Seen when more modules were loaded (Hypothesis draws constants from them): "Non" is
# in the repr of the error's args, "(..., None, None)", without being the password.
@example(scheme="http", user="", password="Non", host="h", port="", path="", before="", quote=False)
# A password that is the quote the URL was opened with (found once more modules loaded).
@example(
    scheme="http", user="", password='"', host="h", port="", path="", before='url="', quote=False
)
def test_no_url_password_survives_masking(
    scheme: str,
    user: str,
    password: str,
    host: str,
    port: str,
    path: str,
    before: str,
    quote: bool,
) -> None:
    url = f"{scheme}://{user}:{password}@{host}{port}{path}"
    expected = f"{scheme}://{user}:{MASK}@{host}{port}{path}"
    assert mask_url(url) == expected
    shown = f"{before}{url!r}" if quote else f"{before}{url} and more"
    masked = mask_urls_in(shown)
    assert expected in masked or f"{scheme}://{user}:{MASK}@" in masked
    if len(password) >= 3 and password not in shown.replace(password, "", 1):
        assert password not in masked, masked
        assert password not in repr(masked)
    assert mask_urls_in(masked) == masked  # idempotent
    # The error hierarchy masks its messages the same way, in every form it shows.
    error = TargetNotAllowed(f"refused {url!r:.200}")
    # The same error made from the already masked URL: whatever of the password shows in
    # it is the form's own text (``Non`` in ``(..., None, None)``), not the password.
    baseline = TargetNotAllowed(f"refused {expected!r:.200}")
    forms = (str(error), repr(error), error.message, repr(error.args))
    baselines = (str(baseline), repr(baseline), baseline.message, repr(baseline.args))
    for form, same_without in zip(forms, baselines, strict=True):
        assert f"{user}:{MASK}@" in form
        if len(password) >= 3:
            assert form.count(password) <= same_without.count(password), form


@PROPS
@given(text=st.text(max_size=80))
def test_text_without_urls_is_left_alone(text: str) -> None:
    if "://" not in text:
        assert mask_urls_in(text) == text


def test_every_error_of_the_hierarchy_masks_url_passwords() -> None:
    url = f"http://user:{URL_PASSWORD}@127.0.0.1:8080/page"
    kinds = [getattr(errors, name) for name in errors.__all__]
    assert all(issubclass(kind, CaptchaTasksError) for kind in kinds)
    for kind in kinds:
        error = kind(f"no host, or credentials in the URL: {url!r:.80}")
        shown = [str(error), repr(error), error.message, repr(error.args)]
        shown.append(repr(pickle.loads(pickle.dumps(error)).args))  # noqa: S301 - our own
        # As the result backend rebuilds it on the caller's side.
        shown.append(str(kind(*error.args)))
        for text in shown:
            assert URL_PASSWORD not in text, (kind, text)
        assert "http://user:***@127.0.0.1:8080/page" in error.message
    proxy = ProxyRejected("cannot connect to the proxy socks5h://u:S0ck5pw@h:1", code="PROXY_X")
    assert str(proxy) == "PROXY_X: cannot connect to the proxy socks5h://u:***@h:1"


def test_url_passwords_in_any_string_argument_are_masked() -> None:
    url = f"https://bob:{URL_PASSWORD}@shop.example.com/login?next=/a"
    proxy = f"socks5h://alice:{URL_PASSWORD}@10.0.0.1:1080"
    args, kwargs = redact_call(
        (url, [f"see {proxy} now"], {"nested": {"deeper": (url,)}}),
        {"note": f"use {proxy}", "pageurl": url, f"{url}": 1, "long": "x" * 150 + url},
    )
    for text in (args, kwargs):
        assert URL_PASSWORD not in text, text
        assert URL_PASSWORD[:4] not in text, text  # not even cut in half
    assert "https://bob:***@shop.example.com/login?next=***" in args
    assert "'see socks5h://alice:***@10.0.0.1:1080 now'" in args
    # Messages sent by other clients: the worker's view is masked too.
    message = TaskMessage(
        "captcha_tasks.fetch_page",
        args=[url],
        kwargs={},
        argsrepr=f"({url!r},)",
        kwargsrepr="{}",
    )
    request = RedactedRequest(message, app=app, task=fetch_page)
    assert URL_PASSWORD not in request.argsrepr + repr(request.info())
    eventer = mock.Mock(enabled=True)
    request._eventer = eventer
    request.send_event("task-failed", exception=f"Boom({url!r})", traceback=f"E: {url}")
    sent = eventer.send.call_args.kwargs
    assert URL_PASSWORD not in sent["exception"] + sent["traceback"]
    assert "bob:***@" in sent["exception"]


def test_the_secret_scan_looks_for_url_passwords_in_task_arguments() -> None:
    task_args = [
        (f"http://u:{URL_PASSWORD}@h/x",),
        {"form": {"next": "redis://:Re%40dis99@r:6379/0"}, "proxy": "socks5h://a:pa/ss99@h:1"},
        {"plain": "https://h:8443/x?mail=a@b.c", "user_only": "http://tokenuser@h/"},
    ]
    assert url_passwords(*task_args) == {URL_PASSWORD, "Re%40dis99", "Re@dis99", "pa/ss99"}
    needles = scan_needles(["Api-Key-123"], task_args=task_args)
    assert len(needles) == 5
    sources = {"worker log": f"GET http://u:{URL_PASSWORD}@h/x", "redis": "Re@dis99 ok"}
    found = leaks(sources, needles)
    assert len(found) == 2 and all(URL_PASSWORD not in f for f in found)
    assert any(f.startswith("worker log: 1 occurrence") for f in found)
    assert not leaks({"worker log": "http://u:***@h/x"}, needles)
    with pytest.raises(ValueError, match="shorter than"):
        scan_needles(task_args=[("http://u:pw@h/",)])
