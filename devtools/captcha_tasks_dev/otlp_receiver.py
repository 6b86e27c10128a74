"""An OTLP/HTTP trace receiver on loopback: what an OpenTelemetry Collector's ``otlphttp``
receiver takes (``POST /v1/traces``, protobuf, gzip or not), decoded with the protocol's
own generated classes (``opentelemetry-proto``) into :class:`ReceivedSpan` records. The
trace tests export to it, and so does ``bench solve --traces``' traced run."""

from __future__ import annotations

import gzip
import http.server
import threading
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

__all__ = ["OtlpReceiver", "ReceivedSpan"]

_KINDS = {1: "internal", 2: "server", 3: "client", 4: "producer", 5: "consumer"}


def _value(any_value: Any) -> Any:
    kind = any_value.WhichOneof("value")
    if kind == "array_value":
        return [_value(v) for v in any_value.array_value.values]
    return getattr(any_value, kind) if kind else None


@dataclass
class ReceivedSpan:
    name: str
    trace_id: str
    span_id: str
    parent_id: str
    kind: str
    start_ns: int
    end_ns: int
    status: int  # 0 unset, 1 ok, 2 error
    status_message: str
    attributes: dict[str, Any] = field(default_factory=dict)
    resource: dict[str, Any] = field(default_factory=dict)
    scope: str = ""
    #: ``{"name", "time_ns", "attributes"}`` each
    events: list[dict[str, Any]] = field(default_factory=list)


class OtlpReceiver:
    """Spans POSTed to :attr:`url` ``/v1/traces``, in :attr:`spans` (thread-safe copy);
    served by a thread between :meth:`start` and :meth:`stop` (or a ``with`` block).
    ``port``: 0 for any free one."""

    def __init__(self, port: int = 0) -> None:
        self._spans: list[ReceivedSpan] = []
        self._bodies: list[bytes] = []
        self._lock = threading.Lock()
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                if self.path != "/v1/traces":
                    self.send_error(404)
                    return
                receiver._received(body)
                reply = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *_: Any) -> None:
                pass

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.1,), name="otlp-receiver", daemon=True
        )

    def start(self) -> OtlpReceiver:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._thread.join(timeout=5)
        self._server.server_close()

    def __enter__(self) -> OtlpReceiver:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    @property
    def spans(self) -> list[ReceivedSpan]:
        with self._lock:
            return list(self._spans)

    @property
    def raw(self) -> bytes:
        """Every decoded request's bytes, as received: for a search of secrets."""
        with self._lock:
            return b"\n".join(self._bodies)

    def _received(self, body: bytes) -> None:
        request = ExportTraceServiceRequest.FromString(body)
        decoded = []
        for resource_spans in request.resource_spans:
            resource = {a.key: _value(a.value) for a in resource_spans.resource.attributes}
            for scope_spans in resource_spans.scope_spans:
                for s in scope_spans.spans:
                    decoded.append(
                        ReceivedSpan(
                            name=s.name,
                            trace_id=s.trace_id.hex(),
                            span_id=s.span_id.hex(),
                            parent_id=s.parent_span_id.hex(),
                            kind=_KINDS.get(s.kind, str(s.kind)),
                            start_ns=s.start_time_unix_nano,
                            end_ns=s.end_time_unix_nano,
                            status=s.status.code,
                            status_message=s.status.message,
                            attributes={a.key: _value(a.value) for a in s.attributes},
                            resource=resource,
                            scope=scope_spans.scope.name,
                            events=[
                                {
                                    "name": e.name,
                                    "time_ns": e.time_unix_nano,
                                    "attributes": {a.key: _value(a.value) for a in e.attributes},
                                }
                                for e in s.events
                            ],
                        )
                    )
        with self._lock:
            self._spans += decoded
            self._bodies.append(body)
