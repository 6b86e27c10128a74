"""``solve_altcha`` against the official ``altcha`` library, through a real ``celery worker``
whose provider cannot be reached: challenges the library makes, for every algorithm it
offers (v1 and v2), given as JSON or fetched from a loopback site, solved by the worker,
and each payload accepted by the library's own ``verify_solution_v1`` / ``verify_solution``;
and the bounds (``CAPTCHA_TASKS_ALTCHA_MAX_SECONDS``, ``_MAX_MEMORY_MIB``) refusing what is
past them, at the caller and at the worker, the worker solving on afterwards.

The key derivations' parameters are kept small (a few milliseconds each): the module runs
in a few seconds."""

from __future__ import annotations

import datetime
import time
import typing
from collections.abc import Iterator
from typing import Any

import altcha
import altcha.v1
import pytest

from captcha_tasks import solve_altcha
from captcha_tasks.errors import InvalidTaskInput, SolveTimeout
from tests.support.altcha_site import AltchaSite
from tests.support.workers import worker_env

pytestmark = pytest.mark.integration

KEY = "the site's hmac key"
#: Each v2 algorithm altcha 2.3.0 derives keys for (altcha/v2.py: iterated SHA and
#: PBKDF2 of SHA-256/384/512, SCRYPT, ARGON2ID), with small parameters of its own.
V2_PARAMETERS: dict[str, dict[str, int]] = {
    "SHA-256": {"cost": 50},
    "SHA-384": {"cost": 50},
    "SHA-512": {"cost": 50},
    "PBKDF2/SHA-256": {"cost": 100},
    "PBKDF2/SHA-384": {"cost": 100},
    "PBKDF2/SHA-512": {"cost": 100},
    "SCRYPT": {"cost": 64, "memory_cost": 8, "parallelism": 1},
    "ARGON2ID": {"cost": 1, "memory_cost": 64, "parallelism": 1},
}
V1_ALGORITHMS = typing.get_args(altcha.v1.AlgoType)
#: The worker's bounds: tighter than the caller's defaults (20 s, 256 MiB), so that what
#: lies between is refused by the worker alone.
WORKER_BOUNDS = {
    "CAPTCHA_TASKS_ALTCHA_MAX_SECONDS": "1",
    "CAPTCHA_TASKS_ALTCHA_MAX_MEMORY_MIB": "16",
}


@pytest.fixture
def site() -> Iterator[AltchaSite]:
    with AltchaSite() as running:
        yield running


def _v2(algorithm: str, **options: Any) -> dict[str, Any]:
    expires = int(time.time()) + 600
    made = altcha.create_challenge(
        algorithm, hmac_secret=KEY, expires_at=expires, **{**V2_PARAMETERS[algorithm], **options}
    )
    challenge: dict[str, Any] = made.to_dict()
    return challenge


def _v1(algorithm: str, *, spelling: str = "maxNumber") -> dict[str, Any]:
    made = altcha.create_challenge_v1(
        algorithm=algorithm,
        hmac_key=KEY,
        max_number=20_000,
        expires=datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(minutes=10),
        params={"lang": "en"},
    )
    challenge: dict[str, Any] = made.to_dict()  # the library spells it maxNumber
    challenge[spelling] = challenge.pop("maxNumber")
    return challenge


def _verified(challenge: dict[str, Any], payload: str) -> bool:
    if "parameters" in challenge:
        return altcha.verify_solution(payload, KEY).verified
    ok, _ = altcha.verify_solution_v1(payload, KEY)
    return ok


def test_every_algorithm_the_library_offers_is_solved_and_verified_by_it(
    worker_factory: Any, site: AltchaSite, no_provider: str
) -> None:
    worker_factory(
        worker_env(
            no_provider, CAPTCHA_TASKS_ALLOWED_DOMAINS=f"127.0.0.1:{site.port}", **WORKER_BOUNDS
        ),
        concurrency=2,
    )
    page = f"{site.url}/contact"
    challenges: dict[str, dict[str, Any]] = {}
    for algorithm in V1_ALGORITHMS:
        challenges[f"v1 {algorithm}"] = _v1(algorithm)
    challenges["v1 maxnumber"] = _v1("SHA-256", spelling="maxnumber")
    for algorithm in V2_PARAMETERS:
        challenges[f"v2 {algorithm}"] = _v2(algorithm)  # keyPrefix "00": 256 expected
        # Deterministic mode: the site chose the counter, its key signed for fast checks.
        challenges[f"v2 {algorithm} counter"] = _v2(algorithm, counter=40, data={"form": "x"})
    sent = {}
    for name, challenge in challenges.items():
        sent[name, "json"] = solve_altcha.delay(page, challenge_json=challenge)
        path = site.serve(name.replace(" ", "-").replace("/", "_"), challenge)
        sent[name, "url"] = solve_altcha.delay(page, challenge_url=path)

    for (name, how), pending in sent.items():
        result = pending.get(timeout=60)
        assert _verified(challenges[name], result["solution"]), (name, how)
        assert (result["provider"], result["cost"], result["type"]) == (None, "0", "altcha")
        assert result["expires_at"] is not None and result["expires_at"] > time.time()
    assert len(sent) == 2 * (len(V1_ALGORITHMS) + 1 + 2 * len(V2_PARAMETERS))


