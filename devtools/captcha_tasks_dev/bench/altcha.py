"""The ALTCHA benchmark: what ``solve_altcha``'s proof of work costs a worker's core, for
every algorithm the official ``altcha`` library offers, beside the library's own solver.

``solve_altcha`` solves in the worker's pool, one core per solve, with no provider and no
I/O but the challenge's fetch: its cost is the search's. For each algorithm, in one
process, timed by its CPU clock, two columns solve the same challenges:

- **solve_altcha**: the task's own path (:func:`~captcha_tasks.provider.altcha.
  read_challenge`, then :func:`~captcha_tasks.provider.altcha.solve_payload`, which
  checks the bounds and encodes the payload);
- **library**: altcha's ``solve_challenge_v1`` (v1) or ``solve_challenge`` (v2) called
  directly on the library's own ``Challenge``: the baseline.

Each column runs twice, in turn with the other, and keeps its better run.

v1 (SHA-1, SHA-256, SHA-512): ``--solves`` challenges made by ``create_challenge_v1``
whose numbers are drawn at random in ``0..--max-number``, as the library draws them (on
average half the range each); solves per second per core is their count over the CPU
time. v1's loop here is not the library's (see :mod:`captcha_tasks.provider.altcha`): the
ratio is what that buys.

v2 (each KDF): the library's defaults (``keyLength`` 32, ``keyPrefix`` ``"00"``: 256
derivations expected a solve; scrypt ``r`` 8 and ``p`` 1; Argon2id 64 MiB and one lane)
with the cost in :data:`V2_COSTS`, which the library leaves to the site. A solve at that
difficulty takes from one derivation to thousands, as luck has it: each column instead
solves a deterministic challenge (``create_challenge(counter=k)``, found at ``k`` exactly)
whose ``k`` makes about ``--seconds`` of search, and counts its derivations; solves per
second per core is derivations per CPU second over 256. Every payload is checked with
the library's ``verify_solution``; every v1 solve found the number its challenge hid.
"""

from __future__ import annotations

import dataclasses
import datetime
import random
import time
from collections.abc import Callable
from typing import Any, cast

import altcha
from altcha import v1 as altcha_v1

from captcha_tasks.errors import CaptchaTasksError
from captcha_tasks.provider.altcha import (
    ALGORITHMS,
    ALGORITHMS_V2,
    DEFAULT_MAX_NUMBER,
    AltchaBounds,
    read_challenge,
    solve_payload,
)

__all__ = ["EVERY", "V2_COSTS", "AltchaOptions", "format_altcha_report", "run_altcha"]

Progress = Callable[[str], None]
_KEY = "bench hmac key"
#: The bench measures the solver, not the bounds: none that it reaches.
_UNBOUNDED = AltchaBounds(max_number=2**62, max_seconds=86_400.0, max_memory_mib=65_536)
#: The library's default ``keyPrefix``, ``"00"``, matches one key in 256.
DERIVATIONS_PER_SOLVE = 256
#: The ``cost`` of each v2 algorithm, which the library requires of the site: the
#: library's README's 5,000 for the SHA and PBKDF2 ones (its only example), scrypt's
#: interactive N = 2**14 (its defaults r 8, p 1: 16 MiB), Argon2id's t = 3 (with its
#: default 64 MiB: RFC 9106's second recommended option, on one lane).
V2_COSTS: dict[str, int] = {
    "SHA-256": 5_000,
    "SHA-384": 5_000,
    "SHA-512": 5_000,
    "PBKDF2/SHA-256": 5_000,
    "PBKDF2/SHA-384": 5_000,
    "PBKDF2/SHA-512": 5_000,
    "SCRYPT": 16_384,
    "ARGON2ID": 3,
}
#: Every algorithm, as the report names them: v1's, then v2's.
EVERY = (*(f"v1 {name}" for name in ALGORITHMS), *(f"v2 {name}" for name in ALGORITHMS_V2))


