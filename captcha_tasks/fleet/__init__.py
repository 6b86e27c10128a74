"""Fleet operations: rolling updates (``captcha-tasks rollout``: :mod:`.rollout` drives
them, :mod:`.plan` holds what one is asked and reports, :mod:`.plane` what it drives),
the health gate (:mod:`.health`), and the heartbeat behind ``captcha-tasks check``.

Plain modules that test without a worker, except :mod:`.heartbeat`, which the worker
loads (Celery remote control is :mod:`captcha_tasks.worker.control`).
"""

from __future__ import annotations
