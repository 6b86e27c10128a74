"""A small SOCKS proxy on loopback, for testing page fetches through ``socks5://`` proxies.

It speaks SOCKS5 (RFC 1928: CONNECT only, IPv4, IPv6 and domain-name addresses) with
no authentication or username/password (RFC 1929), and SOCKS4/4a (CONNECT, no
password: SOCKS4 has none). It only listens on and connects to loopback addresses:
any other target is refused with "connection not allowed by ruleset".

It runs a thread per connection, at most ``max_connections`` at once (more are closed
at once), every socket with a timeout; :meth:`stop` closes every socket and joins
every thread. It counts what it saw, for tests to assert on: connections accepted,
handshakes (version, method, the user name, whether the credentials were right, the
target as sent), and refusals.
"""

from __future__ import annotations

import contextlib
import dataclasses
import ipaddress
import select
import socket
import struct
import threading

from tests.support.servers import BackgroundServer

__all__ = ["Handshake", "SocksProxy"]

#: RFC 1928 reply codes used here.
SUCCEEDED, GENERAL_FAILURE, NOT_ALLOWED, HOST_UNREACHABLE, REFUSED = 0, 1, 2, 4, 5
COMMAND_NOT_SUPPORTED, ADDRESS_NOT_SUPPORTED = 7, 8


@dataclasses.dataclass
class Handshake:
    """One client's greeting as the proxy saw it."""

    version: int  # 4 or 5
    method: str = ""  # "none", "userpass" (SOCKS5); "userid" (SOCKS4)
    username: str | None = None
    auth_ok: bool | None = None  # None: no credentials were asked for
    target: tuple[str, int] | None = None
    address_type: str = ""  # "ipv4", "ipv6", "domain"
    reply: int | None = None  # the SOCKS5 reply code sent (SOCKS4: 0 granted, else refused)


class _Refused(Exception):
    """The handshake failed: the connection is closed (after the reply, if any)."""


