"""What `make run`'s terminal shows of a worker's output: its log lines and errors, not
Celery's start-up banner nor a warning printed before it (the worker's log keeps all)."""

from __future__ import annotations

from captcha_tasks_dev.run import CeleryStartupNoise

#: A worker's output as `celery worker -l INFO` prints it when run as root.
WORKER_OUTPUT = "".join(
    f"{line}\n"
    for line in (
        "/srv/.venv/lib/python3.11/site-packages/celery/platforms.py:893: Securi"
        "tyWarning: You're running the worker with superuser privileges: this is",
        "absolutely not recommended!",
        "",
        "Please specify a different user using the --uid option.",
        "",
        "User information: uid=0 euid=0 gid=0 egid=0",
        "",
        "  _warn_or_raise_security_error(egid, euid, gid, uid,",
        " ",
        " -------------- dev1@vm v5.7.0 (collider)",
        "--- ***** ----- ",
        "-- ******* ---- Linux-6.18.44-x86_64-with-glibc2.36 2026-12-07 04:55:59",
        "- *** --- * --- ",
        "- ** ---------- [config]",
        "- ** ---------- .> app:         captcha_tasks:0x7f412e23de90",
        "- *** --- * --- .> concurrency: 2 (prefork)",
        " -------------- [queues]",
        "                .> celery           exchange=celery(direct) key=celery",
        "",
        "[tasks]",
        "  . captcha_tasks.fetch_page",
        "  . captcha_tasks.solve_recaptcha_v2",
        "",
        "[2026-12-07 04:56:00,367: INFO/MainProcess] sol"
        "ve engine started: 5 threads budget (captchaai)",
        "[2026-12-07 04:56:01,564: INFO/MainProcess] dev1@vm ready.",
        "[2026-12-07 04:56:06,244: WARNING/MainProcess] a warning after the start",
        "  its second line",
        "",
        "worker: Warm shutdown (MainProcess)",
    )
)


def _shown(output: str) -> list[str]:
    shown = CeleryStartupNoise()
    lines = output.encode().splitlines(keepends=True)
    return [line.decode().rstrip("\n") for line in lines if shown(line)]


def test_the_banner_and_the_warning_before_it_are_hidden_the_log_lines_shown() -> None:
    assert _shown(WORKER_OUTPUT) == [
        "[2026-12-07 04:56:00,367: INFO/MainProcess] solve engine started: 5 threads budget "
        "(captchaai)",
        "[2026-12-07 04:56:01,564: INFO/MainProcess] dev1@vm ready.",
        "[2026-12-07 04:56:06,244: WARNING/MainProcess] a warning after the start",
        "  its second line",
        "",
        "worker: Warm shutdown (MainProcess)",
    ]


def test_an_error_before_the_banner_shows() -> None:
    output = (
        "Error: captcha_tasks: CAPTCHA_TASKS_PROVIDER is not read when "
        "CAPTCHA_TASKS_PROVIDERS is set\n"
    )
    assert _shown(output) == [output.rstrip("\n")]
