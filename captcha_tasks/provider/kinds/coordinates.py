"""Points to click on an image: the whole declaration of the kind (its fields and their
checks, its :class:`~captcha_tasks.provider.kind.Timing`, its offer at each provider,
its wire parameters)."""

from __future__ import annotations

import base64
import dataclasses
import os
from typing import ClassVar, Literal

from ...settings.parsing import Provider
from .._checks import _flag, _optional_text, _set
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
    not_offered,
    task,
)

__all__ = ["Coordinates"]


@dataclasses.dataclass(frozen=True, slots=True)
class Coordinates(Captcha):
    """An image whose answer is the points to click (``textinstructions`` says which).

    The image is checked as :class:`~.captchas.Image`'s is; ``multipart`` as there.
    """

    type: ClassVar[Literal["coordinates"]] = "coordinates"
    solve_call: ClassVar[SolveCall] = SolveCall(
        """The points to click on an image (base64; jpg, png or gif), as
        ``[{"x": int, "y": int}, ...]`` in ``solution``.""",
        result="CoordinatesResult",
        proxy="none",
    )
    # Its drain ceiling: points clicked by a worker, not OCR's 0.5 s: twice the 5 s
    # typical solve.
    timing: ClassVar[Timing] = Timing(first_poll=5.0, deadline=90.0, drain_ceiling=10.0)
    offers: ClassVar[Offers] = {
        "captchaai": not_offered(),
        "2captcha": classic(),
        "2captcha-v2": task("CoordinatesTask", None),
        "anticaptcha": task("ImageToCoordinatesTask", None),
        "capsolver": not_offered(),
        "capmonster": not_offered(),
    }
    body: bytes = dataclasses.field(repr=False, metadata=BASE64_IMAGE)
    textinstructions: str | None = None
    multipart: bool = dataclasses.field(default=False, metadata=NOT_A_PARAMETER)

    @classmethod
    def from_base64(
        cls,
        data: str,
        *,
        textinstructions: str | None = None,
        max_image_bytes: int = MAX_IMAGE_BYTES_CEILING,
    ) -> Coordinates:
        """From base64 text (line breaks and a ``data:image/...;base64,`` prefix allowed);
        text of an image over ``max_image_bytes`` is refused before it is decoded."""
        body = decode_base64("Coordinates.body", data, max_image_bytes)
        return cls(body, textinstructions)

    @classmethod
    def from_file(
        cls, path: str | os.PathLike[str], *, textinstructions: str | None = None
    ) -> Coordinates:
        """From an image file, uploaded as multipart (``method=post``)."""
        body = read_image("Coordinates.from_file", path)
        return cls(body, textinstructions, multipart=True)

    @property
    def kind(self) -> tuple[str, str]:
        """``(extension, mime type)`` from the magic bytes."""
        return image_kind("Coordinates.body", self.body)

    def _check(self, max_image_bytes: int) -> None:
        _set(self, "body", check_body("Coordinates.body", self.body, max_image_bytes))
        _optional_text(
            "Coordinates.textinstructions", self.textinstructions, max_len=140, spaces=True
        )
        _set(self, "multipart", _flag("Coordinates.multipart", self.multipart))

    def __repr__(self) -> str:
        hint = "" if self.textinstructions is None else f", {self.textinstructions!r}"
        return f"Coordinates(<{len(self.body)} bytes>{hint})"

    def classic_params(self) -> Params:
        return {
            **image_params(self.body, self.multipart),
            "coordinatescaptcha": "1",
            "textinstructions": self.textinstructions,
        }

    def json_fields(self, provider: Provider) -> Task:
        return {
            "body": base64.b64encode(self.body).decode("ascii"),
            "comment": self.textinstructions,
            "mode": "points" if provider == "anticaptcha" else None,
        }
