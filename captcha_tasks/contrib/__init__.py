"""Integrations with other tools, each an optional extra: ``captcha_tasks.contrib.playwright``
(``pip install 'captcha_tasks[playwright]'``)."""
