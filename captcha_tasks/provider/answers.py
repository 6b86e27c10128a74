"""Answers in the one shape a task result has whatever the provider (docs: "What the
product returns"): a token or text; GeeTest v3's three and v4's five strings; AWS WAF's
voucher pair or ``{"aws_waf_token": ...}``; coordinates as ``[{"x": int, "y": int}]``;
a grid's tiles as ``{"tiles": [...], "rows": int, "cols": int}``, numbered from 0, left
to right then top to bottom, sorted (2Captcha and CaptchaAI count from 1, CapSolver
from 0, CapMonster Cloud answers a boolean per tile).
DataDome's cookie as ``{"name", "value", "set_cookie", "domain"}``; a kind with a shape
of its own has its declaration put the answer in it (``Captcha.shape_answer``).

Answers are told apart by their shape, since a poll does not know the captcha's type;
where the shape alone cannot tell, the kind's declaration puts the answer in its result's
shape once the type is known (``Captcha.shape_answer``, :func:`.captchas.for_type`).
An answer that has a known shape but wrong contents (a point without ``y``, a v4 field
that is not a string, a token or a field that is ``null``) is refused with a typed error
rather than handed on as a solve.
"""

from __future__ import annotations

import decimal
import json
import re
from collections.abc import Mapping
from typing import Any, Final

from ..errors import ProviderUnavailable, SolverError
from .base import Answer
from .kind import Solution

__all__ = [
    "CF_CLEARANCE",
    "CF_COOKIES",
    "GEETEST_V4_KEYS",
    "GRID_TILES",
    "Solution",
    "cf_cookies",
    "classic_solution",
    "datadome_cookie",
    "exact_fields",
    "grid_tiles",
    "json_solution",
    "malformed",
    "slot_answer",
    "solution_user_agent",
]


GEETEST_V4_KEYS: Final = ("captcha_id", "lot_number", "pass_token", "gen_time", "captcha_output")
_AWS_PAIR: Final = ("captcha_voucher", "existing_token")
#: A CapMonster Cloud ``CustomTask``'s solution: the answer's fields in ``data``, the
#: headers to send it with in ``headers`` (its TenDI page).
_CUSTOM_TASK_KEYS: Final = frozenset({"data", "headers"})
#: The order in which a JSON solution's fields are taken as "the" answer.
_TOKEN_FIELDS: Final = ("gRecaptchaResponse", "token", "text")
#: More points or larger coordinates than any captcha image has: garbage.
_MAX_POINTS = 100
_MAX_COORDINATE = 100_000
_PLAIN_POINT = re.compile(r"^x=(\d{1,6}),y=(\d{1,6})$")
#: Cloudflare's challenge cookie, and where an answer carries it with any others.
CF_CLEARANCE: Final = "cf_clearance"
CF_COOKIES: Final = "cookies"
#: A grid answer before its shape is known: its tiles, numbered from 0.
GRID_TILES: Final = "tiles"
#: More tiles than any grid has: garbage.
_MAX_TILES = 100


def malformed(what: str, value: object) -> ProviderUnavailable:
    """The error for an answer that is not what it claims to be."""
    shown = repr(value)
    shown = shown if len(shown) <= 80 else shown[:77] + "..."
    return ProviderUnavailable(f"malformed {what} answer: {shown}", "UNRECOGNISED_ANSWER", 5.0)


def cf_cookies(solution: Mapping[str, Any]) -> dict[str, Any] | None:
    """CapMonster Cloud's ``cf_clearance`` or CapSolver's ``cookies`` holding one, as
    ``{"cookies": {...}}`` (every cookie given: strings each); ``None``: neither."""
    cookies = solution.get(CF_COOKIES)
    if isinstance(cookies, dict) and CF_CLEARANCE in cookies:
        found = dict(cookies)
    elif CF_CLEARANCE in solution:
        found = {CF_CLEARANCE: solution[CF_CLEARANCE]}
    else:
        return None
    if not all(
        isinstance(name, str) and isinstance(value, str) and name and value
        for name, value in found.items()
    ):
        raise malformed("Cloudflare challenge", solution)
    return {CF_COOKIES: found}


def grid_tiles(solution: Solution, rows: int, cols: int) -> dict[str, Any]:
    """A grid's answer with its ``rows`` and ``cols``; a tile past its last is refused."""
    tiles = solution.get(GRID_TILES) if isinstance(solution, dict) else None
    if not isinstance(tiles, list) or any(not 0 <= tile < rows * cols for tile in tiles):
        raise malformed("grid", solution)
    return {GRID_TILES: tiles, "rows": rows, "cols": cols}


