"""Cloudflare's challenge page: checked when built, each provider's wire format
(CapSolver's AntiCloudflareTask, CapMonster Cloud's TurnstileTask in cf_clearance mode),
the proxy every provider requires, one solution shape whatever the provider, the
catalogue's cells with their sources, the sandbox's checks and solutions as each
provider documents them, and the page found as Cloudflare serves it."""

from __future__ import annotations

import base64
from typing import Any

import pytest
import requests

from captcha_tasks.errors import ChallengeRejected, InvalidTaskInput, ProviderUnavailable
from captcha_tasks.provider import CloudflareChallenge, Proxy
from captcha_tasks.provider.answers import classic_solution, json_solution
from captcha_tasks.provider.captchas import for_type
from captcha_tasks.provider.json_dialects import dialect_for
from captcha_tasks.provider.json_tasks import task_for
from captcha_tasks.provider.kinds.cloudflare_challenge import MAX_HTML
from captcha_tasks.provider.offers import (
    NEVER_SOLVED,
    SOURCES,
    catalogue,
    check_offered,
    offered_by,
    refusal,
)
from captcha_tasks.redaction import scrub_result_repr
from captcha_tasks.session.pages import Page, detect_challenge, find_cloudflare
from captcha_tasks.settings import Settings
from captcha_tasks.worker.page_tasks import _set_bound_cookies
from captcha_tasks_sandbox.demo_widgets import cloudflare_page
from captcha_tasks_sandbox.json_protocol import JsonError, dialect_code, parse_task, solution
from captcha_tasks_sandbox.protocol import ApiError, parse_submission

PAGE = "https://shop.example.com/products"
UA = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 Chrome/131.0.0.0"
HTML, _ = cloudflare_page("shop.example.com", "/products")
PROXY = Proxy("10.1.2.3", 8080, "HTTP", "user", "secret")
CF = CloudflareChallenge(PAGE, user_agent=UA, html=HTML)
BARE = CloudflareChallenge(PAGE)
CLEARANCE = "Vfh0Kq3_oQ2Fq9UuXf3xw0k6vJ1b5m3e4r5t6y7u8i9-1733570000-1.2.1.1-AbCd"


def test_good_values_build_and_bad_ones_are_refused_by_field() -> None:
    assert CF.pageurl == PAGE and CF.html == HTML
    assert "html" not in repr(CF)  # a page's worth of text is not shown
    bad: list[tuple[str, dict[str, Any]]] = [
        ("pageurl", {"pageurl": "ftp://x"}),
        ("user_agent", {"user_agent": "a\nb"}),
        ("user_agent", {"user_agent": "x" * 513}),
        ("html", {"html": 12}),
        ("html", {"html": "  "}),
        ("html", {"html": "<p>\x00</p>"}),
        ("html", {"html": "x" * (MAX_HTML + 1)}),
    ]
    for field, change in bad:
        values: dict[str, Any] = {"pageurl": PAGE, **change}
        with pytest.raises(InvalidTaskInput, match=f"CloudflareChallenge.{field}"):
            CloudflareChallenge(**values)
    CloudflareChallenge(PAGE, html="<html>\n\t<body>line breaks are HTML's</body></html>")


def test_capsolvers_task_is_its_anti_cloudflare_task_through_the_proxy() -> None:
    task = task_for(dialect_for("capsolver"), CF, PROXY)
    assert task == {
        "type": "AntiCloudflareTask",
        "websiteURL": PAGE,
        "userAgent": UA,
        "html": HTML,
        "proxy": "http:10.1.2.3:8080:user:secret",
    }
    assert task_for(dialect_for("capsolver"), BARE, PROXY).keys() == {
        "type",
        "websiteURL",
        "proxy",
    }


def test_capmonsters_task_is_turnstile_in_cf_clearance_mode_with_the_page_as_base64() -> None:
    task = task_for(dialect_for("capmonster"), CF, PROXY)
    assert (task["type"], task["cloudflareTaskType"], task["websiteURL"]) == (
        "TurnstileTask",
        "cf_clearance",
        PAGE,
    )
    assert base64.b64decode(task["htmlPageBase64"]).decode() == HTML
    assert task["userAgent"] == UA and task["websiteKey"]
    assert (task["proxyAddress"], task["proxyPort"], task["proxyType"]) == (
        "10.1.2.3",
        8080,
        "http",
    )


