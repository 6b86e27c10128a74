"""``captcha-tasks proxies``: manage the proxy pool the workers lease from.

Passwords are shown nowhere (``user:***@host:port``). To keep one out of the shell's
history and ``ps``, give ``-`` as the URL and type or pipe it on standard input.
"""

from __future__ import annotations

import json
import sys

import click

from ..errors import InvalidTaskInput
from ..session.proxies import ProxyPool, masked
from ..settings import get_settings
from ..state import state_redis
from .errors import one_line_errors

__all__ = ["proxies_group"]

_TYPES = click.Choice(["HTTP", "HTTPS", "SOCKS4", "SOCKS5"], case_sensitive=False)


def _pool() -> ProxyPool:
    settings = get_settings()
    return ProxyPool(state_redis(settings), settings)


@click.group(name="proxies")
def proxies_group() -> None:
    """The proxy pool: each worker leases one proxy and keeps it (proxy affinity)."""


@proxies_group.command("add")
@click.argument("url")
@click.option(
    "--type",
    "kind",
    type=_TYPES,
    default=None,
    help="Proxy type (default: the URL's scheme, else HTTP).",
)
def add(url: str, kind: str | None) -> None:
    """Add a proxy: [scheme://][user:pass@]host:port or host:port:user:pass ("-": stdin).

    Schemes: http, https, socks5 or socks5h (SOCKS5, names resolved by the proxy),
    socks4 or socks4a (no password). Adding the same host, port and user again
    updates it (same id).
    """
    if url == "-":
        url = sys.stdin.readline().strip()
    pool = _pool()
    with one_line_errors():
        try:
            ident = pool.add(url, kind.upper() if kind else None)
        except InvalidTaskInput as exc:
            raise click.BadParameter(str(exc), param_hint="URL") from None
        proxy = pool.get(ident)
    click.echo(f"{ident}  {proxy.type:6}  {masked(proxy)}")


@proxies_group.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def list_(as_json: bool) -> None:
    """Show the pool: id, type, proxy (password masked), holder and quarantine."""
    with one_line_errors():
        views = _pool().list()
    if as_json:
        click.echo(json.dumps([view.to_dict() for view in views], indent=2))
        return
    if not views:
        click.echo("the proxy pool is empty (add one with: captcha-tasks proxies add URL)")
        return
    click.echo(f"{'ID':12}  {'TYPE':6}  {'PROXY':40}  {'HELD BY':28}  STATE")
    for view in views:
        state = "ok"
        if view.quarantined:
            left = view.quarantine_seconds_left
            state = "quarantined" + (f" {left:.0f}s" if left is not None else "")
            state += f": {view.quarantine_reason}"
        click.echo(
            f"{view.id:12}  {view.type:6}  {view.proxy:40}  {view.holder or '-':28}  {state}"
        )


@proxies_group.command("remove")
@click.argument("ident", metavar="ID")
def remove(ident: str) -> None:
    """Remove a proxy from the pool (its holder leases another)."""
    with one_line_errors():
        removed = _pool().remove(ident)
    if not removed:
        raise click.ClickException(f"no proxy with id {ident!r} in the pool")
    click.echo(f"removed {ident}")


@proxies_group.command("report-bad")
@click.argument("ident", metavar="ID")
@click.option("--reason", default="reported bad", show_default=True, help="Why (kept with it).")
def report_bad(ident: str, reason: str) -> None:
    """Quarantine a proxy for CAPTCHA_TASKS_PROXY_COOLDOWN; its holder moves to another."""
    pool = _pool()
    with one_line_errors():
        holder = pool.report_bad(ident, reason)
    cooldown = get_settings().proxy_cooldown
    taken = f"; taken from {holder}" if holder else ""
    click.echo(f"quarantined {ident} for {cooldown:g} s{taken}")
