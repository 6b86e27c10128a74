"""The image checks shared by the captcha types that carry a picture (:class:`~.captchas.Image`,
:class:`~.captchas.Coordinates`): one copy, so both refuse the same bytes the same way.

Each raises :class:`~captcha_tasks.errors.InvalidTaskInput` naming the field it was given
(``"Image.body: ..."``, ``"Coordinates.body: ..."``).
"""

from __future__ import annotations

import base64
import binascii
import os
from typing import NoReturn

from ._checks import _BASE64, _DATA_URL, _MAGIC, _fail

__all__ = [
    "DEFAULT_MAX_IMAGE_BYTES",
    "MAX_IMAGE_BYTES_CEILING",
    "MIN_IMAGE_BYTES",
    "check_body",
    "decode_base64",
    "image_kind",
    "read_image",
]

#: The stricter of the documented image limits (100 kB vs 1 MB); ``CAPTCHA_TASKS_MAX_IMAGE_BYTES``.
DEFAULT_MAX_IMAGE_BYTES = 100_000
#: The looser documented limit: what an image captcha may hold before ``validate()``.
MAX_IMAGE_BYTES_CEILING = 1_048_576
#: Providers answer ERROR_ZERO_CAPTCHA_FILESIZE below this.
MIN_IMAGE_BYTES = 100


def _size(count: int) -> str:
    if count >= 1_000_000:
        return f"{count / 1_000_000:.1f} MB"
    if count >= 1_000:
        return f"{count / 1_000:.0f} kB"
    return f"{count} bytes"


def _too_large(where: str, size: int, limit: int) -> NoReturn:
    """Refuse an image of ``size`` bytes over ``limit``, naming the limit and its setting."""
    if limit >= MAX_IMAGE_BYTES_CEILING:
        _fail(
            where,
            f"image of {_size(size)} ({size} bytes) is over the {_size(MAX_IMAGE_BYTES_CEILING)} "
            f"limit of any image ({MAX_IMAGE_BYTES_CEILING} bytes; "
            "CAPTCHA_TASKS_MAX_IMAGE_BYTES can set a lower one)",
        )
    _fail(
        where,
        f"image of {_size(size)} ({size} bytes) is over the {_size(limit)} limit "
        f"(CAPTCHA_TASKS_MAX_IMAGE_BYTES={limit})",
    )


def decode_base64(where: str, data: object, max_bytes: int = MAX_IMAGE_BYTES_CEILING) -> bytes:
    """Bytes from base64 text (line breaks and a ``data:image/...;base64,`` prefix allowed);
    text that would decode to more than ``max_bytes`` (at most the ceiling) is refused
    before it is decoded."""
    if not isinstance(data, str):
        _fail(where, f"base64 must be a string, got {type(data).__name__}")
    text = "".join(_DATA_URL.sub("", data.strip(), count=1).split())
    limit = min(max_bytes, MAX_IMAGE_BYTES_CEILING)
    if len(text) > (limit * 4) // 3 + 4:
        _too_large(where, len(text) * 3 // 4 - text[-2:].count("="), limit)
    if not text or len(text) % 4 or not _BASE64.match(text):
        _fail(where, "is not valid base64")
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        _fail(where, "is not valid base64")


def read_image(where: str, path: str | os.PathLike[str]) -> bytes:
    """An image file's bytes (at most one byte past the ceiling, which the checks refuse)."""
    try:
        with open(path, "rb") as file:
            return file.read(MAX_IMAGE_BYTES_CEILING + 1)
    except OSError as exc:
        _fail(where, f"cannot read {os.fspath(path)!r}: {exc.strerror or exc}")


def image_kind(where: str, body: bytes) -> tuple[str, str]:
    """``(extension, mime type)`` from the magic bytes."""
    for magic, extension, mime in _MAGIC:
        if body.startswith(magic):
            return extension, mime
    _fail(where, "is not a JPEG, PNG or GIF image (unknown magic bytes)")


def check_body(where: str, body: object, max_image_bytes: int) -> bytes:
    """``body`` as bytes if it is a JPEG, PNG or GIF within the size limits."""
    if isinstance(body, bytearray | memoryview):
        body = bytes(body)
    if not isinstance(body, bytes):
        _fail(where, f"must be bytes, got {type(body).__name__}")
    if not body:
        _fail(where, "is empty")
    if len(body) < MIN_IMAGE_BYTES:
        _fail(where, f"is {len(body)} bytes; providers refuse images under 100 bytes")
    if len(body) > max_image_bytes:
        _too_large(where, len(body), max_image_bytes)
    image_kind(where, body)
    return body
