"""The sandbox's demo target site over real HTTP: challenge, verify, cookies, login, stats."""

from __future__ import annotations

import html
import http.client
import logging
import os
import re
import selectors
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from click.testing import CliRunner

from captcha_tasks.errors import ConfigurationError
from captcha_tasks_dev.procs import stop_process
from captcha_tasks_sandbox import (
    DEMO_COUNTERS,
    DEMO_SITEKEY,
    DEV_API_KEY,
    SESSION_COOKIE,
    VALIDATION_COOKIE,
    VISITOR_COOKIE,
    SandboxConfig,
    SandboxServer,
    sandbox_command,
)
from tests.support.sandbox_fixtures import trusted_certificate

SCALE = 0.01  # reCAPTCHA v2 solves in 0.15 s; tokens live 1.2 s; cookies 18 s
OTHER_SITEKEY = "6LeIxAcTAAAAAJcZVRqyHh71UMIEGNQ_MXjiZKhI"
SITEKEY_RE = re.compile(r'<div class="g-recaptcha" data-sitekey="([^"]+)"></div>')


class Demo:
    """A sandbox with its demo site, a browser-like session and a solver client."""

    def __init__(self, server: SandboxServer) -> None:
        assert server.demo_url is not None
        self.server = server
        self.url = server.demo_url
        self.session = requests.Session()

    def close(self) -> None:
        self.session.close()

    def get(self, path: str, **kwargs: Any) -> requests.Response:
        return self.session.get(f"{self.url}{path}", timeout=5, **kwargs)

    def post(self, path: str, data: dict[str, str], **kwargs: Any) -> requests.Response:
        return self.session.post(
            f"{self.url}{path}", data=data, timeout=5, allow_redirects=False, **kwargs
        )

    def solve(
        self, sitekey: str | None = None, pageurl: str | None = None, *, at: Any = None
    ) -> str:
        """A reCAPTCHA v2 token from the sandbox's in.php/res.php (as a fetcher gets one);
        ``at``: another sandbox's (a peer the demo site trusts)."""
        api_url = (at or self.server).url
        submit = {
            "key": DEV_API_KEY,
            "method": "userrecaptcha",
            "googlekey": sitekey or self.server.config.demo_sitekey,
            "pageurl": pageurl or f"{self.url}/page/1",
            "json": "1",
        }
        with requests.Session() as api:
            reply = api.post(f"{api_url}/in.php", data=submit, timeout=5).json()
            assert reply["status"] == 1, reply
            poll = {"key": DEV_API_KEY, "action": "get", "id": reply["request"], "json": "1"}
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                answer = api.get(f"{api_url}/res.php", params=poll, timeout=5).json()
                if answer["request"] != "CAPCHA_NOT_READY":
                    assert answer["status"] == 1, answer
                    return str(answer["request"])
                time.sleep(0.005)
        raise AssertionError("the sandbox did not solve the captcha")

    def form(self, path: str = "/page/1") -> dict[str, str]:
        """The hidden fields of the form ``path`` serves this visitor now (a fresh load:
        the site's one-time ``csrf_token`` among them), loaded without the validation
        cookie, as a challenge page it is served."""
        visitor = self.session.cookies.get(VISITOR_COOKIE)
        cookies = {VISITOR_COOKIE: visitor} if visitor else {}
        page = requests.get(f"{self.url}{path}", cookies=cookies, timeout=5)
        if not visitor:
            self.session.cookies.set(VISITOR_COOKIE, page.cookies[VISITOR_COOKIE])
        return hidden_fields(page.text)

    def verify(self, token: str, next_path: str = "/page/1", **kwargs: Any) -> requests.Response:
        """Post ``token`` with a form loaded for it (``next_path``'s challenge)."""
        form = self.form(next_path or "/page/1") if next_path.startswith("/") else self.form()
        data = {**form, "g-recaptcha-response": token, "next": next_path}
        return self.post("/verify", data, **kwargs)

    def login(self, data: dict[str, str]) -> requests.Response:
        """Post ``data`` with the sign-in form loaded for it."""
        return self.post("/login", {**self.form("/login"), **data})

    def stats(self) -> dict[str, int]:
        return dict(self.get("/stats").json())


