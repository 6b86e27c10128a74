"""More solve tasks: FunCaptcha, GeeTest v4, AWS WAF, image to coordinates,
reCAPTCHA v2 Enterprise with ``s``, Turnstile challenge mode.

As thin as :mod:`.solve_tasks` (whose :class:`~.solve_tasks.SolveTask` they share):
unknown options are refused, the captcha type checks its fields, and a type the
configured provider does not offer fails before anything is queued.
"""

from __future__ import annotations

from typing import Any

from ..errors import InvalidTaskInput
from ..provider import AwsWaf, Coordinates, FunCaptcha, GeeTestV4, RecaptchaV2, Turnstile
from .app import app
from .solve_tasks import SolveTask, refuse_unknown

__all__ = [
    "solve_aws_waf",
    "solve_coordinates",
    "solve_funcaptcha",
    "solve_geetest_v4",
    "solve_recaptcha_v2_enterprise",
    "solve_turnstile_challenge",
]


@app.task(name="captcha_tasks.solve_funcaptcha", base=SolveTask, bind=True)
def solve_funcaptcha(
    self: SolveTask,
    publickey: str,
    pageurl: str,
    *,
    surl: str | None = None,
    data_blob: str | None = None,
    user_agent: str | None = None,
    proxy_id: str | None = None,
    **unknown: Any,
) -> dict[str, Any]:
    """Solve an Arkose Labs FunCaptcha (``surl``: the Arkose API host; ``data_blob``:
    the page's ``data[blob]``). Result: the token in ``solution``."""
    refuse_unknown(self.name, unknown, "surl, data_blob, user_agent, proxy_id")
    return self.admit(
        lambda: FunCaptcha(
            publickey, pageurl, surl=surl, data_blob=data_blob, user_agent=user_agent
        ),
        proxy_id=proxy_id,
    )


@app.task(name="captcha_tasks.solve_geetest_v4", base=SolveTask, bind=True)
def solve_geetest_v4(
    self: SolveTask,
    captcha_id: str,
    pageurl: str,
    *,
    api_server: str | None = None,
    proxy_id: str | None = None,
    **unknown: Any,
) -> dict[str, Any]:
    """Solve a GeeTest v4. ``solution`` is a dict: captcha_id, lot_number, pass_token,
    gen_time, captcha_output."""
    refuse_unknown(self.name, unknown, "api_server, proxy_id")
    return self.admit(
        lambda: GeeTestV4(captcha_id, pageurl, api_server=api_server), proxy_id=proxy_id
    )


@app.task(name="captcha_tasks.solve_aws_waf", base=SolveTask, bind=True)
def solve_aws_waf(
    self: SolveTask,
    sitekey: str,
    iv: str,
    context: str,
    pageurl: str,
    *,
    challenge_script: str | None = None,
    captcha_script: str | None = None,
    proxy_id: str | None = None,
    **unknown: Any,
) -> dict[str, Any]:
    """Solve an AWS WAF CAPTCHA. ``solution``: ``{"aws_waf_token": ...}`` where the
    provider gives the cookie, else ``{"captcha_voucher": ..., "existing_token": ...}``."""
    refuse_unknown(self.name, unknown, "challenge_script, captcha_script, proxy_id")
    return self.admit(
        lambda: AwsWaf(
            sitekey,
            iv,
            context,
            pageurl,
            challenge_script=challenge_script,
            captcha_script=captcha_script,
        ),
        proxy_id=proxy_id,
    )


@app.task(name="captcha_tasks.solve_coordinates", base=SolveTask, bind=True)
def solve_coordinates(
    self: SolveTask, image_b64: str, *, textinstructions: str | None = None, **unknown: Any
) -> dict[str, Any]:
    """The points to click on an image (base64; jpg, png or gif), as
    ``[{"x": int, "y": int}, ...]`` in ``solution``."""
    refuse_unknown(self.name, unknown, "textinstructions")
    if not isinstance(image_b64, str):
        raise InvalidTaskInput(f"{self.name}: image_b64 must be a base64 string")
    limit = self.settings.max_image_bytes
    return self.admit(
        lambda: Coordinates.from_base64(
            image_b64, textinstructions=textinstructions, max_image_bytes=limit
        )
    )


@app.task(name="captcha_tasks.solve_recaptcha_v2_enterprise", base=SolveTask, bind=True)
def solve_recaptcha_v2_enterprise(
    self: SolveTask,
    sitekey: str,
    pageurl: str,
    *,
    s: str | None = None,
    invisible: bool = False,
    cookies: str | None = None,
    user_agent: str | None = None,
    proxy_id: str | None = None,
    **unknown: Any,
) -> dict[str, Any]:
    """Solve a reCAPTCHA v2 Enterprise (``s``: the page's ``data-s``)."""
    refuse_unknown(self.name, unknown, "s, invisible, cookies, user_agent, proxy_id")
    return self.admit(
        lambda: RecaptchaV2(
            sitekey,
            pageurl,
            invisible=invisible,
            enterprise=True,
            data_s=s,
            cookies=cookies,
            user_agent=user_agent,
        ),
        proxy_id=proxy_id,
    )


@app.task(name="captcha_tasks.solve_turnstile_challenge", base=SolveTask, bind=True)
def solve_turnstile_challenge(
    self: SolveTask,
    sitekey: str,
    pageurl: str,
    *,
    action: str,
    cdata: str,
    pagedata: str,
    user_agent: str | None = None,
    proxy_id: str | None = None,
    **unknown: Any,
) -> dict[str, Any]:
    """Solve a Turnstile on a Cloudflare challenge page (``action``, ``cdata`` and
    ``pagedata`` from its ``turnstile.render`` call). Result: the token in ``solution``
    and the browser to use it with in ``user_agent``."""
    refuse_unknown(self.name, unknown, "action, cdata, pagedata, user_agent, proxy_id")
    return self.admit(
        lambda: Turnstile(
            sitekey, pageurl, action=action, cdata=cdata, pagedata=pagedata, user_agent=user_agent
        ),
        proxy_id=proxy_id,
    )
