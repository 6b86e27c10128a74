"""Where one-by-one polls go: successive quantiles of the learned ready times, within the
provider's rules (first-read floor, least gap, read cap, retention), and the learning
behind them (per provider, bounded, the documented defaults until enough solves)."""

from __future__ import annotations

import dataclasses
import itertools
import random

import pytest
import redis

from captcha_tasks.engine.placement import POLL_QUANTILES, ReadyTimes, poll_quantiles
from captcha_tasks.engine.timing import (
    FIRST_POLL,
    LEARN_MIN_SAMPLES,
    LEARN_WINDOW,
    READ_MARGIN,
    FirstPollLearner,
    PollGrid,
)
from captcha_tasks.errors import ConfigurationError
from captcha_tasks.provider.poll_rules import CLASSIC_RULES, POLL_RULES, PollRules
from captcha_tasks.settings import Settings
from captcha_tasks.state.keys import Keys

#: The bench's scale (L = 2 s for reCAPTCHA v2's documented 15 s).
SCALE = 2 / 15
#: Ready times 1.4 ... 2.6 s, evenly: the sandbox's uniform ±30 % around 2 s.
UNIFORM = [1.4 + 1.2 * i / 100 for i in range(101)]


def _grid(rules: PollRules = CLASSIC_RULES, **changes: object) -> PollGrid:
    options: dict[str, object] = {"batch": False, "rules": rules, "scale": SCALE}
    options.update(changes)
    return PollGrid(1.0 * SCALE, **options)  # type: ignore[arg-type]


def _schedule(
    grid: PollGrid, ready: ReadyTimes | None, *, reads: int = 8, wait: float = 15 * SCALE
) -> list[float]:
    """Seconds after submit of the polls of a captcha never ready (each answered 10 ms
    after it was sent), as the engine would place them."""
    submitted = 1000.0
    at = grid.first_poll(submitted, wait, ready)
    times = [at - submitted]
    for polls in range(reads - 1):
        at = grid.next_poll(polls, at + 0.01, since=submitted, ready=ready)
        times.append(at - submitted)
    return times


def _cost(times: list[float], ready_times: list[float]) -> tuple[float, float]:
    """Mean polls per solve and mean collection delay of a schedule over ready times."""
    polls = delay = 0.0
    for ready in ready_times:
        hit = next(i for i, t in enumerate(times) if t >= ready)
        polls += hit + 1
        delay += times[hit] - ready
    return polls / len(ready_times), delay / len(ready_times)


# --------------------------------------------------------------------- the placement


def test_polls_go_to_successive_quantiles_then_a_tail_step() -> None:
    ready = ReadyTimes.of(UNIFORM)
    assert ready.targets == pytest.approx([1.4 + 1.2 * q for q in POLL_QUANTILES])
    assert ready.targets == pytest.approx([1.88, 2.24, 2.48, 2.564])
    assert ready.tail == pytest.approx(0.25 * 2.0)  # a quarter of the median
    times = _schedule(_grid(), ready, reads=9)
    assert times[:4] == pytest.approx([1.88, 2.24, 2.48, 2.564])
    # Past the last target: a twentieth of the spread (1.2 s) first, most such answers
    # being ready just past it; then the distance from the last target doubles (a long
    # tail costs few reads), each step at most the coarse one.
    assert times[4] == pytest.approx(2.574 + 0.06 + 0.01)
    beyond = [t - 2.564 for t in times[4:]]
    steps = [b - (a + 0.01) for a, b in itertools.pairwise(times[3:])]  # from each answer
    assert all(b >= 1.9 * a for a, b in itertools.pairwise(beyond[:3])), beyond
    assert max(steps) == pytest.approx(0.5) and all(s <= 0.5 + 1e-9 for s in steps), steps


def test_ready_times_all_alike_do_not_read_a_slower_captcha_every_millisecond() -> None:
    ready = ReadyTimes.of([20.0] * 30)  # a provider that answered in 20 s each time
    times = _schedule(_grid(), ready, reads=12)
    past = [t for t in times if t > 20.0]
    steps = [b - (a + 0.01) for a, b in itertools.pairwise(times[len(times) - len(past) - 1 :])]
    assert min(steps) >= 0.05 * 0.2 * 20.0 - 1e-9, steps  # a twentieth of a fifth of 20 s
    assert sum(1 for s in steps if s < 5.0 - 1e-9) <= 5, steps  # then the quarter median


def test_a_captcha_read_at_a_target_that_moved_later_is_not_read_again_at_once() -> None:
    before = ReadyTimes.of(UNIFORM)
    later = ReadyTimes.of([t + 0.05 for t in UNIFORM])  # learned meanwhile: 50 ms later
    # Read (not ready) at the first target as it was; the first target is now 50 ms on:
    # the next read aims at the second target, as it would have.
    first = before.first + 0.005
    assert later.first > first
    assert later.next_after(first, 0.0, reads=1) == pytest.approx(later.targets[1])
    # Without the count of reads, only what has passed is skipped.
    assert later.next_after(first, 0.0) == pytest.approx(later.first)
    # A read found late, past several targets, still goes to the next one after it.
    assert later.next_after(2.3, 0.0, reads=1) == pytest.approx(later.targets[2])