@pytest.fixture
def make_demo(sandbox_factory: Callable[..., SandboxServer]) -> Iterator[Callable[..., Demo]]:
    demos: list[Demo] = []

    def make(**config: Any) -> Demo:
        demo = Demo(sandbox_factory(**{"time_scale": SCALE, "demo_port": 0, **config}))
        demos.append(demo)
        return demo

    yield make
    for demo in demos:
        demo.close()


@pytest.fixture
def demo(make_demo: Callable[..., Demo]) -> Demo:
    return make_demo()


def hidden_fields(page: str) -> dict[str, str]:
    """A page's hidden form fields, as a browser posts them (entities decoded)."""
    pairs = re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)">', page)
    return {name: html.unescape(value) for name, value in pairs}


def reason_of(reply: requests.Response) -> str:
    assert reply.status_code == 403, reply.text
    match = re.search(r'<p class="error" id="reason">([^<]*)</p>', reply.text)
    assert match, reply.text
    return match[1]


# -- challenge and verification -----------------------------------------------------


def test_a_page_without_cookie_is_a_challenge(demo: Demo) -> None:
    assert demo.url.startswith("http://127.0.0.1:")
    assert demo.server.demo_port != demo.server.port
    reply = demo.get("/page/7?q=1")
    assert reply.status_code == 200
    assert reply.headers["Content-Type"] == "text/html; charset=utf-8"
    page = reply.text
    match = SITEKEY_RE.search(page)
    assert match and match[1] == DEMO_SITEKEY
    assert '<form method="post" action="/verify">' in page
    assert '<input type="hidden" name="next" value="/page/7?q=1">' in page
    assert 'name="g-recaptcha-response"' in page
    assert "<h1>page 7</h1>" not in page
    assert demo.stats() == {**dict.fromkeys(DEMO_COUNTERS, 0), "challenges": 1, "forms_issued": 1}
    # The form is bound to the visitor the page gave a session cookie.
    csrf = re.search(r'<input type="hidden" name="csrf_token" value="([A-Za-z0-9_\-]{32})">', page)
    assert csrf, page
    assert re.fullmatch(
        rf"{VISITOR_COOKIE}=[A-Za-z0-9_\-]{{22}}; Path=/; HttpOnly; SameSite=Lax",
        reply.headers["Set-Cookie"],
    )
    again = demo.session.get(f"{demo.url}/page/7?q=1", timeout=5)
    assert "Set-Cookie" not in again.headers  # the visitor keeps its session
    assert csrf[1] not in again.text  # and each load has its own form


def test_a_solved_token_earns_the_cookie_and_opens_pages(demo: Demo) -> None:
    page = demo.get("/page/7").text
    match = SITEKEY_RE.search(page)
    assert match
    token = demo.solve(sitekey=match[1], pageurl=f"{demo.url}/page/7")
    reply = demo.verify(token, "/page/7")
    assert reply.status_code == 302
    assert reply.headers["Location"] == "/page/7"
    set_cookie = reply.headers["Set-Cookie"]
    assert re.fullmatch(
        rf"{VALIDATION_COOKIE}=[A-Za-z0-9_\-]{{40,}}; Path=/; Max-Age=18; HttpOnly; SameSite=Lax",
        set_cookie,
    )
    cookie = demo.session.cookies.get(VALIDATION_COOKIE)
    assert cookie and cookie in set_cookie
    for name in ("7", "8", "a/b"):
        content = demo.get(f"/page/{name}")
        assert content.status_code == 200
        assert f"<h1>page {name}</h1>" in content.text
        assert "g-recaptcha" not in content.text
    # Following the redirect, as a browser does.
    followed = demo.session.post(
        f"{demo.url}/verify",
        data={**demo.form("/page/9"), "g-recaptcha-response": demo.solve(), "next": "/page/9"},
    )
    assert followed.status_code == 200
    assert "<h1>page 9</h1>" in followed.text
    stats = demo.stats()
    assert stats["pages_served"] == 4
    assert (stats["challenges"], stats["tokens_accepted"], stats["tokens_rejected"]) == (3, 2, 0)
    # The demo site spends the sandbox's own tokens: /siteverify saw them too.
    assert demo.server.stats()["tokens_verified"] == 2


