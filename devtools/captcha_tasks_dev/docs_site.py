"""The documentation site's build hook (``hooks:`` in mkdocs.yml): the reference blocks
that the code is the truth of, generated at each build.

A page asks for one with a marker line, replaced by :func:`on_page_markdown`:

- ``<!-- generate:settings -->``: every variable (:mod:`.settings_reference`);
- ``<!-- generate:errors -->``: the error classes as a tree, from
  :mod:`captcha_tasks.errors` (each class's first docstring line and default code);
- ``<!-- generate:redis-keys -->``: the key table of :mod:`captcha_tasks.state.keys`'s
  docstring, and its TTL constants;
- ``<!-- generate:offers -->``: the provider x captcha type matrix of
  :func:`captcha_tasks.provider.offers.offer_matrix`;
- ``<!-- generate:cli -->``: every ``captcha-tasks`` command, from its click group;
- ``<!-- generate:kind-tasks -->``: a reference entry for each captcha kind's solve task
  (:mod:`captcha_tasks.worker.kind_tasks`), in the order the kinds are declared;
- ``<!-- generate:assumptions -->``: what the Celery seam relies on, its fallback and
  upstream reference, from :data:`captcha_tasks.worker.celery_internals.contracts.ASSUMPTIONS`.

Nothing here is imported by the runtime.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from typing import Any

__all__ = [
    "GENERATORS",
    "LABELS",
    "assumptions_table",
    "cli_reference",
    "errors_tree",
    "kind_tasks",
    "offer_cell",
    "offers_table",
    "on_page_markdown",
    "redis_keys_table",
]

_MARKER = re.compile(r"^<!-- generate:([a-z-]+) -->$", re.MULTILINE)


def _first_line(doc: str | None) -> str:
    text = " ".join((doc or "").strip().split("\n\n")[0].split())
    text = re.sub(r":(?:data|mod|class|meth|func|attr):`~?([^`]+)`", r"`\1`", text)
    return text.replace("``", "`")


def errors_tree() -> str:
    """Every exception class of :mod:`captcha_tasks.errors` under its parent."""
    from captcha_tasks import errors

    classes = [
        obj
        for obj in vars(errors).values()
        if inspect.isclass(obj)
        and issubclass(obj, errors.CaptchaTasksError)
        and obj.__module__ == errors.__name__
    ]
    children: dict[type, list[type]] = {}
    for cls in classes:
        if cls is errors.CaptchaTasksError:
            continue
        parent = next(b for b in cls.__mro__[1:] if b in classes)
        children.setdefault(parent, []).append(cls)
    lines: list[str] = []

    def walk(cls: type, depth: int) -> None:
        code = getattr(cls, "default_code", None)
        also = [b.__name__ for b in cls.__bases__ if b not in classes and b is not Exception]
        extra = f" (also a `{'`, `'.join(also)}`)" if also else ""
        code_text = f" Code `{code}`." if code else ""
        lines.append(
            f"{'    ' * depth}- **`{cls.__name__}`**{extra}: {_first_line(cls.__doc__)}{code_text}"
        )
        for child in children.get(cls, []):
            walk(child, depth + 1)

    walk(errors.CaptchaTasksError, 0)
    return "\n".join(lines)


def redis_keys_table() -> str:
    """The key table of keys.py's docstring as markdown, then its TTL constants."""
    from captcha_tasks.state import keys

    doc = keys.__doc__ or ""
    rows: list[list[str]] = []
    for line in doc.splitlines():
        if line.startswith("``{p}"):
            key_end = line.index("``", 2) + 2
            rest = line[key_end:].split(None, 1)
            rows.append([line[:key_end], rest[0], rest[1] if len(rest) > 1 else ""])
        elif rows and line.startswith(" ") and line.strip():
            rows[-1][2] += " " + line.strip()
        elif rows and line.startswith("===") and len(rows) > 0:
            break
    out = ["| key | type | what |", "|---|---|---|"]
    for key, kind, what in rows:
        key_text = key.replace("``", "`").replace("{p}", "ct:")
        what_text = _first_line(what).replace("|", "\\|")
        out.append(f"| {key_text} | {kind} | {what_text} |")
    tail = doc.split("=" * 28)[-1].strip()
    out += ["", _first_line(tail), "", "| constant | seconds | what |", "|---|---|---|"]
    source = inspect.getsource(keys)
    for match in re.finditer(r"((?:^#: .*\n)+)^([A-Z_]+) = ([\d_* ]+)$", source, re.MULTILINE):
        comment = " ".join(part[3:] for part in match.group(1).splitlines())
        out.append(f"| `{match.group(2)}` | {getattr(keys, match.group(2))} | {comment} |")
    return "\n".join(out)


