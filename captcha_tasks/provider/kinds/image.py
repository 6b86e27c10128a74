"""A text captcha read from its image: the whole declaration of the kind (its fields and
their checks, its :class:`~captcha_tasks.provider.kind.Timing`, its offer at each
provider, its wire parameters)."""

from __future__ import annotations

import base64
import dataclasses
import os
import re
from typing import ClassVar, Literal

from ...settings.parsing import Provider
from .._checks import _fail, _flag, _int, _optional_text, _set, _shown, _text
from .._images import MAX_IMAGE_BYTES_CEILING, check_body, decode_base64, image_kind, read_image
from ..kind import (
    BASE64_IMAGE,
    NOT_A_PARAMETER,
    Captcha,
    Offers,
    Params,
    SolveCall,
    Task,
    Timing,
    classic,
    image_params,
    task,
)

__all__ = ["Image"]

_LANG = re.compile(r"^[a-z]{2}$")


#: Image hints in.php takes as integers (booleans as 0 / 1), in the order they are sent.
_IMAGE_HINTS = ("numeric", "min_len", "max_len", "phrase", "regsense", "calc")


@dataclasses.dataclass(frozen=True, slots=True)
class Image(Captcha):
    """A JPEG, PNG or GIF image with optional hints for the workers.

    ``multipart`` asks for the image to be uploaded as a file rather than inline as
    base64 text (:meth:`from_file` sets it; in.php's ``method=post`` vs ``method=base64``).
    """

    type: ClassVar[Literal["image"]] = "image"
    solve_call: ClassVar[SolveCall] = SolveCall(
        """Read the text of an image (base64; jpg, png or gif): the text in ``solution``.

        Hints for the solver, each as in 2Captcha's API: ``numeric`` (1 digits only, 2
        letters only, 3 either, 4 both), ``min_len``, ``max_len``, ``phrase`` (several
        words), ``regsense`` (case matters), ``calc`` (an arithmetic sum to compute),
        ``lang`` (a language code), ``textinstructions`` (shown to the worker).""",
        proxy="none",
    )
    timing: ClassVar[Timing] = Timing(first_poll=5.0, deadline=90.0, drain_ceiling=0.5)
    offers: ClassVar[Offers] = {
        "captchaai": classic(),
        "2captcha": classic(),
        "2captcha-v2": task("ImageToTextTask", "ImageToTextTask"),
        "anticaptcha": task("ImageToTextTask", "ImageToTextTask"),
        "capsolver": task("ImageToTextTask", "ImageToTextTask"),
        "capmonster": task("ImageToTextTask", "ImageToTextTask"),
    }
    body: bytes = dataclasses.field(repr=False, metadata=BASE64_IMAGE)
    numeric: int | None = None
    min_len: int | None = None
    max_len: int | None = None
    phrase: bool | None = None
    regsense: bool | None = None
    calc: bool | None = None
    lang: str | None = None
    textinstructions: str | None = None
    multipart: bool = dataclasses.field(default=False, metadata=NOT_A_PARAMETER)

    @classmethod
    def from_base64(
        cls, data: str, *, max_image_bytes: int = MAX_IMAGE_BYTES_CEILING, **hints: object
    ) -> Image:
        """From base64 text (line breaks and a ``data:image/...;base64,`` prefix allowed);
        text of an image over ``max_image_bytes`` is refused before it is decoded."""
        body = decode_base64("Image.body", data, max_image_bytes)
        return cls._with_hints(body, False, hints)

    @classmethod
    def from_file(cls, path: str | os.PathLike[str], **hints: object) -> Image:
        """From an image file, uploaded as multipart (``method=post``)."""
        return cls._with_hints(read_image("Image.from_file", path), True, hints)

    @classmethod
    def _with_hints(cls, body: bytes, multipart: bool, hints: dict[str, object]) -> Image:
        names = {f.name for f in dataclasses.fields(cls)} - {"body", "multipart"}
        unknown = sorted(set(hints) - names)
        if unknown:
            _fail(
                "Image", f"unknown hint(s) {', '.join(unknown)}; known: {', '.join(sorted(names))}"
            )
        return cls(body, multipart=multipart, **hints)  # type: ignore[arg-type]

    @property
    def kind(self) -> tuple[str, str]:
        """``(extension, mime type)`` from the magic bytes."""
        return image_kind("Image.body", self.body)

    def _check(self, max_image_bytes: int) -> None:
        _set(self, "body", check_body("Image.body", self.body, max_image_bytes))
        if self.numeric is not None:
            _int("Image.numeric", self.numeric, 0, 4)
        for name in ("min_len", "max_len"):
            if getattr(self, name) is not None:
                _int(f"Image.{name}", getattr(self, name), 0, 20)
        if self.min_len and self.max_len and self.min_len > self.max_len:
            _fail("Image.min_len", f"{self.min_len} is greater than max_len {self.max_len}")
        for name in ("phrase", "regsense", "calc"):
            if getattr(self, name) is not None:
                _set(self, name, _flag(f"Image.{name}", getattr(self, name)))
        if self.lang is not None:
            lang = _text("Image.lang", self.lang, max_len=2).lower()
            if not _LANG.match(lang):
                _fail("Image.lang", f"must be a 2-letter language code, got {_shown(self.lang)}")
            _set(self, "lang", lang)
        _optional_text("Image.textinstructions", self.textinstructions, max_len=140, spaces=True)
        _set(self, "multipart", _flag("Image.multipart", self.multipart))

    def __repr__(self) -> str:
        hints = ", ".join(
            f"{f.name}={getattr(self, f.name)!r}"
            for f in dataclasses.fields(self)
            if f.name != "body" and getattr(self, f.name) not in (None, False)
        )
        return f"Image(<{len(self.body)} bytes>{', ' if hints else ''}{hints})"

    def classic_params(self) -> Params:
        params = image_params(self.body, self.multipart)
        for name in _IMAGE_HINTS:  # integers, booleans as 0 / 1, in this order
            value = getattr(self, name)
            params[name] = None if value is None else str(int(value))
        params.update(lang=self.lang, textinstructions=self.textinstructions)
        return params

    def json_fields(self, provider: Provider) -> Task:
        task: Task = {"body": base64.b64encode(self.body).decode("ascii")}
        if provider in ("2captcha-v2", "anticaptcha"):
            task.update(
                phrase=self.phrase,
                case=self.regsense,
                numeric=self.numeric,
                math=self.calc,
                minLength=self.min_len or None,
                maxLength=self.max_len or None,
                comment=self.textinstructions,
            )
        elif provider == "capmonster":
            task.update(case=self.regsense, math=self.calc)
            task["numeric"] = None if self.numeric is None else self.numeric == 1
        return task