def test_a_token_is_single_use_and_shared_with_siteverify(demo: Demo) -> None:
    token = demo.solve()
    assert demo.verify(token).status_code == 302
    other = Demo(demo.server)  # another visitor, with a form of its own
    try:
        again = other.verify(token)
        assert reason_of(again) == "timeout-or-duplicate"
        assert "Set-Cookie" not in again.headers
        assert "g-recaptcha" in other.get("/page/1").text
    finally:
        other.close()
    siteverify = requests.post(f"{demo.server.url}/siteverify", data={"response": token}, timeout=5)
    assert siteverify.json()["error-codes"] == ["timeout-or-duplicate"]
    # And a token spent at /siteverify no longer opens the demo site.
    spent = demo.solve()
    requests.post(f"{demo.server.url}/siteverify", data={"response": spent}, timeout=5)
    assert reason_of(demo.verify(spent)) == "timeout-or-duplicate"
    stats = demo.stats()
    assert (stats["tokens_accepted"], stats["tokens_rejected"]) == (1, 2)


def test_unknown_missing_and_foreign_tokens_are_rejected(demo: Demo) -> None:
    assert reason_of(demo.verify("03AFcWeAnot-a-token")) == "invalid-input-response"
    assert reason_of(demo.verify("")) == "missing-input-response"
    foreign = demo.solve(sitekey=OTHER_SITEKEY)
    assert reason_of(demo.verify(foreign)) == "sitekey-secret-mismatch"
    assert demo.stats()["tokens_rejected"] == 3
    assert VALIDATION_COOKIE not in demo.session.cookies


def test_next_must_be_a_local_path(demo: Demo) -> None:
    token = demo.solve()
    for target in (
        "https://evil.example/x",
        "//evil.example/x",
        "/\\evil.example",
        "javascript:alert(1)",
        "page/1",
        "/page/1\r\nSet-Cookie: x=1",
    ):
        reply = demo.verify(token, target)
        assert reply.status_code == 400, target
        assert "Location" not in reply.headers
    # Refused before the token was looked at: it still works, and empty next means "/".
    reply = demo.verify(token, "")
    assert (reply.status_code, reply.headers["Location"]) == (302, "/")
    assert demo.stats()["tokens_rejected"] == 0


def test_an_expired_token_is_rejected(make_demo: Callable[..., Demo]) -> None:
    scale = 0.005  # tokens live 0.6 s after they are solved
    demo = make_demo(time_scale=scale, jitter=0.0)
    token = demo.solve()
    time.sleep(120 * scale + 0.15)
    assert reason_of(demo.verify(token)) == "timeout-or-duplicate"
    assert demo.stats()["tokens_rejected"] == 1