def test_a_late_poll_goes_to_the_next_quantile_not_back_to_a_missed_one() -> None:
    ready = ReadyTimes.of(UNIFORM)
    grid = _grid()
    # Found not ready 2.3 s after submit (the engine was busy): next is the 0.9 quantile.
    assert grid.next_poll(1, 1002.3, since=1000.0, ready=ready) == pytest.approx(1002.48)


def test_quantiles_beat_the_grid_on_requests_and_delay_for_uniform_ready_times() -> None:
    ready = ReadyTimes.of(UNIFORM)
    truth = [1.4 + 1.2 * (i + 0.5) / 1000 for i in range(1000)]
    placed = _cost(_schedule(_grid(), ready, reads=12), truth)
    # The grid a type's polls follow until its ready times are learned: the learned 0.2
    # quantile first (given here), then every 3 poll intervals.
    grid = _cost(_schedule(_grid(), None, reads=12, wait=1.64), truth)
    assert placed[0] <= 2.05 and grid[0] >= placed[0] + 0.3, (placed, grid)
    assert placed[1] < grid[1], (placed, grid)


def _uniform_cost(quantiles: tuple[float, ...]) -> tuple[float, float]:
    """Reads per solve and mean delay (share of the range) of reads at ``quantiles`` for
    ready times uniform over the range, exactly; past the last one, read at 1.0."""
    points = (0.0, *quantiles, 1.0) if quantiles[-1] < 1.0 else (0.0, *quantiles)
    reads = sum((i + 1) * (b - a) for i, (a, b) in enumerate(itertools.pairwise(points)))
    delay = sum((b - a) ** 2 / 2 for a, b in itertools.pairwise(points))
    return reads, delay


def test_the_default_budget_keeps_the_documented_quantiles() -> None:
    assert POLL_QUANTILES == poll_quantiles(2) == (0.4, 0.7, 0.9, 0.97)


@pytest.mark.parametrize("reads", [1.5, 1.8, 2, 2.5, 3, 4, 5.5, 6, 8, 10])
def test_every_budget_reads_in_order_up_to_the_last_quantile(reads: float) -> None:
    quantiles = poll_quantiles(reads)
    assert quantiles[-1] == 0.97 and len(quantiles) >= 2
    assert all(a < b for a, b in itertools.pairwise(quantiles)), quantiles


@pytest.mark.parametrize(("reads", "delay"), [(2, 0.150), (3, 0.089), (4, 0.064), (6, 0.040)])
def test_a_budget_of_reads_buys_its_documented_delay(reads: float, delay: float) -> None:
    got_reads, got_delay = _uniform_cost(poll_quantiles(reads))
    # The last read aims at 0.97, not 1.0: a few hundredths off the closed form.
    assert got_reads == pytest.approx(reads, abs=0.05)
    assert got_delay == pytest.approx(delay, abs=0.003)


def test_no_placement_at_two_reads_beats_the_default() -> None:
    # Every placement of up to 5 reads on a 1/40 lattice whose mean reads are <= 2:
    # none collects sooner on average than the 0.4/0.7/0.9/1.0 one (0.15 of the range).
    lattice = [i / 40 for i in range(1, 40)]
    best = min(
        cost[1]
        for n in range(1, 5)
        for chosen in itertools.combinations(lattice, n)
        if (cost := _uniform_cost((*chosen, 1.0)))[0] <= 2.0 + 1e-9
    )
    assert best == pytest.approx(0.150, abs=1e-9)


def test_more_reads_collect_sooner_through_the_engine_s_schedule() -> None:
    truth = [1.4 + 1.2 * (i + 0.5) / 1000 for i in range(1000)]
    costs = {}
    for budget in (2, 4):
        ready = ReadyTimes.of(UNIFORM, quantiles=poll_quantiles(budget))
        costs[budget] = _cost(_schedule(_grid(), ready, reads=20), truth)
    (reads2, delay2), (reads4, delay4) = costs[2], costs[4]
    assert reads2 <= 2.05 and reads4 <= 4.05, costs
    assert delay4 < 0.5 * delay2, costs  # 0.064 against 0.150 of the 1.2 s range


