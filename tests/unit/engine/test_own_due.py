"""What an engine's own calls scheduled: the loop's next poll without a look at Redis."""

from __future__ import annotations

import math
import threading

from captcha_tasks.engine.own_due import MAX_ENTRIES, OwnSchedule


def test_the_soonest_time_ahead_whatever_the_order_they_came_in() -> None:
    own = OwnSchedule()
    assert own.next_after() == math.inf
    own.add(30.0)
    own.add(10.0, 20.0, 10.0)  # a batch's captchas: several times at once, repeats too
    assert own.next_after() == 10.0
    assert own.next_after() == 10.0  # asking forgets nothing


def test_a_claim_forgets_what_it_took_and_keeps_what_is_later() -> None:
    own = OwnSchedule()
    own.add(10.0, 20.0, 30.0)
    assert own.next_after(claimed_at=20.0) == 30.0
    assert own.next_after(claimed_at=29.9) == 30.0
    assert own.next_after(claimed_at=30.0) == math.inf


def test_it_never_grows_past_its_cap() -> None:
    own = OwnSchedule()
    own.add(*range(MAX_ENTRIES))
    own.add(-1.0)  # one too many: forgotten wholesale (the loop's next look sees them)
    assert own.next_after() == -1.0
    assert own.next_after(claimed_at=-1.0) == math.inf


def test_calls_of_many_threads_lose_nothing() -> None:
    own = OwnSchedule()

    def note(start: int) -> None:
        for i in range(500):
            own.add(float(start + i * 4))

    threads = [threading.Thread(target=note, args=(k,)) for k in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    seen = []
    while (at := own.next_after()) != math.inf:
        seen.append(at)
        own.next_after(claimed_at=at)
    assert seen == [float(i) for i in range(2000)]
