"""Benchmarks: ``captcha-tasks bench solve`` measures the solve path end to end.

Modules: ``solve`` (the harness: the two designs under load, the report),
``metrics`` (pure computation over the collected timings), ``stack`` (starting and
stopping the processes of a run),
``seed_design`` (the baseline: the seeds' blocking submit-sleep-poll loop as a
Celery task), ``cli`` (the click commands). Importing this package imports none
of them, so ``celery -A captcha_tasks.bench.seed_design worker`` stays light.
"""