@pytest.mark.parametrize("name", sorted(POLL_RULES))
def test_every_provider_s_least_gap_and_first_read_hold(name: str) -> None:
    rules = POLL_RULES[name]
    rng = random.Random(7)
    for _ in range(50):
        # Clustered, spread, tiny or huge ready times: the rules hold whatever was learned.
        centre, spread = rng.choice([0.01, 0.5, 2.0, 30.0]), rng.random()
        samples = [max(centre * (1 + spread * (rng.random() - 0.5)), 0.001) for _ in range(20)]
        times = _schedule(_grid(rules), ReadyTimes.of(samples), reads=30)
        assert times[0] >= rules.first_read_after * SCALE * READ_MARGIN - 1e-9
        gaps = [b - (a + 0.01) for a, b in itertools.pairwise(times)]
        assert min(gaps) >= rules.min_interval * SCALE * READ_MARGIN - 1e-9, (name, samples)


def test_2captcha_s_first_read_waits_5_s_however_fast_answers_were() -> None:
    ready = ReadyTimes.of([0.05] * 20)
    assert POLL_RULES["2captcha"].first_read_after == 5.0
    assert POLL_RULES["2captcha-v2"].first_read_after == 5.0
    grid = _grid(POLL_RULES["2captcha"])
    for learned in (ready, None):
        assert grid.first_poll(1000.0, 0.01, learned) - 1000.0 >= 5.0 * SCALE
    with pytest.raises(ValueError):
        PollRules("x", first_read_after=-1)


def test_capsolver_s_3_s_gap_moves_quantiles_later_never_earlier() -> None:
    ready = ReadyTimes.of(UNIFORM)
    times = _schedule(_grid(POLL_RULES["capsolver"]), ready, reads=4)
    gap = 3.0 * SCALE * READ_MARGIN  # 0.48 s
    assert times[0] == pytest.approx(1.88)
    # 2.24 is closer than the gap to 1.89: the next target past it, 2.48; then the tail,
    # whose first step (0.06 s) is shorter than the gap.
    assert times[1] == pytest.approx(2.48)
    assert times[2] == pytest.approx(2.49 + gap)


def test_the_ban_threshold_doubles_the_tail_step() -> None:
    grid = _grid()
    ready = ReadyTimes.of(UNIFORM)
    before = grid.next_poll(18, 1010.0, since=1000.0, ready=ready) - 1010.0
    after = grid.next_poll(19, 1010.0, since=1000.0, ready=ready) - 1010.0
    assert before == pytest.approx(0.5) and after == pytest.approx(1.0)


def test_the_read_cap_and_retention_still_bound_the_schedule() -> None:
    rules = dataclasses.replace(POLL_RULES["capmonster"], max_reads=5)
    grid = _grid(rules)
    times = _schedule(grid, ReadyTimes.of(UNIFORM), reads=5)
    assert grid.read_limit(len(times)) is not None  # the engine stops there
    # Anti-Captcha drops a result 60 s after it is ready: steps stay under half that.
    anti = _grid(POLL_RULES["anticaptcha"])
    slow = ReadyTimes.of([400.0 * SCALE] * 10)
    assert anti.first_poll(1000.0, 0.0, slow) - 1000.0 <= 30 * SCALE
    assert anti.next_poll(30, 1100.0, since=1000.0, ready=slow) - 1100.0 <= 30 * SCALE


def test_batch_reads_ignore_what_was_learned_and_unlearned_types_keep_the_grid() -> None:
    ready = ReadyTimes.of(UNIFORM)
    batched = _grid(batch=True)
    assert not batched.learns
    assert batched.first_poll(1000.0, 0.8, ready) == batched.on_tick(1000.8)
    tick = batched.next_poll(2, 1001.0, since=1000.0, ready=ready)
    assert tick == batched.on_tick(1001.0 + batched.interval / 2)
    unlearned = _grid()
    assert unlearned.learns
    assert unlearned.first_poll(1000.0, 0.8, None) == 1000.8
    assert unlearned.next_poll(2, 1001.0, since=1000.0, ready=None) == pytest.approx(1001.4)


# ------------------------------------------------------------------------ learning


@pytest.fixture
def learner_for(client: redis.Redis, settings: Settings):  # type: ignore[no-untyped-def]
    def make(provider: str = "captchaai", **changes: object) -> FirstPollLearner:
        tuned = dataclasses.replace(settings, time_scale=SCALE, **changes)
        return FirstPollLearner(tuned, client, refresh=0, provider=provider, rng=random.Random(1))

    return make


def test_few_samples_fall_back_to_the_documented_defaults(learner_for) -> None:  # type: ignore[no-untyped-def]
    learner = learner_for()
    for i in range(LEARN_MIN_SAMPLES - 1):
        learner.observe("recaptcha_v2", not_ready_at=1.8, ready_at=2.2 + i / 100)
    assert learner.ready_times("recaptcha_v2") is None
    assert learner.first_poll("recaptcha_v2") == pytest.approx(FIRST_POLL["recaptcha_v2"] * SCALE)
    learner.observe("recaptcha_v2", not_ready_at=1.8, ready_at=2.2)
    ready = learner.ready_times("recaptcha_v2")
    assert ready is not None and 1.8 <= ready.first <= 2.3


