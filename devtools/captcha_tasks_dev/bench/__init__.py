"""Benchmarks: ``captcha-tasks-dev bench solve`` measures the solve path end to end,
``captcha-tasks-dev bench pages`` the page workflow (shared cookies against isolated),
``captcha-tasks-dev bench routing`` order routing against cost routing.

Modules: ``solve`` (the harness: the two designs under load, the report),
``pages`` (the page harness and its report; ``page_client`` enqueues a run's pages
from a child process),
``routing`` (the routing harness, its figures and report; ``routing_client`` fetches a
run's pages a few at a time from a child process),
``metrics`` (pure computation over the collected timings), ``report`` (the text
table both reports share), ``stack`` (starting and stopping the processes of a run),
``seed_design`` (the baseline: the seeds' blocking submit-sleep-poll loop as a
Celery task), ``cli`` (the click commands). Importing this package imports none
of them, so ``celery -A captcha_tasks_dev.bench.seed_design worker`` stays light.
"""