@dataclasses.dataclass(frozen=True)
class AltchaOptions:
    #: v1 challenges' ``maxnumber`` (the widget's default).
    max_number: int = DEFAULT_MAX_NUMBER
    #: v1 challenges each column solves per algorithm.
    solves: int = 10
    #: v2: seconds of search each column's challenge is made to take, per algorithm.
    seconds: float = 1.0
    #: The algorithms to measure (``"v1 SHA-256"``, ``"v2 SCRYPT"``, ...); empty: all.
    algorithms: tuple[str, ...] = ()
    #: Seed of v1's random numbers (the same run twice solves the same numbers).
    seed: int = 1


def _cpu(work: Callable[[], object]) -> float:
    started = time.process_time()
    work()
    return time.process_time() - started


def _paired(ours: Callable[[], object], library: Callable[[], object]) -> tuple[float, float]:
    """Each column's CPU seconds, the better of two runs taken in turn (ours, the
    library's, ours, the library's): neither gains from going first or last."""
    runs = [(_cpu(ours), _cpu(library)) for _ in range(2)]
    return min(run[0] for run in runs), min(run[1] for run in runs)


def _expires() -> datetime.datetime:
    return datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(hours=1)


def _v1_row(algorithm: str, options: AltchaOptions, rng: random.Random) -> dict[str, Any]:
    numbers = [rng.randint(0, options.max_number) for _ in range(options.solves)]
    made = [
        altcha_v1.create_challenge(
            altcha_v1.ChallengeOptions(
                algorithm=cast("altcha_v1.AlgoType", algorithm),
                hmac_key=_KEY,
                max_number=options.max_number,
                number=number,
                expires=_expires(),
            )
        )
        for number in numbers
    ]

    read_challenge(made[0].to_dict()).estimated_seconds()  # its rate measured before the clock

    def ours() -> None:
        for challenge, number in zip(made, numbers, strict=True):
            payload = solve_payload(read_challenge(challenge.to_dict()), _UNBOUNDED)
            ok, _ = altcha_v1.verify_solution(payload, _KEY)
            if not ok or altcha_v1.Payload.from_base64(payload).number != number:
                raise CaptchaTasksError(f"altcha bench: {algorithm} missed {number}")

    def library() -> None:
        for challenge, number in zip(made, numbers, strict=True):
            found = altcha_v1.solve_challenge(challenge)
            if found is None or found.number != number:
                raise CaptchaTasksError(f"altcha bench: the library missed {number}")

    ours_cpu, library_cpu = _paired(ours, library)
    return {
        "algorithm": f"v1 {algorithm}",
        "parameters": f"maxnumber {options.max_number:,}",
        "solves": options.solves,
        "solves_per_second_per_core": options.solves / ours_cpu,
        "library_solves_per_second_per_core": options.solves / library_cpu,
        "seconds_per_solve": ours_cpu / options.solves,
    }


def _v2_parameters(algorithm: str) -> dict[str, Any]:
    return {"cost": V2_COSTS[algorithm]}