def datadome_cookie(line: str) -> dict[str, str]:
    """A ``datadome=<value>; Max-Age=...; Domain=...; Path=/; ...`` line (what 2Captcha
    and CapSolver send) as the result's cookie."""
    first, _, rest = line.strip().partition(";")
    name, sep, value = first.strip().partition("=")
    if name != "datadome" or not sep or not value.strip() or any(c.isspace() for c in value):
        raise malformed("DataDome", line)
    domain = ""
    for attribute in rest.split(";"):
        key, _, found = attribute.strip().partition("=")
        if key.lower() == "domain":
            domain = found.strip()
    return {
        "name": "datadome",
        "value": value.strip(),
        "set_cookie": line.strip(),
        "domain": domain,
    }


def _datadome(fields: dict[str, Any]) -> dict[str, str] | None:
    """CapSolver's and 2Captcha's ``cookie`` (``datadome=...``) or CapMonster's
    ``domains: {host: {cookies: {datadome: "<value>; Max-Age=..."}}}``; ``None``: neither."""
    cookie = fields.get("cookie")
    if isinstance(cookie, str) and cookie.startswith("datadome="):
        return datadome_cookie(cookie)
    domains = fields.get("domains")
    if not isinstance(domains, dict) or not domains:
        return None
    for entry in domains.values():
        cookies = entry.get("cookies") if isinstance(entry, dict) else None
        value = cookies.get("datadome") if isinstance(cookies, dict) else None
        if isinstance(value, str) and value:
            return datadome_cookie(value if value.startswith("datadome=") else f"datadome={value}")
    raise malformed("DataDome", fields)


def classic_solution(value: str | dict[str, Any] | list[Any]) -> Solution:
    """A res.php answer (``request`` of json=1, or what follows ``OK|``)."""
    if isinstance(value, list):
        return _points(value)
    if isinstance(value, dict):
        return _fields(value)
    if value.startswith("coordinates:"):
        return _points([_plain_point(part) for part in value[12:].split(";")])
    if value.startswith("click:"):
        # 2Captcha's grid answer, tiles from 1: click:1/4/7.
        return _tiles([_digits_only(part, value) for part in value[6:].split("/")], 1)
    return value


def solution_user_agent(solution: Mapping[str, Any]) -> str | None:
    """The user agent a getTaskResult ``solution`` names: its ``userAgent``, or a
    ``CustomTask``'s ``headers["User-Agent"]``; ``None``: none."""
    agent = solution.get("userAgent")
    headers = solution.get("headers")
    if agent is None and isinstance(headers, dict) and solution.keys() <= _CUSTOM_TASK_KEYS:
        agent = headers.get("User-Agent")
    return agent if isinstance(agent, str) and agent else None


def json_solution(solution: Mapping[str, Any]) -> Solution | None:
    """A getTaskResult ``solution`` (its ``userAgent`` aside, and a ``CustomTask``'s
    ``headers``: :func:`solution_user_agent`); ``None``: an empty one."""
    data = solution.get("data")
    if isinstance(data, dict) and solution.keys() <= _CUSTOM_TASK_KEYS:
        solution = data  # a CustomTask's answer: its fields
    # Before the token fields: CapSolver repeats cf_clearance as its ``token``.
    clearance = cf_cookies(solution)
    if clearance is not None:
        return clearance
    for name in _TOKEN_FIELDS:
        value = solution.get(name)
        if isinstance(value, str) and value:
            return value
    fields = {name: value for name, value in solution.items() if name != "userAgent"}
    if not fields:
        return None
    if "coordinates" in fields:
        points = fields["coordinates"]
        return _points(points if isinstance(points, list) else [points])
    grid = _grid_fields(fields)
    if grid is not None:
        return grid
    datadome = _datadome(fields)
    if datadome is not None:
        return datadome
    cookie = _aws_cookie(fields)
    if cookie is not None:
        return {"aws_waf_token": cookie}
    if {"challenge", "validate"} <= fields.keys():
        # GeeTest v3 in the shape the classic protocol gives. CapSolver sends no
        # seccode: GeeTest's is validate|jordan.
        return _fields(
            {
                "geetest_challenge": fields["challenge"],
                "geetest_validate": fields["validate"],
                "geetest_seccode": fields.get("seccode") or f"{fields['validate']}|jordan",
            }
        )
    return _fields(fields)