def test_cookies_expire_at_their_scaled_lifetime(make_demo: Callable[..., Demo]) -> None:
    scale = 0.002  # cookies and sessions live 3.6 s (Max-Age=4), tokens 0.24 s
    demo = make_demo(time_scale=scale)
    reply = demo.verify(demo.solve())
    assert "Max-Age=4;" in reply.headers["Set-Cookie"]
    login = {"username": "u", "password": "p", "g-recaptcha-response": demo.solve()}
    assert demo.login(login).status_code == 302
    issued = time.monotonic()  # both were issued before this moment
    cookies = {name: demo.session.cookies[name] for name in (VALIDATION_COOKIE, SESSION_COOKIE)}
    with requests.Session() as replay:  # the server's clock decides, not the cookie jar
        replay.cookies.update(cookies)
        assert "<h1>page 1</h1>" in replay.get(f"{demo.url}/page/1", timeout=5).text
        assert replay.get(f"{demo.url}/account", timeout=5).status_code == 200
        time.sleep(max(0.0, issued + 1800 * scale + 0.2 - time.monotonic()))
        assert "g-recaptcha" in replay.get(f"{demo.url}/page/1", timeout=5).text
        late = replay.get(f"{demo.url}/account", allow_redirects=False, timeout=5)
        assert (late.status_code, late.headers["Location"]) == (302, "/login")
    forged = requests.get(f"{demo.url}/page/1", cookies={VALIDATION_COOKIE: "made-up"}, timeout=5)
    assert "g-recaptcha" in forged.text
    stats = demo.stats()
    # Challenges: the form verify() loaded, and the two pages after the cookies expired.
    assert (stats["pages_served"], stats["challenges"], stats["cookies_rejected"]) == (1, 3, 2)


# -- login --------------------------------------------------------------------------


def test_login_flow(make_demo: Callable[..., Demo]) -> None:
    # Tokens live 6 s here (120 s scaled by 0.05), sessions 90 s: the token is solved
    # just before the post that uses it, and a busy machine's few requests in between
    # stay well within its life.
    demo = make_demo(time_scale=0.05)
    account = demo.get("/account", allow_redirects=False)
    assert (account.status_code, account.headers["Location"]) == (302, "/login")
    form = demo.get("/login")
    assert form.status_code == 200
    assert '<form method="post" action="/login">' in form.text
    assert 'name="username"' in form.text and 'type="password"' in form.text
    match = SITEKEY_RE.search(form.text)
    assert match and match[1] == DEMO_SITEKEY
    user = {"username": "alice <admin>", "password": "hunter2"}
    missing = demo.login({"username": "alice", "g-recaptcha-response": "03AFcWeAnope"})
    assert missing.status_code == 400
    bad = demo.login({**user, "g-recaptcha-response": "03AFcWeAnope"})
    assert reason_of(bad) == "invalid-input-response"
    assert SESSION_COOKIE not in demo.session.cookies
    token = demo.solve(pageurl=f"{demo.url}/login")
    ok = demo.login({**user, "g-recaptcha-response": token})
    assert (ok.status_code, ok.headers.get("Location")) == (302, "/account"), ok.text
    assert re.fullmatch(
        rf"{SESSION_COOKIE}=[A-Za-z0-9_\-]{{40,}}; Path=/; Max-Age=90; HttpOnly; SameSite=Lax",
        ok.headers["Set-Cookie"],
    )
    page = demo.get("/account")
    assert page.status_code == 200
    assert "Signed in as alice &lt;admin&gt;" in page.text
    reused = demo.login({**user, "g-recaptcha-response": token})
    assert reason_of(reused) == "timeout-or-duplicate"
    forged = requests.get(
        f"{demo.url}/account",
        cookies={SESSION_COOKIE: "made-up"},
        allow_redirects=False,
        timeout=5,
    )
    assert forged.status_code == 302
    stats = demo.stats()
    assert (stats["logins"], stats["login_forms"]) == (1, 5)  # a form for each post
    assert (stats["tokens_accepted"], stats["tokens_rejected"]) == (1, 2)


# -- stats, redirect, misc ----------------------------------------------------------


def test_stats_reset_and_healthz(demo: Demo) -> None:
    demo.get("/page/1")
    demo.get("/login")
    demo.verify("03AFcWeAnope")  # loads /page/1's form again
    stats = demo.stats()
    assert set(stats) == set(DEMO_COUNTERS)
    assert {"pages_served", "challenges", "tokens_accepted", "tokens_rejected", "logins"} <= set(
        stats
    )
    assert (stats["challenges"], stats["login_forms"], stats["tokens_rejected"]) == (2, 1, 1)
    assert (stats["forms_issued"], stats["stale_forms"], stats["expired_forms"]) == (3, 0, 0)
    assert demo.server.demo is not None
    assert demo.server.demo.stats() == stats
    assert demo.get("/reset").status_code == 405
    assert demo.post("/reset", {}).json() == {"ok": True}
    assert demo.stats() == dict.fromkeys(DEMO_COUNTERS, 0)
    assert demo.get("/healthz").json() == {"ok": True}
    assert demo.get("/nowhere").status_code == 404
    assert demo.get("/verify").status_code == 405
    assert demo.post("/page/1", {}).status_code == 405
    assert "/page/1" in demo.get("/").text


