"""The operator's import path of captcha_tasks' Celery configuration.

An operator's own configuration module starts with
``from captcha_tasks.celeryconfig import *`` (the repository's top-level
``celeryconfig.py`` is that file); the configuration itself lives in
:mod:`captcha_tasks.worker.celeryconfig`, with the rest of what is Celery's.
"""

from captcha_tasks.worker.celeryconfig import *  # noqa: F403
