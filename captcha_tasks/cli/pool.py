"""``captcha-tasks pool status|fill``."""

from __future__ import annotations

import json
import time

import click

from ..engine.pool import TokenPool
from ..provider import HCaptcha, RecaptchaV2, RecaptchaV3, Turnstile
from ..provider.captchas import Captcha
from ..settings import get_settings
from ..state import state_redis
from .errors import one_line_errors

__all__ = ["pool_group"]

#: Types whose tokens can be solved ahead for anyone on the page (engine/pool.py
#: ``pool_scope``). Not GeeTest (v3, v4), AWS WAF or coordinates: their answers belong to
#: one challenge the page served. Not FunCaptcha, though its tokens are single-use
#: and could be: pools are keyed by ``sitekey`` (FunCaptcha has a ``publickey``) and the
#: worker's ``fill_token_pool`` builds none.
_TYPES = ("recaptcha_v2", "recaptcha_v3", "turnstile", "hcaptcha")


def _pool() -> TokenPool:
    settings = get_settings()
    return TokenPool(state_redis(settings), settings)


@click.group("pool")
def pool_group() -> None:
    """Pools of pre-solved single-use tokens."""


@pool_group.command("status")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def status(as_json: bool) -> None:
    """Every registered pool: size, fills in flight, soonest expiry, demand."""
    with one_line_errors():
        pools = _pool().status()
    if as_json:
        click.echo(json.dumps(pools, indent=2))
        return
    if not pools:
        click.echo("no token pools registered (captcha-tasks pool fill ...)")
        return
    click.echo(
        f"{'pool':20} {'type':13} {'size':>4} {'fill':>4} {'target':>6} "
        f"{'soonest':>8} {'demand/min':>10}  scope"
    )
    for p in pools:
        target = "auto" if p["adaptive"] else str(p["target"])
        soonest = "-" if p["soonest_expiry_s"] is None else f"{p['soonest_expiry_s']:.0f}s"
        click.echo(
            f"{p['pool_id']:20} {p['type']:13} {p['size']:>4} {p['filling']:>4} {target:>6} "
            f"{soonest:>8} {p['demand_per_min']:>10}  {p['scope']}"
        )


@pool_group.command("fill")
@click.argument("captcha_type", type=click.Choice(_TYPES))
@click.argument("sitekey")
@click.argument("pageurl")
@click.option("--action", default="verify", show_default=True, help="reCAPTCHA v3 action.")
@click.option("--min-score", default=0.3, show_default=True, type=float, help="reCAPTCHA v3.")
@click.option("--target", type=click.IntRange(0, 10_000), help="Keep this many tokens.")
@click.option("--adaptive", is_flag=True, help="Size the pool from demand and token life.")
def fill(
    captcha_type: str,
    sitekey: str,
    pageurl: str,
    action: str,
    min_score: float,
    target: int | None,
    adaptive: bool,
) -> None:
    """Register a pool and queue the solves it lacks (running workers solve them)."""
    if (target is None) == (not adaptive):
        raise click.UsageError("give exactly one of --target N or --adaptive")
    with one_line_errors():
        captcha: Captcha
        if captcha_type == "recaptcha_v2":
            captcha = RecaptchaV2(sitekey, pageurl)
        elif captcha_type == "recaptcha_v3":
            captcha = RecaptchaV3(sitekey, pageurl, action=action, min_score=min_score)
        elif captcha_type == "turnstile":
            captcha = Turnstile(sitekey, pageurl)
        else:
            captcha = HCaptcha(sitekey, pageurl)
        result = _pool().fill(captcha, target=target, adaptive=adaptive)
    click.echo(
        f"pool {result.pool_id}: target {result.target}, {result.size} ready, "
        f"{result.filling} filling, {result.admitted} solves queued ({time.strftime('%X')})"
    )