def test_redirect_answers_302_to_any_url(demo: Demo) -> None:
    for target in (
        "http://127.0.0.1:9/admin",
        "http://169.254.169.254/latest/meta-data/",
        "http://10.0.0.1/",
        "http://[::1]:8080/x?y=1&z=2",
        "/page/1",
    ):
        reply = demo.get("/redirect", params={"to": target}, allow_redirects=False)
        assert (reply.status_code, reply.headers["Location"]) == (302, target)
    followed = demo.get("/redirect", params={"to": "/page/3"})
    assert followed.url == f"{demo.url}/page/3"
    assert "g-recaptcha" in followed.text
    for bad in ("", "http://x/\r\nSet-Cookie: a=b", "http://x/ y", "http://ü.example/"):
        reply = demo.get("/redirect", params={"to": bad}, allow_redirects=False)
        assert reply.status_code == 400, bad
    assert demo.stats()["redirects"] == 6


def test_custom_sitekey_and_keep_alive(make_demo: Callable[..., Demo]) -> None:
    sitekey = "6LcCustomDemoKey_000000000000000000000000"
    demo = make_demo(demo_sitekey=sitekey)
    match = SITEKEY_RE.search(demo.get("/page/1").text)
    assert match and match[1] == sitekey
    assert reason_of(demo.verify(demo.solve(sitekey=DEMO_SITEKEY))) == "sitekey-secret-mismatch"
    assert demo.verify(demo.solve(sitekey=sitekey)).status_code == 302
    port = demo.server.demo_port
    assert port is not None
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        for _ in range(3):
            conn.request("GET", "/page/1")
            reply = conn.getresponse()
            body = reply.read()
            assert reply.getheader("Content-Length") == str(len(body))
            assert not reply.will_close
    finally:
        conn.close()


def test_the_demo_site_is_off_by_default_and_stops_with_the_sandbox(
    sandbox: SandboxServer,
) -> None:
    assert (sandbox.demo, sandbox.demo_url, sandbox.demo_port) == (None, None, None)
    server = SandboxServer(SandboxConfig(time_scale=SCALE, demo_port=0)).start()
    url, port = server.demo_url, server.demo_port
    assert url is not None and port is not None
    with requests.Session() as session:
        assert session.get(f"{url}/healthz", timeout=5).ok  # an idle keep-alive connection
        started = time.monotonic()
        server.stop()
        assert time.monotonic() - started < 2.0
        with pytest.raises(requests.ConnectionError):
            session.get(f"{url}/healthz", timeout=2)
    with SandboxServer(SandboxConfig(time_scale=SCALE, demo_port=port)) as again:
        assert again.demo_url == url  # the port was released
        assert requests.get(f"{url}/healthz", timeout=5).ok


@pytest.mark.parametrize(
    "fields",
    [{"demo_port": -1}, {"demo_port": 70000}, {"demo_sitekey": "bad key!"}, {"demo_sitekey": "x"}],
)
def test_config_rejects_bad_demo_values(fields: dict[str, Any]) -> None:
    with pytest.raises(ConfigurationError):
        SandboxConfig(**fields)
    with pytest.raises(ConfigurationError):
        SandboxConfig(port=8765, demo_port=8765)
    assert SandboxConfig(demo_port=0).describe()["demo_port"] == 0