@pytest.mark.parametrize("provider", ["capsolver", "capmonster"])
def test_every_provider_that_offers_it_requires_a_proxy(provider: str) -> None:
    assert refusal(provider, CF, proxied=True) is None
    reason = refusal(provider, CF, proxied=False)
    assert reason is not None and "without a proxy" in reason


def test_capmonster_without_the_page_or_the_user_agent_is_refused_before_anything_is_sent() -> None:
    for captcha in (BARE, CloudflareChallenge(PAGE, user_agent=UA)):
        with pytest.raises(InvalidTaskInput, match="user_agent and html") as info:
            check_offered("capmonster", captcha, proxied=True)
        assert info.value.code == "TYPE_NOT_OFFERED"
    assert offered_by(BARE) == ["capsolver"]
    assert offered_by(CF) == ["capsolver", "capmonster"]


def test_the_others_do_not_offer_it_and_every_cell_has_its_own_source() -> None:
    for provider in ("2captcha", "2captcha-v2", "anticaptcha", "captchaai"):
        with pytest.raises(InvalidTaskInput, match=f"provider {provider}") as info:
            check_offered(provider, CF, proxied=True)  # type: ignore[arg-type]
        assert info.value.code == "TYPE_NOT_OFFERED"
    for provider, row in catalogue().items():
        cell = row["cloudflare_challenge"]
        offered = "cloudflare_challenge" not in NEVER_SOLVED[provider]
        assert (cell.state == "offered") == offered, provider
        assert cell.source and cell.source != SOURCES[provider]["*"], provider


# One solution shape whatever the provider.

SHAPE = {"cookies": {"cf_clearance": CLEARANCE}, "headers": {"User-Agent": UA}}


def test_every_providers_answer_becomes_the_one_shape() -> None:
    # CapMonster Cloud: the cookie alone; CapSolver: cookies (with any others), the same
    # value as token (not taken for a token) and its user agent; CaptchaAI's res.php: the value.
    capmonster = json_solution({"cf_clearance": CLEARANCE})
    assert for_type("cloudflare_challenge", capmonster, user_agent=UA) == SHAPE  # type: ignore[arg-type]
    capsolver = {"cookies": {"cf_clearance": CLEARANCE}, "token": CLEARANCE, "userAgent": UA}
    assert json_solution(capsolver) == {"cookies": {"cf_clearance": CLEARANCE}}
    more = {"cookies": {"cf_clearance": CLEARANCE, "__cf_bm": "bm"}, "token": CLEARANCE}
    found = for_type("cloudflare_challenge", json_solution(more), user_agent=UA)  # type: ignore[arg-type]
    assert found == {"cookies": more["cookies"], "headers": {"User-Agent": UA}}
    classic = for_type("cloudflare_challenge", classic_solution(CLEARANCE), user_agent=UA)
    assert classic == SHAPE
    # An AWS WAF cookie at CapMonster (cookies["aws-waf-token"]) still reads as one.
    assert json_solution({"cookies": {"aws-waf-token": "abc"}}) == {"aws_waf_token": "abc"}


@pytest.mark.parametrize(
    "answer",
    [
        {"cf_clearance": ""},
        {"cf_clearance": None},
        {"cookies": {"cf_clearance": 5}},
        {"cookies": {"cf_clearance": "ok", "": "x"}},
    ],
)
def test_a_malformed_answer_is_refused_not_handed_on(answer: dict[str, Any]) -> None:
    with pytest.raises(ProviderUnavailable):
        json_solution(answer)


def test_an_answer_without_the_cookie_or_the_user_agent_is_refused() -> None:
    with pytest.raises(ProviderUnavailable):
        for_type("cloudflare_challenge", {"token": "x"}, user_agent=UA)
    with pytest.raises(ProviderUnavailable):
        for_type("cloudflare_challenge", CLEARANCE, user_agent=None)


def test_the_cookie_is_masked_in_a_results_event_repr() -> None:
    shown = scrub_result_repr(repr({"solution": SHAPE, "type": "cloudflare_challenge"}))
    assert CLEARANCE not in shown and "cloudflare_challenge" in shown


# The sandbox: each provider's checks, codes and solution fields.


