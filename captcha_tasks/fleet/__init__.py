"""Fleet operations: rolling updates (``captcha-tasks rollout``), the version every
worker reports to remote control, and the heartbeat behind ``captcha-tasks check``.

Plain modules that test without a worker, except :mod:`.control` and
:mod:`.heartbeat`, which the worker loads (``captcha_tasks.app``).
"""

from __future__ import annotations
