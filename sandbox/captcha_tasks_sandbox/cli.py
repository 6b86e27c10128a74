"""``captcha-tasks-sandbox`` (also ``captcha-tasks-dev sandbox``): run the solver sandbox in
the foreground until SIGINT/SIGTERM."""

from __future__ import annotations

import logging
import signal
import sys
import threading
from types import FrameType
from typing import Any

import click

from captcha_tasks.cli.main import finite_floats
from captcha_tasks.errors import ConfigurationError

from .config import (
    DEMO_SITEKEY,
    DEV_API_KEY,
    DEV_CAPSOLVER_KEY,
    DIALECTS,
    FAULT_PATHS,
    GARBAGE_KINDS,
    JSON_DIALECTS,
    KINDS,
    OVER_LIMIT_CODES,
    PROTOCOLS,
    SandboxConfig,
    dev_api_key,
)
from .server import SandboxServer

__all__ = ["run", "sandbox_command"]

_RATE = click.FloatRange(0.0, 1.0)
_SECONDS = click.FloatRange(min=0.0)


def _parse_latency(
    ctx: click.Context, param: click.Parameter, values: tuple[str, ...]
) -> dict[str, float]:
    latency: dict[str, float] = {}
    for value in values:
        kind, sep, raw = value.partition("=")
        kind = kind.strip().lower()
        try:
            seconds = float(raw)
        except ValueError:
            seconds = -1.0
        if not sep or kind not in KINDS or not seconds >= 0:
            raise click.BadParameter(
                f"expected KIND=SECONDS with KIND one of {', '.join(KINDS)}, got {value!r}",
                ctx=ctx,
                param=param,
            )
        latency[kind] = seconds
    return latency