def test_past_the_bounds_refused_at_the_caller_and_at_the_worker_which_solves_on(
    worker_factory: Any, site: AltchaSite, no_provider: str
) -> None:
    worker = worker_factory(
        worker_env(
            no_provider, CAPTCHA_TASKS_ALLOWED_DOMAINS=f"127.0.0.1:{site.port}", **WORKER_BOUNDS
        )
    )
    page = f"{site.url}/contact"
    # The caller's own bounds (the defaults): refused at delay(), nothing sent.
    with pytest.raises(InvalidTaskInput) as caught:
        solve_altcha.delay(page, challenge_json=_v2("ARGON2ID", memory_cost=1 << 20))
    assert caught.value.code == "ALTCHA_TOO_MUCH_MEMORY"
    assert "CAPTCHA_TASKS_ALTCHA_MAX_MEMORY_MIB (256)" in str(caught.value)
    with pytest.raises(InvalidTaskInput) as caught:
        solve_altcha.delay(page, challenge_json=_v2("PBKDF2/SHA-512", cost=10**9))
    assert caught.value.code == "ALTCHA_TOO_HARD"
    assert "CAPTCHA_TASKS_ALTCHA_MAX_SECONDS (20)" in str(caught.value)

    # Within the caller's bounds, past the worker's: refused there before any work.
    # 32 MiB, over the worker's 16 (one derivation: the site's counter, quick enough).
    memory = _v2("ARGON2ID", memory_cost=32 * 1024, counter=0)
    # 256 derivations expected of about 12 ms each: some 3 s, between the two bounds.
    slow = _v2("PBKDF2/SHA-256", cost=30_000)
    for challenge, code in ((memory, "ALTCHA_TOO_MUCH_MEMORY"), (slow, "ALTCHA_TOO_HARD")):
        for how in ("json", "url"):
            given = (
                {"challenge_json": challenge}
                if how == "json"
                else {"challenge_url": site.serve(f"{code}-{how}", challenge)}
            )
            started = time.monotonic()
            with pytest.raises(InvalidTaskInput) as caught:
                solve_altcha.delay(page, **given).get(timeout=30)
            assert caught.value.code == code, how
            assert time.monotonic() - started < 5
    # A search that outlasts the worker's deadline: the site's counter is far out, and a
    # deterministic challenge does not say where.
    far = _v2("SHA-256", cost=1, counter=5_000_000)
    started = time.monotonic()
    with pytest.raises(SolveTimeout) as timed_out:
        solve_altcha.delay(page, challenge_json=far).get(timeout=30)
    assert timed_out.value.code == "ALTCHA_DEADLINE"
    assert 1 <= time.monotonic() - started < 10

    # The worker solves on, in the same pool process, none of it lost. The site's counter
    # (4 derivations): a random prefix takes a geometric number of them (over 1,000 about
    # one time in 50), which a loaded machine may not finish within the 1 s bound.
    easy = _v2("ARGON2ID", memory_cost=1024, counter=3)
    assert _verified(
        easy, solve_altcha.delay(page, challenge_json=easy).get(timeout=30)["solution"]
    )
    worker.check_alive()
    assert "WorkerLostError" not in worker.log() and "exited with" not in worker.log()


def test_provider_mode_refuses_v2_at_the_caller_and_at_the_worker(
    worker_factory: Any, site: AltchaSite, no_provider: str, settings_env: Any
) -> None:
    env = worker_env(no_provider, CAPTCHA_TASKS_ALLOWED_DOMAINS=f"127.0.0.1:{site.port}")
    page = f"{site.url}/contact"
    challenge = _v2("PBKDF2/SHA-256")
    settings_env(CAPTCHA_TASKS_ALTCHA_SOLVER="provider")
    with pytest.raises(InvalidTaskInput) as caught:
        solve_altcha.delay(page, challenge_json=challenge)
    assert caught.value.code == "ALTCHA_V2_NOT_OFFERED"
    worker_factory({**env, "CAPTCHA_TASKS_ALTCHA_SOLVER": "provider"})
    with pytest.raises(InvalidTaskInput) as caught:
        solve_altcha.delay(page, challenge_url=site.serve("v2", challenge)).get(timeout=30)
    assert caught.value.code == "ALTCHA_V2_NOT_OFFERED"
    assert "no provider takes v2" in str(caught.value)


def test_auto_mode_solves_v2_in_the_worker(
    worker_factory: Any, site: AltchaSite, no_provider: str, settings_env: Any
) -> None:
    env = worker_env(no_provider, CAPTCHA_TASKS_ALLOWED_DOMAINS=f"127.0.0.1:{site.port}")
    challenge = _v2("SCRYPT")
    settings_env(CAPTCHA_TASKS_ALTCHA_SOLVER="auto")
    worker_factory({**env, "CAPTCHA_TASKS_ALTCHA_SOLVER": "auto"})
    result = solve_altcha.delay(f"{site.url}/", challenge_json=challenge).get(timeout=30)
    assert _verified(challenge, result["solution"])
    assert (result["provider"], result["cost"]) == (None, "0")
