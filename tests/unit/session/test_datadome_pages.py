"""DataDome's challenge found in a page as its script finds it: an HTTP 403 whose page
carries the ``dd`` object, the captcha's URL built from it; the demo site's page is one."""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
import requests

from captcha_tasks.errors import ChallengeRejected
from captcha_tasks.provider import DataDome
from captcha_tasks.session.pages import Page, detect_challenge, find_datadome
from captcha_tasks.settings import Settings
from captcha_tasks.worker.page_tasks import _set_bound_cookies
from captcha_tasks_sandbox.demo_widgets import datadome_page

PAGE = "https://shop.example.com/account?x=1"
DD = (
    "<html><body><script>var dd={'rt':'c','cid':'AHrlqAAAAAMA==','hsh':'789361B6','t':'fe',"
    "'s':40070,'e':'3e53','host':'geo.captcha-delivery.com','cookie':'6QAE~x'}</script>"
    '<script src="https://ct.captcha-delivery.com/c.js"></script></body></html>'
)


def test_the_captcha_url_is_built_from_the_dd_object() -> None:
    challenge = find_datadome(Page(403, PAGE, DD))
    assert challenge is not None
    assert (challenge.type, challenge.action) == ("datadome", PAGE)
    parts = urlsplit(challenge.captcha_url)
    assert (parts.scheme, parts.netloc, parts.path) == (
        "https",
        "geo.captcha-delivery.com",
        "/captcha/",
    )
    query = {k: v[0] for k, v in parse_qs(parts.query).items()}
    assert query == {
        "initialCid": "AHrlqAAAAAMA==",
        "hash": "789361B6",
        "cid": "6QAE~x",
        "t": "fe",
        "referer": PAGE,
        "s": "40070",
        "e": "3e53",
    }
    DataDome(challenge.captcha_url, PAGE, "UA")  # what solve_datadome takes
    assert detect_challenge(Page(403, PAGE, DD)) == challenge


@pytest.mark.parametrize(
    ("status", "html"),
    [
        (200, DD),  # DataDome answers its challenge with 403
        (403, DD.replace("'rt':'c'", "'rt':'i'")),  # an interstitial: no captcha to solve
        (403, DD.replace("geo.captcha-delivery.com", "evil.example")),
        (403, DD.replace("var dd=", "var other=")),
        (403, DD.replace("'s':40070", "'s':40070,")),  # not an object JSON can read
        (403, "<h1>Forbidden</h1>"),
    ],
)
def test_anything_else_is_no_datadome_challenge(status: int, html: str) -> None:
    assert find_datadome(Page(status, PAGE, html)) is None


def test_the_demo_sites_page_is_found_and_a_banned_ip_reads_as_t_bv() -> None:
    for banned, t in ((False, "fe"), (True, "bv")):
        challenge = find_datadome(Page(403, PAGE, datadome_page("shop", "c00kie", banned)))
        assert challenge is not None
        query = parse_qs(urlsplit(challenge.captcha_url).query)
        assert (query["t"], query["cid"]) == ([t], ["c00kie"])


class _Task:
    """What _set_bound_cookies reads of a page task: its settings, proxy id, session."""

    def __init__(self, proxy_id: str) -> None:
        self.settings = Settings.from_env({"CAPTCHA_TASKS_ALLOWED_DOMAINS": "127.0.0.1:9"})
        self.proxy_id = proxy_id
        self.session = requests.Session()

    def browser(self) -> requests.Session:
        return self.session


def _solved(proxy_id: str, agent: str) -> dict[str, Any]:
    cookie = {"name": "datadome", "value": "v", "set_cookie": "datadome=v", "domain": ""}
    return {"solution": cookie, "proxy_id": proxy_id, "user_agent": agent, "source": "api"}


@pytest.mark.parametrize(
    ("proxy_id", "agent", "changed"),
    [("p2", None, "proxy"), ("p1", "Mozilla/5.0 (another)", "user agent")],
)
def test_a_cookie_is_not_sent_from_another_identity(
    proxy_id: str, agent: str | None, changed: str
) -> None:
    task = _Task("p1")
    mine = str(task.session.headers["User-Agent"])
    with pytest.raises(ChallengeRejected, match=f"this worker's {changed} changed") as info:
        _set_bound_cookies(
            task, _solved(proxy_id, agent or mine), "http://127.0.0.1:9/p", "datadome"
        )  # type: ignore[arg-type]
    assert "not sent" in str(info.value)
    assert list(task.session.cookies) == []  # nothing set, nothing requested (port 9)