@click.command("sandbox", context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Interface to listen on. The /admin endpoints listen there too: "
    "keep it on loopback unless the network is trusted.",
)
@click.option(
    "--port",
    default=8765,
    show_default=True,
    type=click.IntRange(0, 65535),
    help="TCP port; 0 picks a free one (printed on start).",
)
@click.option(
    "--key",
    "keys",
    multiple=True,
    metavar="KEY",
    help=f"Accept this API key too (32 letters and digits; repeatable). "
    f"{DEV_API_KEY} is always accepted.",
)
@click.option(
    "--threads",
    default=5,
    show_default=True,
    type=click.IntRange(min=1),
    help="Plan thread limit: captchas in flight at once; more submits are refused.",
)
@click.option(
    "--over-limit-code",
    type=click.Choice(OVER_LIMIT_CODES),
    default=OVER_LIMIT_CODES[0],
    show_default=True,
    help="Answer to a submit over the thread limit (CaptchaAI documents both).",
)
@click.option(
    "--dialect",
    type=click.Choice(DIALECTS + JSON_DIALECTS),
    default="captchaai",
    show_default=True,
    help="captchaai: billing by threads, balance informational; "
    "2captcha: each solve costs --price, ERROR_ZERO_BALANCE when funds run out. "
    "With --protocol json or both: one of 2captcha-v2, anticaptcha, capsolver, capmonster "
    "(default 2captcha-v2; each bills like 2captcha).",
)
@click.option(
    "--balance",
    default=100.0,
    show_default=True,
    type=float,
    help="Starting balance reported by getbalance (and spent in the 2captcha dialect).",
)
@click.option(
    "--price",
    default=0.003,
    show_default=True,
    type=_SECONDS,
    help="Cost of one solve in the 2captcha dialect (unsolvable ones are not billed).",
)
@click.option(
    "--time-scale",
    type=click.FloatRange(min=0.001),
    default=None,
    help="Multiply latencies, token lifetimes and the report window "
    "(default: CAPTCHA_TASKS_TIME_SCALE or 1.0).",
)
@click.option(
    "--latency",
    "latency",
    multiple=True,
    metavar="KIND=SECONDS",
    callback=_parse_latency,
    help=f"Unscaled solve time of one kind ({', '.join(KINDS)}); repeatable. "
    "Defaults: recaptcha_v2=15 recaptcha_v3=4 turnstile=8 image=3 "
    "geetest=10 hcaptcha=15.",
)
@click.option(
    "--latency-all",
    type=_SECONDS,
    default=None,
    metavar="SECONDS",
    help="Unscaled solve time of every kind (--latency overrides single kinds).",
)
@click.option(
    "--jitter",
    default=0.2,
    show_default=True,
    type=_RATE,
    help="Each solve time is multiplied by a random factor in [1-J, 1+J].",
)
@click.option(
    "--min-image-bytes",
    default=100,
    show_default=True,
    type=click.IntRange(min=0),
    help="Smaller images answer ERROR_ZERO_CAPTCHA_FILESIZE (2Captcha documents 100).",
)
@click.option(
    "--max-image-bytes",
    default=None,
    type=click.IntRange(min=1),
    help="Larger images answer ERROR_TOO_BIG_CAPTCHA_FILESIZE "
    "(default: CAPTCHA_TASKS_MAX_IMAGE_BYTES or 100000).",
)
@click.option(
    "--fail-rate",
    default=0.0,
    show_default=True,
    type=_RATE,
    help="Fraction of in.php/res.php requests (see --fault-path) answered with an HTML 502 page.",
)
@click.option(
    "--unsolvable-rate",
    default=0.0,
    show_default=True,
    type=_RATE,
    help="Fraction of captchas that end as ERROR_CAPTCHA_UNSOLVABLE.",
)
@click.option(
    "--slow-rate",
    default=0.0,
    show_default=True,
    type=_RATE,
    help="Fraction of in.php/res.php responses (see --fault-path) held back --slow-seconds "
    "(the request still takes effect).",
)
@click.option(
    "--slow-seconds",
    default=5.0,
    show_default=True,
    type=_SECONDS,
    help="How long a slow response is held back, in real (unscaled) seconds.",
)
@click.option(
    "--garbage-rate",
    default=0.0,
    show_default=True,
    type=_RATE,
    help="Fraction of requests (see --fault-path; in.php/res.php and the JSON API) whose "
    "answer is replaced with garbage (see --garbage-kind) after the request took effect.",
)
@click.option(
    "--garbage-kind",
    "garbage_kinds",
    multiple=True,
    default=GARBAGE_KINDS,
    show_default=True,
    type=click.Choice(GARBAGE_KINDS),
    help="The garbage --garbage-rate serves, each kind in turn; repeatable: "
    "truncated (the answer cut short), huge (padded to 3 MB), content_type (the answer as "
    "image/png or octet-stream), html (a portal's page, HTTP 200), empty, noise (random "
    "bytes), wrong_shape (JSON: a wrong status, a list, null fields).",
)
@click.option(
    "--fault-path",
    "fault_paths",
    multiple=True,
    default=FAULT_PATHS,
    show_default=True,
    type=click.Choice(FAULT_PATHS),
    help="Endpoint --fail-rate, --slow-rate and --garbage-rate apply to; repeat for both "
    "(e.g. only in.php to fault submits, only res.php to fault polls).",
)
@click.option(
    "--report-window",
    default=900.0,
    show_default=True,
    type=_SECONDS,
    help="Unscaled seconds after submit during which reportbad/reportgood count.",
)
@click.option(
    "--reject-rate",
    "reject_rates",
    multiple=True,
    metavar="[HOST/]DIALECT=RATE",
    help="The demo site refuses this share of good tokens from this sandbox (DIALECT: the "
    "sandbox's --dialect or *; HOST/...: only when asked as that host). Repeatable; "
    "also POST /admin/config reject_rates.",
)
@click.option(
    "--seed",
    type=int,
    default=None,
    help="Seed every random choice (ids, jitter, faults, tokens) for reproducible runs.",
)
@click.option(
    "--tls-cert",
    type=click.Path(exists=True, dir_okay=False),
    default=None,
    help="PEM certificate chain: serve https (needs --tls-key).",
)
@click.option(
    "--tls-key",
    type=click.Path(exists=True, dir_okay=False),
    default=None,
    help="PEM private key for --tls-cert.",
)
@click.option(
    "--demo-port",
    type=click.IntRange(0, 65535),
    default=None,
    help="Also serve the demo target site (pages behind a reCAPTCHA-style challenge "
    "checked against this sandbox's tokens) on this port; 0 picks a free one.",
)
@click.option(
    "--demo-sitekey",
    default=DEMO_SITEKEY,
    show_default=True,
    help="The sitekey the demo site shows and accepts tokens for.",
)
@click.option(
    "--demo-form-ttl",
    type=click.FloatRange(min=0.0, min_open=True),
    default=600.0,
    show_default=True,
    help="Unscaled seconds a demo challenge form (its one-time csrf_token) stays good.",
)
@click.option(
    "--demo-rotate-sitekey",
    is_flag=True,
    help="Each load of a demo challenge page shows another sitekey; its form takes only "
    "tokens solved for that one.",
)
@click.option(
    "--verbose",
    "-v",
    is_flag=True,
    help="Log one line per request (keys and proxy passwords masked).",
)
@click.option(
    "--protocol",
    type=click.Choice(PROTOCOLS),
    default="classic",
    show_default=True,
    help="classic: in.php/res.php; json: POST /createTask, /getTaskResult, /getBalance and "
    "the dialect's report methods; both: the two on one port, in.php/res.php then "
    "following the 2captcha dialect (per-solve billing, as every JSON provider bills). "
    f"The capsolver dialect's key is {DEV_CAPSOLVER_KEY}.",
)
@click.option(
    "--callback-drop-rate",
    type=click.FloatRange(0.0, 1.0),
    default=0.0,
    show_default=True,
    help="Fraction of callbacks (pingback / callbackUrl) never sent.",
)
@click.option(
    "--callback-duplicate-rate",
    type=click.FloatRange(0.0, 1.0),
    default=0.0,
    show_default=True,
    help="Fraction of callbacks sent twice.",
)
@click.option(
    "--callback-late-rate",
    type=click.FloatRange(0.0, 1.0),
    default=0.0,
    show_default=True,
    help="Fraction of callbacks sent --callback-late-seconds after the answer is ready.",
)
@click.option(
    "--callback-late-seconds",
    type=click.FloatRange(min=0.0),
    default=2.0,
    show_default=True,
    help="How late a late callback comes (real seconds).",
)
def sandbox_command(**options: Any) -> None:
    """Run a local in.php/res.php solver (CaptchaAI/2Captcha protocol) for development.

    Answers come after each kind's latency times the time scale; GET /stats shows
    the counters, POST /admin/config changes settings at runtime. Stops on Ctrl-C
    or SIGTERM.
    """
    config = _config(options)
    if config.verbose:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    _serve(config)