def test_a_sample_lies_in_the_interval_the_polls_saw(learner_for, client, settings) -> None:  # type: ignore[no-untyped-def]
    learner = learner_for()
    key = Keys(settings.key_prefix).timing("image", "captchaai")
    for _ in range(LEARN_WINDOW // 2 + 10):
        learner.observe("image", not_ready_at=1.5, ready_at=1.9)
        learner.observe("image", not_ready_at=None, ready_at=2.0)  # the first poll answered
    learner.flush()
    samples = [float(v) for v in client.lrange(key, 0, -1)]
    assert len(samples) == LEARN_WINDOW  # bounded: the newest only
    between = samples[1::2]
    first_hits = samples[0::2]
    assert all(1.5 <= s <= 1.9 for s in between) and len(set(between)) > 10  # spread
    assert all(1.0 <= s <= 2.0 for s in first_hits)  # the first poll's later half


def test_a_workers_samples_are_held_and_written_together(learner_for, client, settings) -> None:  # type: ignore[no-untyped-def]
    learner = learner_for()
    # An hour between writes: the samples after the first are held whatever the load.
    learner.flush_every = 3600.0
    other = learner_for()  # another worker's learner: it sees only what was written
    key = Keys(settings.key_prefix).timing("image", "captchaai")

    def pushes() -> int:
        return int(client.info("commandstats").get("cmdstat_lpush", {}).get("calls", 0))

    before = pushes()
    for i in range(40):
        learner.observe("image", not_ready_at=1.5, ready_at=1.6 + i / 100)
    # The first solve's sample is written at once; the next ones wait.
    assert pushes() - before == 1 and client.llen(key) == 1
    assert other.ready_times("image") is None  # one sample: too few to learn from
    # This worker learns from its own samples before they are written...
    ready = learner.ready_times("image")
    assert ready is not None and len(ready.samples) == 40
    # ...and reading them wrote them, with the rest, in one push.
    assert pushes() - before == 2 and client.llen(key) == 40
    learner.observe("image", not_ready_at=1.5, ready_at=1.7)
    learner.flush()  # as at a worker's stop
    assert client.llen(key) == 41 and pushes() - before == 3
    learner.flush()  # nothing held: nothing written
    assert pushes() - before == 3
    learner.flush_every = 0.0
    learner.observe("image", not_ready_at=1.5, ready_at=1.8)  # due: written at once
    assert client.llen(key) == 42 and pushes() - before == 4


def test_each_provider_learns_its_own_ready_times(learner_for) -> None:  # type: ignore[no-untyped-def]
    fast, slow = learner_for("fast"), learner_for("slow")
    for _ in range(LEARN_MIN_SAMPLES):
        fast.observe("turnstile", not_ready_at=0.2, ready_at=0.3)
        slow.observe("turnstile", not_ready_at=3.0, ready_at=3.1)
    fast_ready, slow_ready = fast.ready_times("turnstile"), slow.ready_times("turnstile")
    assert fast_ready is not None and slow_ready is not None
    assert fast_ready.targets[-1] <= 0.3 < 3.0 <= slow_ready.first


def test_learned_targets_are_bounded_like_the_first_poll(learner_for) -> None:  # type: ignore[no-untyped-def]
    learner = learner_for()
    for _ in range(LEARN_MIN_SAMPLES):
        learner.observe("image", not_ready_at=0.0001, ready_at=0.0002)
        learner.observe("geetest", not_ready_at=10_000.0, ready_at=10_001.0)
    image, geetest = learner.ready_times("image"), learner.ready_times("geetest")
    assert image is not None and geetest is not None
    assert min(image.targets) >= FIRST_POLL["image"] * SCALE / 10  # a tenth of the default
    assert max(geetest.targets) <= 120.0 * SCALE / 2  # half the deadline


def test_the_reads_budget_is_a_setting_the_learner_follows(learner_for) -> None:  # type: ignore[no-untyped-def]
    assert Settings.from_env({}).poll_reads == 2.0
    assert Settings.from_env({"CAPTCHA_TASKS_POLL_READS": "4"}).poll_reads == 4.0
    for bad in ("1", "11", "many", "nan"):
        with pytest.raises(ConfigurationError, match="CAPTCHA_TASKS_POLL_READS"):
            Settings.from_env({"CAPTCHA_TASKS_POLL_READS": bad})
    learner = learner_for(poll_reads=4.0)
    for i in range(40):
        learner.observe("image", not_ready_at=1.4 + 0.03 * i, ready_at=1.41 + 0.03 * i)
    ready = learner.ready_times("image")
    assert ready is not None and len(ready.targets) == len(poll_quantiles(4)) == 9
