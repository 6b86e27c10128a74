"""The provider protocol: captcha types, the answer parser and the HTTP client.

Plain code with no Celery inside::

    client = SolverClient.from_settings(get_settings())
    captcha_id = client.submit(RecaptchaV2(sitekey, pageurl))
    answer = client.get(captcha_id)  # None while not ready
"""

from .captchas import (
    DEFAULT_MAX_IMAGE_BYTES,
    AnyCaptcha,
    Captcha,
    CaptchaType,
    GeeTest,
    HCaptcha,
    Image,
    Proxy,
    ProxyType,
    RecaptchaV2,
    RecaptchaV3,
    Turnstile,
)
from .client import Answer, SolverClient, close_shared_session, make_session, shared_session
from .protocol import (
    ERROR_TABLE,
    NOT_READY,
    ErrorRule,
    NotReady,
    error_for,
    parse_response,
    rule_for,
)

__all__ = [
    "DEFAULT_MAX_IMAGE_BYTES",
    "ERROR_TABLE",
    "NOT_READY",
    "Answer",
    "AnyCaptcha",
    "Captcha",
    "CaptchaType",
    "ErrorRule",
    "GeeTest",
    "HCaptcha",
    "Image",
    "NotReady",
    "Proxy",
    "ProxyType",
    "RecaptchaV2",
    "RecaptchaV3",
    "SolverClient",
    "Turnstile",
    "close_shared_session",
    "error_for",
    "make_session",
    "parse_response",
    "rule_for",
    "shared_session",
]
