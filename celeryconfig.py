"""The file an operator edits: captcha_tasks' Celery configuration, with your changes.

captcha_tasks' app does not read this file by itself: it loads its configuration from
inside the package (``captcha_tasks.worker.celeryconfig``), so that no other application's
``celeryconfig.py`` can take it over. Point Celery at this one to use it::

    celery -A captcha_tasks --config celeryconfig worker

Keep the star import first: it brings every reliability choice, and the marker that
tells captcha_tasks this module is meant for it (a module without it is ignored with
a warning). Prefer the ``CAPTCHA_TASKS_*`` environment variables for what they cover
(the site's Reference, "Settings": docs/reference/settings.md); change a Celery setting
here only when you know why it is set the way it is (Reference, "Celery configuration":
docs/reference/celery-config.md).
"""

from __future__ import annotations

from captcha_tasks.celeryconfig import *  # noqa: F403

# Examples (uncomment to use):
# worker_soft_shutdown_timeout = 30.0
# worker_max_tasks_per_child = 1000
