"""ALTCHA v2 in the package: challenges made by the official ``altcha`` library read,
bounded and solved to payloads its ``verify_solution`` accepts; what is not a challenge,
or is past the bounds, refused before any work, naming why."""

from __future__ import annotations

import base64
import json
import time
from typing import Any

import altcha
import altcha.v2
import pytest

from captcha_tasks.errors import InvalidTaskInput, SolveTimeout
from captcha_tasks.provider.altcha import (
    ALGORITHMS_V2,
    AltchaBounds,
    AltchaChallenge,
    AltchaChallengeV2,
    check_bounds,
    parse_challenge,
    read_challenge,
    solve_payload,
)

KEY = "the site's hmac key"
SMALL: dict[str, dict[str, int]] = {
    "SHA-256": {"cost": 20},
    "SHA-384": {"cost": 20},
    "SHA-512": {"cost": 20},
    "PBKDF2/SHA-256": {"cost": 50},
    "PBKDF2/SHA-384": {"cost": 50},
    "PBKDF2/SHA-512": {"cost": 50},
    "SCRYPT": {"cost": 32, "memory_cost": 8, "parallelism": 1},
    "ARGON2ID": {"cost": 1, "memory_cost": 32, "parallelism": 1},
}


def _made(algorithm: str, **options: Any) -> dict[str, Any]:
    challenge: dict[str, Any] = altcha.create_challenge(
        algorithm, hmac_secret=KEY, **{**SMALL[algorithm], **options}
    ).to_dict()
    return challenge


def test_the_algorithms_are_the_librarys() -> None:
    # altcha/v2.py: iterated SHA of SHA-256 and the _SHA_DIGESTS, PBKDF2 likewise, SCRYPT,
    # ARGON2ID (a name it does not know falls back to SHA-256 there; refused here).
    library = {
        "SHA-256",
        *altcha.v2._SHA_DIGESTS,
        "PBKDF2/SHA-256",
        *altcha.v2._PBKDF2_DIGESTS,
        "SCRYPT",
        "ARGON2ID",
    }
    assert set(ALGORITHMS_V2) == library == set(SMALL)


@pytest.mark.parametrize("algorithm", sorted(SMALL))
@pytest.mark.parametrize("counter", [None, 7])
def test_each_algorithm_is_solved_to_a_payload_the_library_verifies(
    algorithm: str, counter: int | None
) -> None:
    expires = int(time.time()) + 600
    made = _made(algorithm, counter=counter, expires_at=expires, data={"form": "contact"})
    challenge = read_challenge(json.dumps({**made, "configuration": {"auto": "onload"}}))
    assert isinstance(challenge, AltchaChallengeV2)
    assert challenge.expires == float(expires)
    assert challenge.captcha_id == made["parameters"]["nonce"]
    payload = solve_payload(challenge, AltchaBounds())
    assert altcha.verify_solution(payload, KEY).verified
    sent = json.loads(base64.b64decode(payload))
    assert sent["challenge"] == made  # the parameters as given: the signature holds
    assert set(sent["solution"]) == {"counter", "derivedKey", "time"}
    if counter is not None:
        assert sent["solution"]["counter"] == counter
        assert challenge.expected_derivations is None  # deterministic: unknown
    else:
        assert challenge.expected_derivations == 256
    # The verifier is a real check: another key, or another counter, is refused.
    assert not altcha.verify_solution(payload, "another key").verified
    sent["solution"]["counter"] += 1
    tampered = base64.b64encode(json.dumps(sent).encode()).decode()
    assert not altcha.verify_solution(tampered, KEY).verified


def test_a_sites_challenge_id_names_it_and_a_v1_challenge_reads_as_v1() -> None:
    made = _made("SHA-256", data={"challengeId": "form-42"})
    assert read_challenge(made).captcha_id == "form-42"
    v1 = altcha.create_challenge_v1(hmac_key=KEY, max_number=10).to_dict()
    assert isinstance(read_challenge(v1), AltchaChallenge)


def test_memory_is_worked_out_from_the_parameters() -> None:
    argon = read_challenge(_made("ARGON2ID", memory_cost=4096, parallelism=2))
    assert argon.memory_bytes == 4096 * 1024  # the whole memory, shared by the lanes
    default = _made("ARGON2ID")
    del default["parameters"]["memoryCost"]
    assert read_challenge(default).memory_bytes == 65_536 * 1024  # the library's default
    scrypt = read_challenge(_made("SCRYPT", cost=1024, memory_cost=8, parallelism=2))
    assert scrypt.memory_bytes == 128 * 8 * (1024 + 2)
    assert read_challenge(_made("PBKDF2/SHA-256")).memory_bytes == 0


