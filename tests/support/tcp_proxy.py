"""A TCP proxy on loopback that can partition its clients from their server.

``TcpProxy(upstream_port)`` forwards every connection made to :attr:`TcpProxy.port` to
``127.0.0.1:upstream_port`` (a redis-server). Faults, while it runs:

- :meth:`TcpProxy.pause`: a silent partition, like a dropped link. Nothing is
  forwarded in either direction and no socket is closed: a client's command waits
  for its reply until the client's own socket timeout, as over a link that drops
  every packet. New connections are accepted (the kernel completes them anyway) and
  held the same way. What was sent meanwhile stays in the proxy's buffers and the
  kernel's and is delivered by :meth:`TcpProxy.resume`, in order, even on a connection
  whose client has given up and closed it since: TCP delivers the data a sender
  wrote before its FIN once a link heals, so a command sent during the partition may
  run after it (the case a client's retry on a new connection makes interesting).
- :meth:`TcpProxy.cut`: every open connection reset (RST to both ends); new ones
  are served as usual.

One thread serves every connection (``selectors``): :meth:`TcpProxy.stop` closes every
socket and joins it. Counters (:attr:`TcpProxy.stats`) tell a test what happened.
"""

from __future__ import annotations

import contextlib
import selectors
import socket
import struct
import threading
from dataclasses import dataclass, field

from tests.support.servers import BackgroundServer

__all__ = ["ProxyStats", "TcpProxy"]

#: Bytes read from a socket at once; a side's buffer stops being read past 4 of these.
CHUNK = 65536
MAX_BUFFERED = 4 * CHUNK


@dataclass
class ProxyStats:
    connections: int = 0
    #: Bytes forwarded client -> server and server -> client.
    up: int = 0
    down: int = 0
    pauses: int = 0
    cuts: int = 0
    #: Connections reset by :meth:`TcpProxy.cut`.
    reset: int = 0
    errors: list[str] = field(default_factory=list)


class _Pair:
    """One proxied connection: the client's socket, the server's, what each side sent
    and the other has not been given yet."""

    def __init__(self, client: socket.socket, server: socket.socket) -> None:
        self.client = client
        self.server = server
        self.to_server = bytearray()
        self.to_client = bytearray()
        #: Sides that sent EOF (their peer is half-closed once it has what they sent).
        self.eof: set[socket.socket] = set()
        #: Sides half-closed by the proxy (``shutdown(SHUT_WR)``).
        self.shut: set[socket.socket] = set()
        #: Sides that can take nothing more (a write failed): what is for them is dropped.
        self.gone: set[socket.socket] = set()

    def peer(self, sock: socket.socket) -> socket.socket:
        return self.server if sock is self.client else self.client

    def outbox(self, sock: socket.socket) -> bytearray:
        """What is waiting to be written to ``sock``."""
        return self.to_client if sock is self.client else self.to_server

    def finished(self) -> bool:
        """Both sides sent EOF (or can take nothing) and nothing is left to deliver."""
        ends = all(s in self.eof or s in self.gone for s in (self.client, self.server))
        return ends and not self.to_server and not self.to_client