#: Row labels of the matrix, in its order: every feature :func:`offer_matrix` knows.
LABELS = {
    "recaptcha_v2": "reCAPTCHA v2 (and Enterprise with `data_s`)",
    "recaptcha_v3": "reCAPTCHA v3",
    "turnstile": "Turnstile",
    "turnstile_challenge": "Turnstile challenge mode (`pagedata`)",
    "hcaptcha": "hCaptcha",
    "image": "image to text",
    "coordinates": "image to coordinates",
    "geetest": "GeeTest v3",
    "geetest_v4": "GeeTest v4",
    "funcaptcha": "FunCaptcha / Arkose",
    "aws_waf": "AWS WAF",
    "mtcaptcha": "MTCaptcha",
    "prosopo": "Prosopo Procaptcha",
    "friendly_captcha": "Friendly Captcha",
    "grid": "Image grid",
    "altcha": "Altcha",
    "datadome": "DataDome",
    "cloudflare_challenge": "Cloudflare challenge page (`cf_clearance`)",
    "yidun": "Yidun (NetEase)",
    "binance": "Binance",
    "tencent": "Tencent (TenDI)",
}
#: Read from their bytes: whether a proxy exists for them means nothing.
_NO_PROXY = {"image", "coordinates", "grid"}


def offer_cell(feature: str, value: str) -> str:
    """One cell: what :func:`offer_matrix` says, in a reader's words."""
    if value == "not offered":
        return "—"
    if value == "offered" or feature in _NO_PROXY:
        return "yes"
    proxyless, proxy = (part.strip() for part in value.split("/"))
    if proxy == "-":
        return "yes, no proxy"
    if proxyless == "-":
        return "proxy only"
    return "yes"


def offers_table() -> str:
    """The provider x captcha type matrix, markdown."""
    from captcha_tasks.provider.offers import WITHDRAWN, offer_matrix
    from captcha_tasks.settings import PROTOCOLS, PROVIDERS

    matrix = offer_matrix()
    lines = [
        "| captcha | " + " | ".join(f"`{p}`" for p in PROVIDERS) + " |",
        "|---|" + "---|" * len(PROVIDERS),
        "| protocol | " + " | ".join(PROTOCOLS[p] for p in PROVIDERS) + " |",
    ]
    features = list(LABELS) + sorted({f for row in matrix.values() for f in row} - set(LABELS))
    for feature in features:
        cells = [offer_cell(feature, matrix[p].get(feature, "not offered")) for p in PROVIDERS]
        for i, provider in enumerate(PROVIDERS):
            if feature in WITHDRAWN.get(provider, {}):
                cells[i] = "withdrawn"
        lines.append(f"| {LABELS.get(feature, feature)} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n\n" + sources_table()


def sources_table() -> str:
    """Each cell's state and the public source it was checked against, markdown."""
    from captcha_tasks.provider.offers import catalogue

    lines = ["| provider | captcha | state | source |", "|---|---|---|---|"]
    for provider, cells in catalogue().items():
        for feature in [*LABELS, *sorted(set(cells) - set(LABELS))]:
            cell = cells[feature]
            source = cell.source.replace("|", "\\|")
            label = LABELS.get(feature, feature)
            lines.append(f"| `{provider}` | {label} | {cell.state} | {source} |")
    return "\n".join(lines)


def cli_reference() -> str:
    """Every command of ``captcha-tasks`` (mkdocs-click's markdown of the click group),
    with ``][`` outside code escaped so that help text such as ``[scheme://][user@]``
    is not read as a markdown reference."""
    from mkdocs_click._docs import make_command_docs

    from captcha_tasks.cli.main import main

    lines = make_command_docs(
        prog_name="captcha-tasks", command=main, depth=1, style="table", list_subcommands=True
    )
    out: list[str] = []
    fenced = False
    for line in lines:
        if line.lstrip().startswith("```"):
            fenced = not fenced
        if not fenced:
            # click 8.3's "no default" marker, which mkdocs-click prints as a default.
            line = line.replace("`Sentinel.UNSET`", "").replace("][", "]\\[")
        out.append(line)
    return "\n".join(out)


def assumptions_table() -> str:
    """One row per assumption of the seam: what it relies on, what the worker does
    where it does not hold, and the upstream issue that would let it go."""
    from captcha_tasks.worker.celery_internals.contracts import ASSUMPTIONS

    rows = [
        "| assumption | relies on | where it does not hold | upstream |",
        "|---|---|---|---|",
    ]
    for a in ASSUMPTIONS.values():
        cells = (f"`{a.name}`", a.relies_on, a.fallback, a.upstream)
        rows.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(rows)


def kind_tasks() -> str:
    """An mkdocstrings entry for each generated solve task, in the kinds' order."""
    from captcha_tasks.provider import CAPTCHA_CLASSES

    names = [f"solve_{cls.type}" for cls in CAPTCHA_CLASSES.values() if cls.solve_call]
    return "\n\n".join(f"::: captcha_tasks.{name}" for name in names)


def _settings() -> str:
    from captcha_tasks_dev.settings_reference import render

    return render().split("\n", 1)[1].lstrip("\n")  # the page has its own title


#: Marker name -> the markdown it stands for.
GENERATORS: dict[str, Callable[[], str]] = {
    "settings": _settings,
    "errors": errors_tree,
    "redis-keys": redis_keys_table,
    "offers": offers_table,
    "cli": cli_reference,
    "assumptions": assumptions_table,
    "kind-tasks": kind_tasks,
}


def on_page_markdown(markdown: str, **_: Any) -> str:
    """mkdocs hook: each marker line replaced by its generated block."""
    return _MARKER.sub(lambda m: GENERATORS[m.group(1)](), markdown)