def _grid_fields(fields: dict[str, Any]) -> dict[str, Any] | None:
    """A grid's tiles: 2Captcha's ``click`` (from 1), CapSolver's ``objects`` (from 0) or
    CapMonster Cloud's ``answer`` (a boolean per tile); ``None``: no grid answer."""
    if isinstance(fields.get("click"), list):
        return _tiles(fields["click"], 1)
    if isinstance(fields.get("objects"), list):
        return _tiles(fields["objects"], 0)
    answer = fields.get("answer")
    if isinstance(answer, list) and answer and all(isinstance(a, bool) for a in answer):
        if len(answer) > _MAX_TILES:
            raise malformed("grid", answer)
        return {GRID_TILES: [index for index, chosen in enumerate(answer) if chosen]}
    return None


def _digits_only(part: str, value: str) -> int:
    if not _digits(part):
        raise malformed("grid", value)
    return int(part)


def _tiles(items: list[Any], first: int) -> dict[str, Any]:
    """Tile numbers counted from ``first``, as sorted distinct numbers from 0."""
    if len(items) > _MAX_TILES:
        raise malformed("grid", items)
    tiles: set[int] = set()
    for item in items:
        if isinstance(item, bool) or not isinstance(item, int) or item < first:
            raise malformed("grid", items)
        tiles.add(item - first)
    if any(tile >= _MAX_TILES for tile in tiles):
        raise malformed("grid", items)
    return {GRID_TILES: sorted(tiles)}


def _fields(fields: dict[str, Any]) -> dict[str, Any]:
    if "lot_number" in fields or "pass_token" in fields:
        return exact_fields("GeeTest v4", fields, GEETEST_V4_KEYS)
    if "captcha_voucher" in fields:
        return exact_fields("AWS WAF", fields, _AWS_PAIR)
    # GeeTest v3 and whatever else: strings (or numbers) each, never null or nested.
    for value in fields.values():
        if isinstance(value, bool) or not isinstance(value, str | int) or value == "":
            raise malformed("fields", fields)
    return fields


def exact_fields(what: str, fields: dict[str, Any], keys: tuple[str, ...]) -> dict[str, str]:
    out: dict[str, str] = {}
    for key in keys:
        value = fields.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            value = str(value)  # gen_time as a number: the same digits
        if not isinstance(value, str) or not value:
            raise malformed(what, fields)
        out[key] = value
    return out


def _aws_cookie(fields: dict[str, Any]) -> str | None:
    """CapSolver's ``cookie`` or CapMonster's ``cookies["aws-waf-token"]``."""
    cookie = fields.get("cookie")
    cookies = fields.get("cookies")
    if cookie is None and isinstance(cookies, dict):
        cookie = cookies.get("aws-waf-token")
    elif cookie is None:
        return None
    if not isinstance(cookie, str) or not cookie:
        raise malformed("AWS WAF", fields)
    return cookie


def _plain_point(part: str) -> dict[str, str]:
    match = _PLAIN_POINT.match(part.strip())
    if match is None:
        raise malformed("coordinates", part)
    return {"x": match.group(1), "y": match.group(2)}


def _points(items: list[Any]) -> list[dict[str, int]]:
    if not items or len(items) > _MAX_POINTS:
        raise malformed("coordinates", items)
    out: list[dict[str, int]] = []
    for item in items:
        if isinstance(item, dict) and item.keys() >= {"x", "y"}:
            x, y = item["x"], item["y"]
        elif isinstance(item, list) and len(item) == 2:
            x, y = item
        else:
            raise malformed("coordinates", items)
        out.append({"x": _coordinate(x, items), "y": _coordinate(y, items)})
    return out


def _coordinate(value: object, items: object) -> int:
    number: int | None = None
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif _digits(value) or (isinstance(value, float | decimal.Decimal) and _integral(value)):
        number = int(value)  # type: ignore[call-overload]  # digits or integral
    if number is None or not 0 <= number <= _MAX_COORDINATE:
        raise malformed("coordinates", items)
    return number


def _digits(value: object) -> bool:
    return isinstance(value, str) and value.isascii() and value.isdigit() and len(value) <= 6


def _integral(value: float | decimal.Decimal) -> bool:
    if isinstance(value, decimal.Decimal):
        return value.is_finite() and value == value.to_integral_value()
    return value.is_integer()


def slot_answer(captcha_id: str, slot: str) -> Answer | SolverError:
    """One classic answer (a read's ``request``, a batch read's slot, a pingback's
    ``code``): a dict comes as its JSON text, points as plain ``coordinates:...``; a
    malformed one is this captcha's error."""
    value: str | dict[str, Any] | list[Any] = slot
    if slot.startswith(("{", "[")):  # GeeTest / AWS WAF fields
        try:
            value = json.loads(slot)
        except ValueError:
            value = slot
    try:
        return Answer(captcha_id, classic_solution(value))
    except SolverError as exc:
        return exc
