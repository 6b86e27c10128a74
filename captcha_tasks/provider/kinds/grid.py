"""A grid of image tiles to select: the whole declaration of the kind (its fields and their
checks, its :class:`~captcha_tasks.provider.kind.Timing`, its offer at each provider,
its wire parameters)."""

from __future__ import annotations

import base64
import dataclasses
import re
from typing import ClassVar, Final, Literal

from ...settings.parsing import Provider
from .._checks import _int, _set, _text
from .._images import MAX_IMAGE_BYTES_CEILING, check_body, decode_base64, image_kind
from ..answers import grid_tiles
from ..kind import (
    BASE64_IMAGE,
    AnswerContext,
    Captcha,
    Offers,
    Params,
    Solution,
    SolveCall,
    Task,
    Timing,
    classic,
    image_params,
    in_php,
    not_offered,
    task,
)

__all__ = ["GRID_SIDES", "Grid"]


#: reCAPTCHA's object ids (``/m/015qff``: traffic lights), CapSolver's question list.
_OBJECT_ID = re.compile(r"^/m/[0-9a-z_]{2,16}$")


#: Rows and columns of a grid: reCAPTCHA's 3x3 and 4x4 (and the 1x1 of a replaced
#: tile), FunCaptcha's 2x3; no provider states a larger one.
GRID_SIDES: Final = (1, 10)
#: The grids CapSolver's and CapMonster Cloud's reCAPTCHA classification reads: 3x3,
#: 4x4 and the 1x1 of one replaced tile (capmonstercloudclient's metadata.Grid values).
_RECAPTCHA_GRIDS: Final = frozenset({(1, 1), (3, 3), (4, 4)})


