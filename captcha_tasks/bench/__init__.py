"""Benchmarks: ``captcha-tasks bench solve`` measures the solve path end to end.

Modules: ``solve`` (the harness: processes, load, measurements, report),
``seed_design`` (the baseline: the seeds' blocking submit-sleep-poll loop as a
Celery task), ``cli`` (the click commands). Importing this package imports none
of them, so ``celery -A captcha_tasks.bench.seed_design worker`` stays light.
"""