def _config(options: dict[str, Any]) -> SandboxConfig:
    """The sandbox's configuration from the command's options; unset time scale and
    image size limit from the settings (CAPTCHA_TASKS_*)."""
    options = dict(options)
    if options["time_scale"] is None or options["max_image_bytes"] is None:
        from captcha_tasks.settings import get_settings

        try:
            settings = get_settings()
        except ConfigurationError as exc:
            raise click.ClickException(f"configuration error: {exc}") from None
        if options["time_scale"] is None:
            options["time_scale"] = settings.time_scale
        if options["max_image_bytes"] is None:
            options["max_image_bytes"] = settings.max_image_bytes
    latency_all = options.pop("latency_all")
    latencies = dict.fromkeys(KINDS, latency_all) if latency_all is not None else {}
    latencies.update(options.pop("latency"))
    options["api_keys"] = options.pop("keys")
    rates: dict[str, object] = {}
    for given in options.pop("reject_rates"):
        key, sep, rate = given.partition("=")
        try:
            rates[key.strip()] = float(rate) if sep else None
        except ValueError:
            rates[key.strip()] = None
    options["reject_rates"] = rates
    if options["protocol"] != "classic" and _defaulted("dialect"):
        options["dialect"] = JSON_DIALECTS[0]
    try:
        return SandboxConfig(latency=latencies, **options)
    except ConfigurationError as exc:
        raise click.UsageError(str(exc)) from None


def _defaulted(name: str) -> bool:
    """Whether option ``name`` was left at its default (outside click: assume so)."""
    ctx = click.get_current_context(silent=True)
    if ctx is None:
        return True
    return ctx.get_parameter_source(name) in (None, click.core.ParameterSource.DEFAULT)


def _serve(config: SandboxConfig) -> None:
    """Serve until SIGINT or SIGTERM."""
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    server = SandboxServer(config)
    try:
        try:
            server.start()
        except OSError as exc:  # port taken, unreadable TLS files
            port, demo_port = config.port, config.demo_port
            ports = f"{port}" if demo_port is None else f"{port} and {demo_port}"
            raise click.ClickException(f"cannot listen on {config.host} ({ports}): {exc}") from None
        key = dev_api_key(config.dialect)
        click.echo(f"sandbox listening on {server.url} (key {key})")
        if server.demo_url is not None:
            click.echo(f"demo site on {server.demo_url} (sitekey {config.demo_sitekey})")
        sys.stdout.flush()
        while not stop.wait(0.5):
            pass
    finally:
        server.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)


finite_floats(sandbox_command)


def run() -> None:
    """The ``captcha-tasks-sandbox`` console command."""
    sandbox_command(prog_name="captcha-tasks-sandbox")
