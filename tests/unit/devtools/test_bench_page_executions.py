"""The page benchmark counts fetch_page executions, retries and parks in worker logs."""

from __future__ import annotations

from captcha_tasks_dev.bench.pages import execution_counts

LOG = """\
[2026-12-02 09:18:13,110: INFO/MainProcess] Task captcha_tasks.fetch_page[a-1] received
[2026-12-02 09:18:13,141: INFO/ForkPoolWorker-2] captcha_tasks.fetch_page[a-1] parked \
until the session lock of 127.0.0.1 is free
[2026-12-02 09:18:13,147: INFO/ForkPoolWorker-2] Task captcha_tasks.fetch_page[a-1] ignored
[2026-12-02 09:18:13,150: INFO/MainProcess] Task captcha_tasks.fetch_page[b-2] received
[2026-12-02 09:18:13,151: INFO/ForkPoolWorker-1] Task captcha_tasks.fetch_page[b-2] retry: \
Retry in 0.2s: SessionLockBusy('held')
[2026-12-02 09:18:13,160: INFO/MainProcess] Task captcha_tasks.submit_challenge[c-3] received
[2026-12-02 09:18:13,194: INFO/MainProcess] Task captcha_tasks.sweep_session_lock[d-4] received
[2026-12-02 09:18:17,654: INFO/MainProcess] Task captcha_tasks.fetch_page[a-1] received
[2026-12-02 09:18:17,690: INFO/ForkPoolWorker-1] Task captcha_tasks.fetch_page[a-1] challenged: \
solving with captcha_tasks.solve_recaptcha_v2, then captcha_tasks.submit_challenge under the same id
"""
#: Another worker's log: a-1's submit step, received under fetch_page's name.
OTHER = """\
[2026-12-02 09:18:18,512: INFO/MainProcess] Task captcha_tasks.fetch_page[a-1] received
[2026-12-02 09:18:18,530: INFO/MainProcess] Task captcha_tasks.fetch_page[e-5] received
"""


def test_every_received_fetch_page_message_counts_once() -> None:
    assert execution_counts(LOG) == {
        "page_executions": 3,  # a-1 twice (parked, then re-sent), b-2 once
        "page_retries_logged": 1,
        "page_parks": 1,
    }
    # The submit step of a challenged page is not a page execution; e-5 is.
    assert execution_counts(OTHER + LOG)["page_executions"] == 4
    assert execution_counts("") == {"page_executions": 0, "page_retries_logged": 0, "page_parks": 0}