def test_logs_never_show_tokens_passwords_or_cookies(
    make_demo: Callable[..., Demo], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="captcha_tasks_sandbox")
    quiet = make_demo()
    quiet.verify(quiet.solve())
    assert not [r for r in caplog.records if r.name == "captcha_tasks_sandbox"]
    loud = make_demo(verbose=True)
    token = loud.solve()
    loud.session.post(
        f"{loud.url}/verify?g-recaptcha-response={token}",
        data={**loud.form(), "next": "/page/1"},
        timeout=5,
    )
    login = loud.solve()
    loud.login({"username": "u", "password": "hunter2", "g-recaptcha-response": login})
    loud.get("/account")
    lines = [r.getMessage() for r in caplog.records if r.name == "captcha_tasks_sandbox"]
    assert any("demo POST /verify 302" in line for line in lines), lines
    secrets = [token, login, "hunter2", *loud.session.cookies.values()]
    assert len(secrets) == 6  # the validation, session and visitor cookies among them
    for secret in secrets:
        assert secret not in caplog.text


def test_the_demo_site_speaks_https_with_the_sandbox(
    make_demo: Callable[..., Demo], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cert_path, key_path = trusted_certificate(tmp_path, monkeypatch)
    demo = make_demo(tls_cert=str(cert_path), tls_key=str(key_path))
    assert demo.url.startswith("https://127.0.0.1:")
    reply = demo.verify(demo.solve())
    assert reply.status_code == 302
    assert reply.headers["Set-Cookie"].endswith("; Secure")
    assert "<h1>page 1</h1>" in demo.get("/page/1").text


def test_serve_forever_serves_the_demo_site_too() -> None:
    server = SandboxServer(SandboxConfig(time_scale=SCALE, demo_port=0))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        assert requests.get(f"{server.demo_url}/healthz", timeout=5).ok
        assert requests.get(f"{server.url}/healthz", timeout=5).ok
    finally:
        server.stop()
        thread.join(5)
    assert not thread.is_alive()


# -- CLI ------------------------------------------------------------------------------


def test_cli_demo_port_option() -> None:
    runner = CliRunner()
    assert "--demo-port" in runner.invoke(sandbox_command, ["--help"]).output
    bad = runner.invoke(sandbox_command, ["--demo-port", "70000", "--time-scale", "1"])
    assert bad.exit_code == 2
    same = runner.invoke(
        sandbox_command,
        [
            "--port",
            "8765",
            "--demo-port",
            "8765",
            "--time-scale",
            "1",
            "--max-image-bytes",
            "100000",
        ],
    )
    assert same.exit_code == 2
    assert "demo_port must differ" in same.output


def test_cli_serves_the_demo_site() -> None:
    argv = [
        sys.executable,
        "-c",
        "from captcha_tasks_sandbox.cli import sandbox_command; sandbox_command()",
        "--port",
        "0",
        "--demo-port",
        "0",
        "--time-scale",
        "0.01",
    ]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    with subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    ) as proc:
        try:
            assert proc.stdout is not None
            with selectors.DefaultSelector() as selector:
                selector.register(proc.stdout, selectors.EVENT_READ)
                assert selector.select(30), "no output from the sandbox"
            lines = [proc.stdout.readline(), proc.stdout.readline()]
            assert lines[0].startswith("sandbox listening on http://127.0.0.1:")
            match = re.fullmatch(
                rf"demo site on (http://127\.0\.0\.1:\d+) \(sitekey {DEMO_SITEKEY}\)\n", lines[1]
            )
            assert match, lines
            page = requests.get(f"{match[1]}/page/1", timeout=5)
            assert SITEKEY_RE.search(page.text)
        finally:
            assert stop_process(proc, timeout=10) == 0


# -- the site's own verdict: reject_rates -----------------------------------------------