def _v2_row(algorithm: str, options: AltchaOptions) -> dict[str, Any]:
    # One derivation, timed (a challenge found at counter 0), sets the counter that makes
    # about --seconds of search.
    probe = altcha.create_challenge(algorithm, counter=0, **_v2_parameters(algorithm))
    one = _cpu(lambda: altcha.solve_challenge(probe, timeout=0))
    counter = max(1, round(options.seconds / max(one, 1e-9)))
    made = altcha.create_challenge(
        algorithm,
        counter=counter,
        hmac_secret=_KEY,
        expires_at=_expires(),
        **_v2_parameters(algorithm),
    )

    read_challenge(made.to_dict()).estimated_seconds()  # its rates measured before the clock

    def ours() -> None:
        payload = solve_payload(read_challenge(made.to_dict()), _UNBOUNDED)
        if not altcha.verify_solution(payload, _KEY).verified:
            raise CaptchaTasksError(f"altcha bench: {algorithm}'s payload was refused")

    def library() -> None:
        found = altcha.solve_challenge(made, timeout=0)
        if found is None or found.counter != counter:
            raise CaptchaTasksError(f"altcha bench: the library missed {counter}")

    derivations = counter + 1
    ours_cpu, library_cpu = _paired(ours, library)
    memory = read_challenge(made.to_dict()).memory_bytes
    shown = ", ".join(f"{k} {v:,}" for k, v in made.parameters.to_dict().items() if k in _SHOWN)
    return {
        "algorithm": f"v2 {algorithm}",
        "parameters": shown + (f", {memory / 2**20:.0f} MiB" if memory else ""),
        "derivations": derivations,
        "solves_per_second_per_core": derivations / ours_cpu / DERIVATIONS_PER_SOLVE,
        "library_solves_per_second_per_core": derivations / library_cpu / DERIVATIONS_PER_SOLVE,
        "seconds_per_solve": ours_cpu / derivations * DERIVATIONS_PER_SOLVE,
    }


_SHOWN = ("cost", "memoryCost", "parallelism")


def run_altcha(options: AltchaOptions, progress: Progress) -> dict[str, Any]:
    """Measure each algorithm (see the module docstring); the report as a dict."""
    wanted = options.algorithms or EVERY
    unknown = sorted(set(wanted) - set(EVERY))
    if unknown:
        raise CaptchaTasksError(f"altcha bench: no algorithm {', '.join(unknown)}")
    rng = random.Random(options.seed)
    rows = []
    for name in EVERY:
        if name not in wanted:
            continue
        version, algorithm = name.split(" ", 1)
        progress(f"{name}: solve_altcha's path, then the library's solver")
        if version == "v1":
            rows.append(_v1_row(algorithm, options, rng))
        else:
            rows.append(_v2_row(algorithm, options))
    return {
        "library": f"altcha {_library_version()}",
        "max_number": options.max_number,
        "derivations_per_solve": DERIVATIONS_PER_SOLVE,
        "default_max_seconds": AltchaBounds().max_seconds,
        "rows": rows,
    }


def _library_version() -> str:
    from importlib.metadata import version

    return version("altcha")


def format_altcha_report(report: dict[str, Any]) -> str:
    lines = [
        f"ALTCHA proof of work, one core (CPU time): solve_altcha beside {report['library']}'s "
        "own solver",
        f"  {'algorithm':<18} {'parameters':<34} {'solves/s/core':>13} {'library':>9} "
        f"{'ratio':>6} {'s/solve':>8}",
    ]
    for row in report["rows"]:
        ours, theirs = row["solves_per_second_per_core"], row["library_solves_per_second_per_core"]
        over = " *" if row["seconds_per_solve"] > report["default_max_seconds"] else ""
        lines.append(
            f"  {row['algorithm']:<18} {row['parameters']:<34} {ours:>13.3f} {theirs:>9.3f} "
            f"{ours / theirs:>5.2f}x {row['seconds_per_solve']:>8.3f}{over}"
        )
    lines += [
        f"  v1: numbers drawn at random in 0..maxnumber (mean {report['max_number'] // 2:,} "
        "hashes a solve).",
        f'  v2: the library\'s defaults (keyPrefix "00": {report["derivations_per_solve"]} '
        "derivations expected a solve); solves/s = derivations per CPU second / "
        f"{report['derivations_per_solve']}.",
    ]
    if any(row["seconds_per_solve"] > report["default_max_seconds"] for row in report["rows"]):
        lines.append(
            f"  *: a solve expected to take over CAPTCHA_TASKS_ALTCHA_MAX_SECONDS's default "
            f"({report['default_max_seconds']:g} s): refused unsolved at these parameters."
        )
    return "\n".join(lines)
