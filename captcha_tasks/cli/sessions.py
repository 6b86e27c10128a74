"""``captcha-tasks sessions``: look at, seed and drop the shared cookies of a host.

Cookie values are session secrets: ``show`` masks them unless ``--reveal`` is given.
``export`` prints them in full because that is its purpose (write them with ``-o``,
which creates the file readable by its owner only).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import click

from ..session.cookies import CookieStore, domain_matches, mask_value, normalize_host
from ..settings import get_settings
from ..state.clock import local_time
from ..state.redis import state_redis
from .errors import one_line_errors

__all__ = ["sessions_group"]


def _store() -> CookieStore:
    settings = get_settings()
    return CookieStore(state_redis(settings), settings)


def _when(epoch: float | None, now: float) -> str:
    if epoch is None:
        return "session"
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(epoch))
    return f"{stamp} ({_age(epoch - now)})"


def _age(seconds: float) -> str:
    sign, seconds = ("in ", seconds) if seconds >= 0 else ("", -seconds)
    for unit, size in (("d", 86_400), ("h", 3_600), ("m", 60)):
        if seconds >= size:
            return f"{sign}{seconds / size:.0f}{unit}" + ("" if sign else " ago")
    return f"{sign}{seconds:.0f}s" + ("" if sign else " ago")


@click.group("sessions")
def sessions_group() -> None:
    """Shared session state per host: the cookies every worker loads and merges back."""


@sessions_group.command("show")
@click.argument("host")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (the stored fields).")
@click.option("--playwright", is_flag=True, help="Print Playwright/Puppeteer cookies() JSON.")
@click.option("--reveal", is_flag=True, help="Show full cookie values (they are secrets).")
def show(host: str, as_json: bool, playwright: bool, reveal: bool) -> None:
    """Show the shared cookies of HOST (a host name or URL), values masked."""
    with one_line_errors():
        store = _store()
        if playwright:
            cookies = store.export_browser(host)
            if not reveal:
                cookies = [{**c, "value": mask_value(c["value"])} for c in cookies]
            click.echo(json.dumps(cookies, indent=2))
            return
        rows = store.show(host, reveal=reveal)
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    if not rows:
        click.echo(f"no shared cookies for {normalize_host(host)}")
        return
    now = local_time()
    for row in rows:
        flags = [f for f, on in (("Secure", row["secure"]), ("HttpOnly", row["http_only"])) if on]
        if row["same_site"]:
            flags.append(f"SameSite={row['same_site']}")
        click.echo(
            f"{row['name']}={row['value']}  domain={row['domain']} path={row['path']} "
            f"expires={_when(row['expires'], now)} {' '.join(flags)}  "
            f"set {_age(row['set_at'] - now)}"
        )


@sessions_group.command("clear")
@click.argument("host")
def clear(host: str) -> None:
    """Forget the shared cookies of HOST (workers start a fresh session)."""
    with one_line_errors():
        count = _store().clear(host)
        click.echo(f"cleared {count} shared cookies of {normalize_host(host)}")


@sessions_group.command("import")
@click.argument("host")
@click.argument("file", type=click.File("r", encoding="utf-8"))
def import_(host: str, file: Any) -> None:
    """Merge the cookies in FILE ('-': stdin) into the shared jar of HOST.

    FILE is the JSON of Playwright's context.cookies() / Puppeteer's page.cookies(),
    or a Playwright storage state ({"cookies": [...]}), whose cookies for other
    domains are left out. A cookie another worker set more recently is kept.
    """
    with one_line_errors():
        host_name = normalize_host(host)
        try:
            data = json.load(file)
        except ValueError as exc:
            raise click.ClickException(f"{file.name}: not JSON: {exc}") from None
        skipped = 0
        if isinstance(data, dict) and isinstance(data.get("cookies"), list):
            mine = [
                c
                for c in data["cookies"]
                if not isinstance(c, dict)
                or not isinstance(c.get("domain"), str)
                or domain_matches(c["domain"], host_name)
            ]
            skipped = len(data["cookies"]) - len(mine)
            data = mine
        result = _store().import_browser(host_name, data)
    note = f", {result.stale} kept (a fresher value was stored)" if result.stale else ""
    other = f", {skipped} of other domains left out" if skipped else ""
    click.echo(f"imported {result.written} cookies into {host_name}{note}{other}")


@sessions_group.command("export")
@click.argument("host")
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write to this file (mode 0600) instead of stdout.",
)
def export(host: str, output: Path | None) -> None:
    """Print the shared cookies of HOST as Playwright/Puppeteer JSON, values in full.

    Load them with context.add_cookies(...) or page.setCookie(...cookies).
    """
    with one_line_errors():
        cookies = _store().export_browser(host)
    text = json.dumps(cookies, indent=2) + "\n"
    if output is None:
        click.echo(text, nl=False)
        return
    fd = os.open(output, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(fd, 0o600)  # an existing file keeps its mode through O_CREAT
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(text)
    click.echo(f"wrote {len(cookies)} cookies to {output}", err=True)