def test_the_site_refuses_a_configured_share_of_good_tokens_per_dialect_and_host(
    make_demo: Callable[..., Demo],
) -> None:
    demo = make_demo(reject_rates={"captchaai": 1.0, "localhost/*": 0.0})
    assert reason_of(demo.verify(demo.solve())) == "site-rejected"
    # The same site asked as another host: that host's rate (none refused).
    accepted = demo.verify(demo.solve(), headers={"Host": "localhost"})
    assert accepted.status_code == 302
    # Told at runtime: accepted everywhere.
    admin = requests.post(
        f"{demo.server.url}/admin/config", json={"reject_rates": {"*": 0}}, timeout=5
    )
    assert admin.status_code == 200, admin.text
    assert demo.verify(demo.solve()).status_code == 302
    bad = requests.post(
        f"{demo.server.url}/admin/config", json={"reject_rates": {"*": 2}}, timeout=5
    )
    assert bad.status_code == 400
    stats = demo.stats()
    assert (stats["tokens_accepted"], stats["tokens_rejected"]) == (2, 1)


def test_the_sites_refusals_follow_the_seed(make_demo: Callable[..., Demo]) -> None:
    def verdicts(demo: Demo) -> list[int]:
        return [demo.verify(demo.solve()).status_code for _ in range(8)]

    first = verdicts(make_demo(reject_rates={"*": 0.5}, seed=4))
    assert verdicts(make_demo(reject_rates={"*": 0.5}, seed=4)) == first
    assert set(first) == {302, 403}


def test_a_peer_sandboxs_tokens_are_judged_by_its_dialect(
    make_demo: Callable[..., Demo], sandbox_factory: Callable[..., SandboxServer]
) -> None:
    demo = make_demo(reject_rates={"2captcha": 1.0})
    peer = sandbox_factory(time_scale=SCALE, dialect="2captcha")
    demo.server.demo.trust(peer.state)
    own = demo.solve()
    assert demo.verify(own).status_code == 302  # captchaai: none refused
    assert reason_of(demo.verify(demo.solve(at=peer))) == "site-rejected"


def test_reject_rates_are_checked() -> None:
    for bad in ({"*": 1.5}, {"*": "x"}, {"": 0.1}, ["*"]):
        with pytest.raises(ConfigurationError):
            SandboxConfig(reject_rates=bad)  # type: ignore[arg-type]
    config = SandboxConfig(dialect="2captcha", reject_rates={"2captcha": 0.7, "a.test/*": 0.1})
    assert (config.reject_rate("b.test"), config.reject_rate("a.test")) == (0.7, 0.1)
    assert config.reject_rate("b.test", "captchaai") == 0.0
    assert config.describe()["reject_rates"] == {"2captcha": 0.7, "a.test/*": 0.1}
    bad = CliRunner().invoke(sandbox_command, ["--reject-rate", "*=often", "--time-scale", "1"])
    assert bad.exit_code == 2 and "reject_rates[*]" in bad.output


# -- forms as strict as real sites' ---------------------------------------------------


def test_a_form_is_good_once_for_the_visitor_it_was_served_to(demo: Demo) -> None:
    form = demo.form("/page/1")
    assert set(form) == {"next", "csrf_token"}
    token = demo.solve()
    first = demo.post("/verify", {**form, "g-recaptcha-response": "03AFcWeAnope"})
    assert reason_of(first) == "invalid-input-response"  # the token was judged: form spent
    again = demo.post("/verify", {**form, "g-recaptcha-response": token})
    assert reason_of(again) == "stale-form"
    with requests.Session() as thief:  # another visitor posting this visitor's form
        thief.cookies.set(VISITOR_COOKIE, "someone-else")
        stolen = thief.post(
            f"{demo.url}/verify",
            data={**demo.form("/page/1"), "g-recaptcha-response": token},
            allow_redirects=False,
            timeout=5,
        )
        assert reason_of(stolen) == "stale-form"
    missing = demo.post("/verify", {"next": "/page/1", "g-recaptcha-response": token})
    assert reason_of(missing) == "stale-form"
    # Refused as stale, the token was never looked at: it still opens a fresh form.
    assert demo.verify(token).status_code == 302
    stats = demo.stats()
    assert (stats["stale_forms"], stats["expired_forms"]) == (3, 0)
    assert (stats["tokens_accepted"], stats["tokens_rejected"]) == (1, 1)


