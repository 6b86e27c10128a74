"""A canned answer for a ``requests.Session`` double whose ``post`` is replaced: the
provider clients read ``status_code``, ``headers`` and ``raw.read1`` inside ``with``,
nothing else, so this is all a scripted answer needs."""

from __future__ import annotations


class _Raw:
    def __init__(self, body: bytes) -> None:
        self._body = body

    def read1(self, size: int, decode_content: bool = True) -> bytes:
        chunk, self._body = self._body[:size], self._body[size:]
        return chunk


class CannedResponse:
    """A streamed response with ``status``, ``content_type`` and ``body``."""

    def __init__(self, status: int, content_type: str, body: bytes) -> None:
        self.status_code = status
        self.headers = {"Content-Type": content_type}
        self.raw = _Raw(body)

    def __enter__(self) -> CannedResponse:
        return self

    def __exit__(self, *exc: object) -> None:
        return None
