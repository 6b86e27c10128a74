"""One module per captcha kind (or family of kinds), each its whole declaration; the
registry of them all is :mod:`captcha_tasks.provider.captchas`."""