def test_a_form_expires_at_its_scaled_lifetime(make_demo: Callable[..., Demo]) -> None:
    demo = make_demo(demo_form_ttl=20.0)  # 0.2 s at SCALE
    form = demo.form("/page/1")
    token = demo.solve()
    time.sleep(20.0 * SCALE + 0.1)
    late = demo.post("/verify", {**form, "g-recaptcha-response": token})
    assert reason_of(late) == "expired-form"
    assert demo.verify(token).status_code == 302  # a fresh form, the same unspent token
    assert (demo.stats()["expired_forms"], demo.stats()["stale_forms"]) == (1, 0)


def test_a_rotating_sitekey_takes_only_tokens_for_the_form_that_showed_it(
    make_demo: Callable[..., Demo],
) -> None:
    demo = make_demo(demo_rotate_sitekey=True)
    shown = [SITEKEY_RE.search(demo.get("/page/1").text) for _ in range(3)]
    keys = [match[1] for match in shown if match]
    assert len(set(keys)) == 3
    assert all(len(key) == len(DEMO_SITEKEY) and key[:-4] == DEMO_SITEKEY[:-4] for key in keys)
    # A token for the sitekey an earlier load showed is refused on this load's form.
    page = demo.get("/page/1").text
    form = hidden_fields(page)
    current = SITEKEY_RE.search(page)
    assert current
    stale_key = demo.post("/verify", {**form, "g-recaptcha-response": demo.solve(sitekey=keys[0])})
    assert reason_of(stale_key) == "sitekey-secret-mismatch"
    page = demo.get("/page/1").text
    form = hidden_fields(page)
    fresh = SITEKEY_RE.search(page)
    assert fresh
    token = demo.solve(sitekey=fresh[1])
    assert demo.post("/verify", {**form, "g-recaptcha-response": token}).status_code == 302


# -- ALTCHA, made and judged by the official library --------------------------------


@pytest.mark.parametrize("variant", ["", "v1", "inline"])
def test_an_altcha_page_is_passed_once_with_a_payload_the_library_solved(
    demo: Demo, variant: str
) -> None:
    import base64
    import json

    import altcha
    import altcha.v1

    path = f"/page/4?widget=altcha{'&altcha=' + variant if variant else ''}"
    page = demo.get(path).text
    widget = re.search(r'<altcha-widget (challenge|challengeurl)="([^"]+)"', page)
    assert widget, page
    source = html.unescape(widget[2])
    raw = json.loads(source) if source.startswith("{") else demo.get(source).json()
    if variant == "v1":
        # The Python library's spelling (altcha-lib's JavaScript writes maxnumber).
        assert raw["algorithm"] == "SHA-256" and raw["maxNumber"] == 50_000
        found = altcha.v1.solve_challenge(
            raw["challenge"], raw["salt"], raw["algorithm"], raw["maxNumber"], 0
        )
        assert found is not None
        payload = base64.b64encode(
            json.dumps(
                {
                    **{k: raw[k] for k in ("algorithm", "challenge", "salt", "signature")},
                    "number": found.number,
                }
            ).encode()
        ).decode()
    else:
        assert raw["parameters"]["algorithm"] == "PBKDF2/SHA-256"
        challenge = altcha.Challenge.from_dict(raw)
        solution = altcha.solve_challenge(challenge)
        assert solution is not None
        payload = altcha.Payload(challenge, solution).to_base64()
    passed = demo.post("/verify", {**hidden_fields(page), "altcha": payload})
    assert (passed.status_code, passed.headers["Location"]) == (302, path), passed.text
    again = demo.post("/verify", {**demo.form(path), "altcha": payload})
    assert reason_of(again) == "altcha-replayed"
    forged = demo.post("/verify", {**demo.form(path), "altcha": payload[:-8] + "AAAAAAA="})
    assert reason_of(forged) == "altcha-invalid"
    assert (demo.stats()["tokens_accepted"], demo.stats()["tokens_rejected"]) == (1, 2)
