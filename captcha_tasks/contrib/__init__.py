"""Integrations with other frameworks, each behind an optional extra of its own.

Nothing here is imported by the runtime (workers, CLI); a module of this package is
imported only by the framework it plugs into: ``captcha_tasks.contrib.scrapy`` (Scrapy's
downloader middlewares, ``pip install 'captcha_tasks[scrapy]'``) and
``captcha_tasks.contrib.playwright`` (a browser context's cookies and ``solve_on_page``,
``pip install 'captcha_tasks[playwright]'``).
"""