class TcpProxy(BackgroundServer):
    """``with TcpProxy(redis_port) as proxy:`` ... ``proxy.url()``, ``proxy.pause()``."""

    thread_name = "tcp-proxy"

    def __init__(self, upstream_port: int, *, upstream_host: str = "127.0.0.1") -> None:
        super().__init__()
        self.upstream = (upstream_host, upstream_port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.setblocking(False)
        self.port: int = self._listener.getsockname()[1]
        self.stats = ProxyStats()
        self._selector = selectors.DefaultSelector()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._lock = threading.Lock()
        self._pairs: dict[socket.socket, _Pair] = {}
        self._paused = False
        self._cut = False
        self._closed = False
        self._selector.register(self._listener, selectors.EVENT_READ)
        self._selector.register(self._wake_r, selectors.EVENT_READ)

    def url(self, db: int = 0, scheme: str = "redis") -> str:
        return f"{scheme}://127.0.0.1:{self.port}/{db}"

    @property
    def paused(self) -> bool:
        return self._paused

    # -- the faults (any thread) ------------------------------------------------------

    def pause(self) -> None:
        """Stop forwarding both ways; every socket stays open."""
        with self._lock:
            self._paused = True
            self.stats.pauses += 1
        self._wake()

    def resume(self) -> None:
        """Forward again, starting with what was held."""
        with self._lock:
            self._paused = False
        self._wake()

    def cut(self) -> None:
        """Reset every open connection (RST to the client and to the server)."""
        with self._lock:
            self._cut = True
            self.stats.cuts += 1
        self._wake()

    def open_connections(self) -> int:
        with self._lock:
            return len(set(self._pairs.values()))

    def _wake(self) -> None:
        with contextlib.suppress(OSError):
            self._wake_w.send(b"x")

    # -- the serving thread -----------------------------------------------------------

    def _serve(self) -> None:
        while not self._closed:
            self._interest()
            for key, events in self._selector.select(timeout=1.0):
                sock = key.fileobj
                assert isinstance(sock, socket.socket)
                if sock is self._wake_r:
                    with contextlib.suppress(OSError):
                        self._wake_r.recv(4096)
                elif sock is self._listener:
                    self._accept()
                else:
                    self._ready(sock, events)
            if self._cut:
                self._reset_all()

    def _interest(self) -> None:
        """What to wait for on each socket: nothing while paused; else read a side
        unless its peer's buffer is full, write a side while it has data waiting."""
        with self._lock:
            paused = self._paused
            pairs = set(self._pairs.values())
        for pair in pairs:
            for sock in (pair.client, pair.server):
                events = 0
                if not paused:
                    full = len(pair.outbox(pair.peer(sock))) >= MAX_BUFFERED
                    if sock not in pair.eof and not full:
                        events |= selectors.EVENT_READ
                    if pair.outbox(sock):
                        events |= selectors.EVENT_WRITE
                self._watch(sock, events)

    def _watch(self, sock: socket.socket, events: int) -> None:
        try:
            current = self._selector.get_key(sock).events
        except KeyError:
            if events:
                self._selector.register(sock, events)
            return
        if not events:
            self._selector.unregister(sock)
        elif events != current:
            self._selector.modify(sock, events)

    def _accept(self) -> None:
        try:
            client, _ = self._listener.accept()
        except (BlockingIOError, OSError):
            return
        try:
            server = socket.create_connection(self.upstream, timeout=5)
        except OSError as exc:
            self.stats.errors.append(f"upstream connect: {exc}")
            client.close()
            return
        for sock in (client, server):
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        pair = _Pair(client, server)
        with self._lock:
            self._pairs[client] = self._pairs[server] = pair
            self.stats.connections += 1

    def _ready(self, sock: socket.socket, events: int) -> None:
        with self._lock:
            pair = self._pairs.get(sock)
            paused = self._paused
        if pair is None or paused:
            return
        if events & selectors.EVENT_READ:
            self._read(pair, sock)
        if events & selectors.EVENT_WRITE and sock in self._pairs:
            self._write(pair, sock)
        self._close_if_done(pair)

    def _read(self, pair: _Pair, sock: socket.socket) -> None:
        try:
            data = sock.recv(CHUNK)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            pair.eof.add(sock)
        elif pair.peer(sock) not in pair.gone:
            pair.outbox(pair.peer(sock)).extend(data)

    def _write(self, pair: _Pair, sock: socket.socket) -> None:
        box = pair.outbox(sock)
        try:
            sent = sock.send(box)
        except BlockingIOError:
            return
        except OSError:
            # The receiver is gone: nothing more can reach it.
            box.clear()
            pair.gone.add(sock)
            return
        del box[:sent]
        if sock is pair.server:
            self.stats.up += sent
        else:
            self.stats.down += sent

    def _close_if_done(self, pair: _Pair) -> None:
        """Pass an EOF on once what came before it is delivered (a half-close, so the
        server still runs the commands it was just given and answers them), and close
        the pair once both sides are done."""
        for sock in (pair.client, pair.server):
            peer = pair.peer(sock)
            if sock in pair.eof and not pair.outbox(peer) and peer not in pair.shut:
                pair.shut.add(peer)
                with contextlib.suppress(OSError):
                    peer.shutdown(socket.SHUT_WR)
        if pair.finished():
            self._drop(pair)

    def _drop(self, pair: _Pair, *, reset: bool = False) -> None:
        with self._lock:
            for sock in (pair.client, pair.server):
                self._pairs.pop(sock, None)
        for sock in (pair.client, pair.server):
            with contextlib.suppress(KeyError, ValueError):
                self._selector.unregister(sock)
            if reset:  # SO_LINGER 0: close sends RST
                with contextlib.suppress(OSError):
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            sock.close()

    def _reset_all(self) -> None:
        with self._lock:
            self._cut = False
            pairs = set(self._pairs.values())
            self.stats.reset += len(pairs)
        for pair in pairs:
            self._drop(pair, reset=True)

    # -- life cycle -------------------------------------------------------------------

    def _shutdown(self) -> None:
        self._closed = True
        self._wake()

    def _cleanup(self) -> None:
        if self._thread.is_alive():
            raise RuntimeError("the TCP proxy's thread did not stop")
        with self._lock:
            pairs = set(self._pairs.values())
        for pair in pairs:
            self._drop(pair)
        self._selector.close()
        for sock in (self._listener, self._wake_r, self._wake_w):
            sock.close()