def _classic(**changes: str) -> dict[str, str]:
    params = {
        "method": "cloudflare_challenge",
        "pageurl": PAGE,
        "proxy": "user:secret@10.1.2.3:8080",
        "proxytype": "HTTP",
    }
    params.update(changes)
    return {k: v for k, v in params.items() if v != "-"}


def test_sandbox_in_php_takes_captchaais_method_and_refuses_it_without_a_proxy() -> None:
    sub = parse_submission(_classic(), {}, 100, 10_000)
    assert (sub.kind, sub.hostname) == ("cloudflare_challenge", "shop.example.com")
    assert sub.user_agent  # a default browser's when none was given
    assert parse_submission(_classic(userAgent=UA), {}, 100, 10_000).user_agent == UA
    for broken in (_classic(proxy="-"), _classic(pageurl="x"), _classic(html="<p>no</p>")):
        with pytest.raises(ApiError):
            parse_submission(broken, {}, 100, 10_000)


CAPSOLVER = {"type": "AntiCloudflareTask", "websiteURL": PAGE, "proxy": "10.1.2.3:8080:u:p"}
CAPMONSTER = {
    "type": "TurnstileTask",
    "cloudflareTaskType": "cf_clearance",
    "websiteURL": PAGE,
    "websiteKey": "xxxxxxxxxx",
    "userAgent": UA,
    "htmlPageBase64": base64.b64encode(HTML.encode()).decode(),
    "proxyType": "http",
    "proxyAddress": "10.1.2.3",
    "proxyPort": 8080,
}


@pytest.mark.parametrize("dialect", ["capsolver", "capmonster"])
def test_sandbox_json_takes_each_dialects_task_and_refuses_it_without_what_it_requires(
    dialect: str,
) -> None:
    task = CAPSOLVER if dialect == "capsolver" else CAPMONSTER
    sub, name = parse_task(dialect, task, 100, 10_000)
    assert (name, sub.kind) == (task["type"], "cloudflare_challenge")
    proxyless = {k: v for k, v in task.items() if not k.startswith("proxy")}
    broken: list[dict[str, Any]] = [proxyless, {**task, "websiteURL": "x"}]
    if dialect == "capmonster":
        broken += [{**task, "htmlPageBase64": "***"}, {**task, "userAgent": ""}]
        broken.append({k: v for k, v in task.items() if k != "htmlPageBase64"})
    else:
        broken.append({**task, "html": "<p>a page with no challenge</p>"})
    for each in broken:
        with pytest.raises(JsonError):
            parse_task(dialect, each, 100, 10_000)


@pytest.mark.parametrize(
    ("dialect", "task"),
    [
        ("2captcha-v2", CAPSOLVER),
        ("anticaptcha", CAPSOLVER),
        ("capmonster", CAPSOLVER),
        ("capsolver", {**CAPMONSTER, "type": "AntiTurnstileTaskProxyLess"}),
    ],
)
def test_sandbox_json_refuses_it_where_the_dialect_lacks_it(
    dialect: str, task: dict[str, Any]
) -> None:
    with pytest.raises(JsonError) as info:
        parse_task(dialect, task, 100, 10_000)
    assert dialect_code(dialect, info.value.code) != "ERROR_INTERNAL_SERVER_ERROR"


def test_sandbox_solutions_carry_the_cookie_as_each_dialect_documents() -> None:
    assert solution("capmonster", "cloudflare_challenge", CLEARANCE, UA) == {
        "cf_clearance": CLEARANCE
    }
    capsolver = solution("capsolver", "cloudflare_challenge", CLEARANCE, UA)
    assert capsolver == {
        "cookies": {"cf_clearance": CLEARANCE},
        "token": CLEARANCE,
        "userAgent": UA,
    }
    # What the product reads from each is the same cookie.
    shapes = [
        json_solution(solution(d, "cloudflare_challenge", CLEARANCE, UA))
        for d in ("capsolver", "capmonster")
    ]
    assert shapes[0] == shapes[1] == {"cookies": {"cf_clearance": CLEARANCE}}


# The page, found as Cloudflare serves it.

HEADERS = {"server": "cloudflare", "cf-mitigated": "challenge", "cf-ray": "8f0e-SBX"}