class SocksProxy(BackgroundServer):
    """``with SocksProxy(username="u", password="p") as proxy:`` ... ``proxy.url()``."""

    def __init__(
        self,
        *,
        username: str | None = None,
        password: str | None = None,
        max_connections: int = 16,
        timeout: float = 10.0,
        source: str | None = None,
    ) -> None:
        super().__init__()
        if (username is None) != (password is None):
            raise ValueError("username and password go together")
        if source is not None and not ipaddress.ip_address(source).is_loopback:
            raise ValueError("the source address must be a loopback one")
        #: The address its connections to targets come from (e.g. ``127.0.0.2``: a proxy
        #: with an exit IP of its own, as targets see it); None: the system's choice.
        self.source = source
        self.username = username
        self.password = password
        self.max_connections = max_connections
        self.timeout = timeout
        self.host = "127.0.0.1"
        self._listener = socket.create_server((self.host, 0))
        self._listener.settimeout(0.2)
        self.port: int = self._listener.getsockname()[1]
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._sockets: set[socket.socket] = set()
        self._threads: set[threading.Thread] = set()
        #: Connections accepted (including refused handshakes), and turned away when full.
        self.connections = 0
        self.turned_away = 0
        #: Every handshake, in order.
        self.handshakes: list[Handshake] = []

    # -- what tests read --------------------------------------------------------------

    def url(
        self, scheme: str = "socks5h", *, username: str | None = None, password: str | None = None
    ) -> str:
        """The proxy's URL with the given credentials (default: its own)."""
        user = self.username if username is None else username
        secret = self.password if password is None else password
        auth = f"{user}:{secret}@" if user is not None and secret is not None else ""
        return f"{scheme}://{auth}{self.host}:{self.port}"

    @property
    def tunnels(self) -> list[Handshake]:
        """The handshakes that ended in a connected tunnel."""
        with self._lock:
            return [h for h in self.handshakes if h.reply == SUCCEEDED]

    # -- life cycle -------------------------------------------------------------------

    thread_name = "socks-accept"

    def _shutdown(self) -> None:
        self._stop.set()
        self._listener.close()

    def _cleanup(self) -> None:
        """Close every connection; join every thread (``stop()`` raises if one lives on)."""
        with self._lock:
            sockets, threads = list(self._sockets), list(self._threads)
        for sock in sockets:
            _close(sock)
        for thread in threads:
            thread.join(timeout=5)
        alive = [t.name for t in threads if t.is_alive()]
        if alive or self._thread.is_alive():
            raise RuntimeError(f"SOCKS proxy threads did not stop: {alive}")

    # -- serving ----------------------------------------------------------------------

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with self._lock:
                full = len(self._threads) >= self.max_connections
                if full:
                    self.turned_away += 1
                else:
                    self.connections += 1
                    thread = threading.Thread(
                        target=self._connection,
                        args=(client,),
                        name=f"socks-{self.connections}",
                        daemon=True,
                    )
                    self._threads.add(thread)
                    self._sockets.add(client)
            if full:
                _close(client)
            else:
                thread.start()

    def _track(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.add(sock)
            if self._stop.is_set():  # stop() may have closed the others already
                _close(sock)

    def _connection(self, client: socket.socket) -> None:
        upstream: socket.socket | None = None
        try:
            client.settimeout(self.timeout)
            version = _read(client, 1)[0]
            handshake = Handshake(version)
            with self._lock:
                self.handshakes.append(handshake)
            if version == 5:
                upstream = self._socks5(client, handshake)
            elif version == 4:
                upstream = self._socks4(client, handshake)
            else:
                raise _Refused(f"unknown SOCKS version {version}")
            self._relay(client, upstream)
        except (_Refused, OSError):
            pass
        finally:
            for sock in (client, upstream):
                if sock is not None:
                    _close(sock)
            with self._lock:
                self._sockets.discard(client)
                if upstream is not None:
                    self._sockets.discard(upstream)
                self._threads.discard(threading.current_thread())

    def _socks5(self, client: socket.socket, handshake: Handshake) -> socket.socket:
        methods = _read(client, _read(client, 1)[0])
        wanted = 0x02 if self.username is not None else 0x00
        if wanted not in methods:
            client.sendall(b"\x05\xff")  # no acceptable method
            raise _Refused("no acceptable authentication method")
        client.sendall(bytes([5, wanted]))
        handshake.method = "userpass" if wanted == 0x02 else "none"
        if wanted == 0x02:  # RFC 1929
            if _read(client, 1)[0] != 1:
                raise _Refused("bad username/password subnegotiation version")
            user = _read(client, _read(client, 1)[0]).decode(errors="replace")
            secret = _read(client, _read(client, 1)[0]).decode(errors="replace")
            handshake.username = user
            handshake.auth_ok = user == self.username and secret == self.password
            client.sendall(b"\x01\x00" if handshake.auth_ok else b"\x01\x01")
            if not handshake.auth_ok:
                raise _Refused("wrong username or password")
        version, command, _, atyp = _read(client, 4)
        if version != 5:
            raise _Refused("bad request version")
        if atyp == 1:
            host = socket.inet_ntop(socket.AF_INET, _read(client, 4))
            handshake.address_type = "ipv4"
        elif atyp == 4:
            host = socket.inet_ntop(socket.AF_INET6, _read(client, 16))
            handshake.address_type = "ipv6"
        elif atyp == 3:
            host = _read(client, _read(client, 1)[0]).decode("idna")
            handshake.address_type = "domain"
        else:
            self._reply5(client, handshake, ADDRESS_NOT_SUPPORTED)
            raise _Refused("address type not supported")
        (port,) = struct.unpack("!H", _read(client, 2))
        handshake.target = (host, port)
        if command != 1:  # CONNECT only
            self._reply5(client, handshake, COMMAND_NOT_SUPPORTED)
            raise _Refused("only CONNECT is supported")
        upstream, code = self._connect(host, port)
        self._reply5(client, handshake, code)
        if upstream is None:
            raise _Refused(f"could not connect to {host}:{port}")
        return upstream

    def _reply5(self, client: socket.socket, handshake: Handshake, code: int) -> None:
        handshake.reply = code
        client.sendall(bytes([5, code, 0, 1]) + socket.inet_aton("0.0.0.0") + b"\x00\x00")

    def _socks4(self, client: socket.socket, handshake: Handshake) -> socket.socket:
        command = _read(client, 1)[0]
        (port,) = struct.unpack("!H", _read(client, 2))
        address = _read(client, 4)
        handshake.method = "userid"
        handshake.username = _read_until_nul(client).decode(errors="replace") or None
        if address[:3] == b"\x00\x00\x00" and address[3] != 0:  # SOCKS4a: a name follows
            host = _read_until_nul(client).decode("idna")
            handshake.address_type = "domain"
        else:
            host = socket.inet_ntop(socket.AF_INET, address)
            handshake.address_type = "ipv4"
        handshake.target = (host, port)
        if command == 1:  # CONNECT only
            upstream, code = self._connect(host, port)
        else:
            upstream, code = None, COMMAND_NOT_SUPPORTED
        handshake.reply = code
        granted = 0x5A if upstream is not None else 0x5B
        client.sendall(bytes([0, granted]) + b"\x00" * 6)
        if upstream is None:
            raise _Refused(f"could not connect to {host}:{port}")
        return upstream

    def _connect(self, host: str, port: int) -> tuple[socket.socket | None, int]:
        """A connection to a loopback ``host`` (names resolved here), and the reply code."""
        try:
            infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except (socket.gaierror, UnicodeError):
            return None, HOST_UNREACHABLE
        if not infos or not all(ipaddress.ip_address(i[4][0]).is_loopback for i in infos):
            return None, NOT_ALLOWED  # loopback only
        family, kind, proto, _, address = infos[0]
        upstream = socket.socket(family, kind, proto)
        self._track(upstream)
        upstream.settimeout(self.timeout)
        try:
            if self.source is not None and family == socket.AF_INET:
                upstream.bind((self.source, 0))
            upstream.connect(address)
        except OSError:
            return None, REFUSED
        return upstream, SUCCEEDED

    def _relay(self, client: socket.socket, upstream: socket.socket) -> None:
        """Copy bytes both ways until either side closes, an idle timeout or stop()."""
        idle = 0.0
        open_ends = {client: upstream, upstream: client}
        while open_ends and not self._stop.is_set() and idle < self.timeout:
            readable, _, _ = select.select(list(open_ends), [], [], 0.2)
            if not readable:
                idle += 0.2
                continue
            idle = 0.0
            for src in readable:
                dst = open_ends.get(src)
                if dst is None:
                    continue
                data = src.recv(65536)
                if data:
                    dst.sendall(data)
                    continue
                del open_ends[src]  # EOF from src: pass it on, keep the other way open
                with contextlib.suppress(OSError):
                    dst.shutdown(socket.SHUT_WR)
                if dst not in open_ends:
                    return


def _read(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise _Refused("the client closed the connection mid-handshake")
        data += chunk
    return data


def _read_until_nul(sock: socket.socket, limit: int = 256) -> bytes:
    data = b""
    while (byte := _read(sock, 1)) != b"\x00":
        data += byte
        if len(data) > limit:
            raise _Refused("field too long")
    return data


def _close(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    with contextlib.suppress(OSError):
        sock.close()