def test_past_the_memory_bound_is_refused_naming_the_setting() -> None:
    challenge = read_challenge(_made("ARGON2ID", memory_cost=64 * 1024))
    with pytest.raises(InvalidTaskInput) as caught:
        check_bounds(challenge, AltchaBounds(max_memory_mib=63))
    assert caught.value.code == "ALTCHA_TOO_MUCH_MEMORY"
    assert "64 MiB" in str(caught.value) and "CAPTCHA_TASKS_ALTCHA_MAX_MEMORY_MIB" in str(
        caught.value
    )
    # Within the memory bound. The time bound is lifted: 256 derivations of 64 MiB are
    # expected to take some 10-20 s here, by a rate measured on a possibly loaded core.
    check_bounds(challenge, AltchaBounds(max_memory_mib=64, max_seconds=3600.0))


@pytest.mark.parametrize(
    ("algorithm", "options"),
    [
        ("SHA-512", {"cost": 10**9}),
        ("PBKDF2/SHA-256", {"cost": 10**8}),
        ("SCRYPT", {"cost": 2**14, "memory_cost": 8, "parallelism": 1000}),
        ("ARGON2ID", {"cost": 10_000, "memory_cost": 1024}),
        ("SHA-256", {"cost": 1, "key_prefix": "0000000"}),  # 16**7 derivations expected
    ],
)
def test_an_expected_search_past_the_time_bound_is_refused_before_any_work(
    algorithm: str, options: dict[str, Any]
) -> None:
    # create_challenge derives nothing without a counter: these cost nothing to make.
    challenge = read_challenge(_made(algorithm, **options))
    started = time.monotonic()
    with pytest.raises(InvalidTaskInput) as caught:
        solve_payload(challenge, AltchaBounds(max_seconds=5, max_memory_mib=4096))
    assert time.monotonic() - started < 1
    assert caught.value.code == "ALTCHA_TOO_HARD"
    assert "CAPTCHA_TASKS_ALTCHA_MAX_SECONDS (5)" in str(caught.value)


def test_the_search_stops_at_its_deadline() -> None:
    # Deterministic: the counter is far out and nothing in the challenge says so.
    challenge = read_challenge(_made("SHA-256", cost=1, counter=3_000_000))
    started = time.monotonic()
    with pytest.raises(SolveTimeout) as caught:
        solve_payload(challenge, AltchaBounds(max_seconds=0.3))
    assert caught.value.code == "ALTCHA_DEADLINE"
    assert 0.3 <= time.monotonic() - started < 2


def test_a_v1_search_stops_at_its_deadline_too() -> None:
    v1 = altcha.create_challenge_v1(hmac_key=KEY, max_number=10**7, number=10**7)
    challenge = read_challenge(v1.to_dict())
    ticks = iter(range(10**6))
    with pytest.raises(SolveTimeout, match="ALTCHA_DEADLINE"):
        # A clock that moves one second per look: the second look is past the deadline.
        challenge.solve(deadline=1.5, clock=lambda: float(next(ticks)))


def test_a_v2_challenge_is_refused_where_only_v1_is_taken() -> None:
    with pytest.raises(InvalidTaskInput) as caught:
        parse_challenge(_made("SCRYPT"))
    assert caught.value.code == "ALTCHA_V2_NOT_OFFERED"


def _with(kdf: str = "SHA-256", **fields: Any) -> dict[str, Any]:
    made = _made(kdf)
    made["parameters"].update(fields)
    return made


@pytest.mark.parametrize(
    ("raw", "names"),
    [
        ({"parameters": []}, "'parameters'"),
        (_with(algorithm="sha-256"), "algorithm"),
        (_with(algorithm="PBKDF2/SHA-1"), "algorithm"),
        (_with(algorithm=["SCRYPT"]), "algorithm"),
        (_with(nonce="xyz"), "nonce"),
        (_with(salt="abc"), "salt"),
        (_with(cost=0), "cost"),
        (_with(cost="100"), "cost"),
        (_with(cost=True), "cost"),
        (_with(keyLength=0), "keyLength"),
        (_with(keyPrefix="zz"), "keyPrefix"),
        (_with(keyPrefix="00" * 33), "longer than the 32-byte key"),
        (_with("SHA-512", keyLength=64, keyPrefix="00" * 65), "longer than the 64-byte key"),
        (_with("SCRYPT", cost=1000), "power of 2"),
        (_with("ARGON2ID", memoryCost=8, parallelism=2), "8 KiB per lane"),
        (_with("ARGON2ID", keyLength=3), "keyLength of 4"),
        (_with(parallelism=0), "parallelism"),
        ({**_made("SHA-256"), "signature": 5}, "'signature'"),
    ],
)
def test_what_is_not_a_v2_challenge_is_refused_naming_the_fault(raw: Any, names: str) -> None:
    with pytest.raises(InvalidTaskInput, match=names) as caught:
        read_challenge(raw)
    assert caught.value.code == "BAD_ALTCHA_CHALLENGE"


def test_an_unsigned_challenge_is_solved_and_its_payload_carries_no_signature() -> None:
    made: dict[str, Any] = altcha.create_challenge("SHA-256", 5).to_dict()
    assert "signature" not in made
    payload = solve_payload(read_challenge(made), AltchaBounds())
    assert "signature" not in json.loads(base64.b64decode(payload))["challenge"]