@dataclasses.dataclass(frozen=True, slots=True)
class Grid(Captcha):
    """An image of a grid of tiles and the instruction saying which to click (reCAPTCHA's
    "Select all images with ..."): one image of the whole grid, ``rows`` by ``cols``.

    ``instruction`` is the text the page shows (``"Select all images with buses"``) or
    reCAPTCHA's object id (``"/m/01bjv"``), which CapSolver's question needs. The image is
    checked as :class:`~.captchas.Image`'s is.
    """

    type: ClassVar[Literal["grid"]] = "grid"
    solve_call: ClassVar[SolveCall] = SolveCall(
        """The tiles to click on one image of a ``rows`` x ``cols`` grid (base64; jpg, png or
        gif), which ``instruction`` names (the page's text, or reCAPTCHA's object id
        ``/m/...``, which CapSolver needs): ``{"tiles": [...], "rows": ..., "cols": ...}`` in
        ``solution``, tiles numbered from 0 left to right then top to bottom, sorted.""",
        result="GridResult",
        proxy="none",
    )
    # Solved by a person at 2Captcha, as its images are (CapSolver answers at createTask):
    # the coordinates' deadline and drain ceiling.
    timing: ClassVar[Timing] = Timing(first_poll=5.0, deadline=90.0, drain_ceiling=10.0)
    offers: ClassVar[Offers] = {
        "captchaai": classic(
            "pypi captchaai v1.0.1 (Grid/BLS in its list of types), "
            "blog.captchaai.com/how-grid-image-captchas-work (tiles numbered from 1); in.php as "
            "2Captcha's",
        ),
        "2captcha": classic(
            "2captcha/2captcha-python 2.1.2 grid() (recaptcha=1, recaptcharows, recaptchacols, "
            "textinstructions; answer click:1/4/7)",
        ),
        "2captcha-v2": task(
            "GridTask",
            None,
            source=(
                '2captcha.com/api-docs/grid (GridTask: body, rows, columns, comment; "1 is top '
                'left tile"; its recaptcha-grid page says 0: tiles read as 1-based)'
            ),
        ),
        "anticaptcha": not_offered(
            "not in anti-captcha.com/apidoc/task-types, anticaptchaofficial 1.0.72 nor "
            "python-anticaptcha 2.0.0 tasks (only a legacy get_cells_numbers reader)",
        ),
        "capsolver": task(
            "ReCaptchaV2Classification",
            None,
            source=(
                "docs.capsolver.com/guide/recognition/ReCaptchaClassification "
                "(ReCaptchaV2Classification: image, question as a /m/ id; answered at "
                "createTask; objects from 0), capsolver 1.0.7 check.py"
            ),
        ),
        "capmonster": task(
            "ComplexImageTask",
            None,
            source=(
                "capmonstercloudclient 4.3.1 RecaptchaComplexImageTaskRequest "
                "(ComplexImageTask, class recaptcha, imagesBase64 of one image, metadata Grid "
                "and Task or TaskDefinition); answer as one boolean per tile "
                "(docs.capmonster.cloud recaptcha-click, not re-read here)"
            ),
        ),
    }
    body: bytes = dataclasses.field(repr=False, metadata=BASE64_IMAGE)
    instruction: str = dataclasses.field(metadata=in_php("textinstructions"))
    rows: int = dataclasses.field(default=3, metadata=in_php("recaptcharows"))
    cols: int = dataclasses.field(default=3, metadata=in_php("recaptchacols"))

    @classmethod
    def from_base64(
        cls,
        data: str,
        instruction: str,
        *,
        rows: int = 3,
        cols: int = 3,
        max_image_bytes: int = MAX_IMAGE_BYTES_CEILING,
    ) -> Grid:
        """From base64 text (line breaks and a ``data:image/...;base64,`` prefix allowed);
        text of an image over ``max_image_bytes`` is refused before it is decoded."""
        body = decode_base64("Grid.body", data, max_image_bytes)
        return cls(body, instruction, rows, cols)

    @property
    def kind(self) -> tuple[str, str]:
        """``(extension, mime type)`` from the magic bytes."""
        return image_kind("Grid.body", self.body)

    @property
    def tiles(self) -> int:
        """How many tiles the grid has."""
        return self.rows * self.cols

    @property
    def is_object_id(self) -> bool:
        """Whether ``instruction`` is reCAPTCHA's object id (``/m/...``), not its text."""
        return _OBJECT_ID.match(self.instruction) is not None

    @classmethod
    def shape_answer(cls, solution: Solution, context: AnswerContext) -> Solution:
        # Its tiles with the grid's rows and cols (a tile past the last refused).
        return solution if context.grid is None else grid_tiles(solution, *context.grid)

    def _check(self, max_image_bytes: int) -> None:
        _set(self, "body", check_body("Grid.body", self.body, max_image_bytes))
        # 2Captcha's textinstructions / comment: 140 characters at most.
        _text("Grid.instruction", self.instruction, max_len=140, spaces=True)
        for name in ("rows", "cols"):
            _int(f"Grid.{name}", getattr(self, name), *GRID_SIDES)

    def __repr__(self) -> str:
        shape = f"{self.rows}x{self.cols}"
        return f"Grid(<{len(self.body)} bytes>, {self.instruction!r}, {shape})"

    def offer_condition(self, provider: Provider, *, proxied: bool) -> str | None:
        # CapSolver and CapMonster Cloud classify reCAPTCHA grids only; CapSolver's
        # question is an object id from its list, never the text.
        if provider not in ("capsolver", "capmonster"):
            return None
        if (self.rows, self.cols) not in _RECAPTCHA_GRIDS:
            return f"solves {self.what} of 3x3, 4x4 or 1x1 tiles only, not {self.rows}x{self.cols}"
        if provider == "capsolver" and not self.is_object_id:
            return (
                f"solves {self.what} only with reCAPTCHA's object id as the instruction "
                "(/m/..., its question list), not the text"
            )
        return None

    def classic_params(self) -> Params:
        # 2Captcha's grid method (2captcha-python 2.1.2 grid(): recaptcha=1, rows and cols
        # as recaptcharows / recaptchacols, the text as textinstructions).
        return {
            **image_params(self.body, False),
            "recaptcha": "1",
            "recaptcharows": str(self.rows),
            "recaptchacols": str(self.cols),
            "textinstructions": self.instruction,
        }

    def json_fields(self, provider: Provider) -> Task:
        body = base64.b64encode(self.body).decode("ascii")
        if provider == "capsolver":
            # ReCaptchaV2Classification: the image and reCAPTCHA's object id as ``question``
            # (its list of /m/ ids); the grid it reads from the image.
            return {"image": body, "question": self.instruction}
        if provider == "capmonster":
            # ComplexImageTask of class recaptcha (capmonstercloudclient's
            # RecaptchaComplexImageTaskRequest): one image, metadata.Grid "3x3" and the
            # instruction as Task (its text) or TaskDefinition (the object id).
            label = "TaskDefinition" if self.is_object_id else "Task"
            metadata = {"Grid": f"{self.rows}x{self.cols}", label: self.instruction}
            return {"class": "recaptcha", "imagesBase64": [body], "metadata": metadata}
        # 2Captcha's GridTask (2captcha.com/api-docs/grid).
        return {"body": body, "rows": self.rows, "columns": self.cols, "comment": self.instruction}