def test_the_challenge_page_is_found_by_its_status_headers_and_markers() -> None:
    challenge = find_cloudflare(Page(403, PAGE, HTML, headers=HEADERS))
    assert challenge is not None
    assert (challenge.type, challenge.action, challenge.page_html) == (
        "cloudflare_challenge",
        PAGE,
        HTML,
    )
    assert detect_challenge(Page(403, PAGE, HTML, headers=HEADERS)) == challenge
    # Marked by its header or by its markers alone; 503 as older challenge pages answer.
    unmarked = {"server": "cloudflare"}
    assert find_cloudflare(Page(503, PAGE, HTML, headers=unmarked)) is not None
    assert find_cloudflare(Page(403, PAGE, "<p>Just a moment...</p>", headers=HEADERS)) is not None
    # A page too large to send is found, its HTML left out (CapSolver's is optional).
    huge = HTML + " " * MAX_HTML
    found = find_cloudflare(Page(403, PAGE, huge, headers=HEADERS))
    assert found is not None and found.page_html == ""


BLOCKED = (
    "<title>Attention Required! | Cloudflare</title><h1>Sorry, you have been blocked</h1>"
    "<p>Error 1020 Ray ID: 8f0e</p>"
)


@pytest.mark.parametrize(
    ("status", "html", "headers"),
    [
        (200, HTML, HEADERS),  # a page about challenges is no challenge
        (403, HTML, {}),  # not from Cloudflare
        (403, HTML, {"server": "nginx", "cf-mitigated": "challenge"}),
        (403, BLOCKED, {"server": "cloudflare"}),  # a firewall block: no solve passes it
        (429, HTML, HEADERS),
    ],
)
def test_anything_else_is_no_cloudflare_challenge(
    status: int, html: str, headers: dict[str, str]
) -> None:
    assert find_cloudflare(Page(status, PAGE, html, headers=headers)) is None


class _Task:
    """What _set_bound_cookies reads of a page task: its settings, proxy id, session."""

    def __init__(self, proxy_id: str) -> None:
        self.settings = Settings.from_env({"CAPTCHA_TASKS_ALLOWED_DOMAINS": "127.0.0.1:9"})
        self.proxy_id = proxy_id
        self.session = requests.Session()

    def browser(self) -> requests.Session:
        return self.session


@pytest.mark.parametrize(
    ("proxy_id", "agent", "changed"),
    [("p2", None, "proxy"), ("p1", "Mozilla/5.0 (another)", "user agent")],
)
def test_the_cookie_is_not_sent_from_another_identity(
    proxy_id: str, agent: str | None, changed: str
) -> None:
    task = _Task("p1")
    mine = str(task.session.headers["User-Agent"])
    solved = {"solution": SHAPE, "proxy_id": proxy_id, "user_agent": agent or mine}
    with pytest.raises(ChallengeRejected, match=f"this worker's {changed} changed") as info:
        _set_bound_cookies(task, solved, "http://127.0.0.1:9/p", "cloudflare_challenge")  # type: ignore[arg-type]
    assert "Cloudflare" in str(info.value) and CLEARANCE not in str(info.value)
    assert list(task.session.cookies) == []  # nothing set, nothing requested (port 9)


@pytest.mark.parametrize(
    "solution_",
    [None, "tok", {"cookies": {}}, {"cookies": {"cf_clearance": 1}}, {"name": "x", "value": "y"}],
)
def test_a_result_that_is_no_cloudflare_solve_is_refused_as_input(solution_: Any) -> None:
    task = _Task("p1")
    solved = {"solution": solution_, "proxy_id": "p1", "user_agent": "x"}
    with pytest.raises(InvalidTaskInput, match="solve_cloudflare_challenge's result"):
        _set_bound_cookies(task, solved, "http://127.0.0.1:9/p", "cloudflare_challenge")  # type: ignore[arg-type]


def test_find_captchas_names_the_solve_and_what_the_browser_adds() -> None:
    from captcha_tasks.mcp.find import find_captchas

    found = find_captchas(HTML, PAGE, 403)
    assert found == [
        {
            "type": "cloudflare_challenge",
            "tool": "solve_cloudflare_challenge",
            "arguments": {"pageurl": PAGE},
            "needs": ["user_agent", "proxy_id", "html"],
        }
    ]
    assert find_captchas(HTML, PAGE, 200) == []  # served: no challenge
    assert find_captchas(BLOCKED, PAGE, 403) == []  # a firewall block
