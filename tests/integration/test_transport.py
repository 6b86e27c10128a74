"""The provider transport (:class:`captcha_tasks.provider.transport.Connections`) over real
sockets: connections kept between calls and closed after an answer cut short, and the
environment's proxy and CA bundle, read as requests reads them."""

from __future__ import annotations

import contextlib
import decimal
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from captcha_tasks.errors import SolverNetworkError, SubmitUncertain, TransientSolverError
from captcha_tasks.provider import RecaptchaV2, SolverClient, make_session, transport
from captcha_tasks_sandbox import DEV_API_KEY, SandboxServer
from tests.support.provider_double import DEFAULT_KEY as KEY
from tests.support.provider_double import ProviderDouble
from tests.support.servers import BackgroundServer
from tests.support.socks_proxy import SocksProxy
from tests.support.tcp_proxy import TcpProxy

pytestmark = pytest.mark.integration

SITEKEY = "6LeIxAcTAAAAAJcZVRqyHh71UMIEGNQ_MXjiZKhI"
PAGE = "https://example.com/login"
_PROXY_VARIABLES = ("http_proxy", "https_proxy", "all_proxy", "no_proxy")


@pytest.fixture
def double() -> Iterator[ProviderDouble]:
    with ProviderDouble() as provider:
        yield provider


@pytest.fixture
def no_proxy_environment(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """No proxy variable of the machine's own in the way, whatever its case."""
    for name in _PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)
    return monkeypatch


def _port(url: str) -> int:
    return int(url.rsplit(":", 1)[1])


def test_calls_share_one_kept_alive_connection(sandbox: SandboxServer) -> None:
    with TcpProxy(sandbox.port) as wire:
        client = SolverClient(f"http://127.0.0.1:{wire.port}", DEV_API_KEY, session=make_session())
        captcha_id = client.submit(RecaptchaV2(SITEKEY, PAGE))
        for _ in range(10):
            client.get(captcha_id)
            client.get_many([captcha_id])
        client.balance()
        assert sandbox.stats()["submitted"] == 1
        assert wire.stats.connections == 1


class _Oversized(BackgroundServer):
    """HTTP/1.1 with keep-alive: every POST is answered with 2 MiB (twice the cap)."""

    thread_name = "oversized-answers"

    def __init__(self) -> None:
        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers["Content-Length"]))
                body = b"OK|" + b"x" * (2 * transport.MAX_RESPONSE_BYTES)
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                with contextlib.suppress(OSError):  # the client stops reading at the cap
                    self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        super().__init__()

    def _serve(self) -> None:
        self._server.serve_forever(poll_interval=0.05)

    def _shutdown(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def test_an_answer_cut_short_closes_its_connection() -> None:
    with _Oversized() as server, TcpProxy(server.port) as wire:
        client = SolverClient(f"http://127.0.0.1:{wire.port}", KEY, session=make_session())
        for _ in range(2):
            with pytest.raises(TransientSolverError, match="not read further"):
                client.get("3397637370")
        # The second call could not reuse a connection left holding most of an answer.
        assert wire.stats.connections == 2


def test_the_environment_proxy_carries_calls(
    double: ProviderDouble, no_proxy_environment: pytest.MonkeyPatch
) -> None:
    # A host that resolves nowhere: only the proxy can have reached it.
    no_proxy_environment.setenv("HTTP_PROXY", double.base_url)
    client = SolverClient("http://solver.invalid", KEY, session=make_session())
    assert client.submit(RecaptchaV2(SITEKEY, PAGE)) == "3397637370"
    (sent,) = double.requests
    assert sent.path == "http://solver.invalid/in.php"  # the absolute form a proxy gets
    assert sent.body_params["key"] == KEY and KEY not in sent.path


def test_no_proxy_sends_a_host_past_the_proxy(
    double: ProviderDouble, no_proxy_environment: pytest.MonkeyPatch
) -> None:
    with TcpProxy(_port(double.base_url)) as dead:
        dead_url = f"http://egress:pr0xy-s3cret@127.0.0.1:{dead.port}"
    no_proxy_environment.setenv("HTTP_PROXY", dead_url)  # nothing listens there now
    with pytest.raises(SolverNetworkError) as info:
        SolverClient(double.base_url, KEY, session=make_session()).balance()
    assert "proxy failed" in str(info.value)
    assert "pr0xy-s3cret" not in str(info.value) and "pr0xy-s3cret" not in repr(info.value)
    no_proxy_environment.setenv("NO_PROXY", "127.0.0.1")
    direct = SolverClient(double.base_url, KEY, session=make_session())
    assert direct.balance() == decimal.Decimal("12.3400")


def test_a_socks_proxy_from_the_environment(
    double: ProviderDouble, no_proxy_environment: pytest.MonkeyPatch
) -> None:
    with SocksProxy() as socks:
        no_proxy_environment.setenv("ALL_PROXY", socks.url("socks5"))
        client = SolverClient(double.base_url, KEY, session=make_session())
        assert client.balance() == decimal.Decimal("12.3400")
        assert [t.target for t in socks.tunnels] == [("127.0.0.1", _port(double.base_url))]


def test_https_trusts_the_ca_bundle_the_environment_names(
    tls_sandbox: SandboxServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    client = SolverClient(tls_sandbox.url, DEV_API_KEY, session=make_session())
    assert client.balance() == decimal.Decimal("100")
    assert client.submit(RecaptchaV2(SITEKEY, PAGE))

    # Without the test CA the certificate is refused before anything is sent: the
    # submit is transient (safe to send again), never SubmitUncertain.
    monkeypatch.delenv("REQUESTS_CA_BUNDLE")
    stranger = SolverClient(tls_sandbox.url, DEV_API_KEY, session=make_session())
    with pytest.raises(SolverNetworkError) as info:
        stranger.submit(RecaptchaV2(SITEKEY, PAGE))
    assert isinstance(info.value, TransientSolverError)
    assert not isinstance(info.value, SubmitUncertain)
    assert "TLS error" in str(info.value)
    assert tls_sandbox.stats()["submitted"] == 1
