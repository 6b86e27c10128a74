"""The Altcha benchmark: what ``solve_altcha``'s proof of work costs a worker's core.

``solve_altcha`` runs :func:`captcha_tasks.provider.altcha.solve` in the worker's pool,
one core per solve, with no provider and no I/O but the challenge's fetch: its cost is
that loop's. This measures it with no Celery around it (a task's own overhead is a few
milliseconds, against hundreds of milliseconds of hashing at the widget's default
``maxnumber``):

1. **hashes per second per core**: one process counts a challenge whose number is
   ``maxnumber`` itself (the whole range, the worst case), timed by its CPU clock;
2. **solves per second per core**: the same process solves ``--solves`` challenges
   whose numbers are drawn at random in ``0..maxnumber``, as the reference's
   ``createChallenge`` draws them (on average half the range each), over its CPU time;
3. **the whole run**: ``--processes`` processes (default: one per core) each solve that
   many challenges at once; solves per second of wall time for the machine, and that
   divided by the processes.

Every challenge is made here as the reference makes them (``HASH(salt + number)``,
signed), and every solve is checked to find the number it was made with.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import os
import random
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from typing import Any

from ...errors import CaptchaTasksError
from ...provider.altcha import DEFAULT_MAX_NUMBER, AltchaChallenge, solve

__all__ = ["AltchaOptions", "format_altcha_report", "run_altcha"]

Progress = Callable[[str], None]
_KEY = b"bench hmac key"


@dataclasses.dataclass(frozen=True)
class AltchaOptions:
    #: The challenges' ``maxnumber`` (the widget's default).
    max_number: int = DEFAULT_MAX_NUMBER
    #: Challenges each process solves.
    solves: int = 40
    #: Processes of the whole run (0: one per core).
    processes: int = 0
    #: ``SHA-1``, ``SHA-256`` or ``SHA-512``.
    algorithm: str = "SHA-256"
    #: Seed of the random numbers (the same run twice solves the same challenges).
    seed: int = 1


def _challenge(algorithm: str, number: int, max_number: int, salt: str) -> AltchaChallenge:
    digest = hashlib.new(algorithm.replace("-", "").lower(), f"{salt}{number}".encode())
    challenge = digest.hexdigest()
    signature = hmac.new(_KEY, challenge.encode(), algorithm.replace("-", "").lower())
    return AltchaChallenge(algorithm, challenge, salt, signature.hexdigest(), max_number)


def _solve_all(algorithm: str, numbers: list[int], max_number: int) -> tuple[float, int]:
    """Solve a challenge for each number (run in a child process): its CPU seconds, and
    the hashes computed."""
    hashes = 0
    started = time.process_time()
    for index, number in enumerate(numbers):
        salt = f"{os.getpid():x}{index:08x}?expires=4102444800&"
        found = solve(_challenge(algorithm, number, max_number, salt)).number
        if found != number:
            raise CaptchaTasksError(f"altcha bench: found {found}, the challenge hid {number}")
        hashes += number + 1
    return time.process_time() - started, hashes


def run_altcha(options: AltchaOptions, progress: Progress) -> dict[str, Any]:
    """Run the three measures; the report as a dict (see the module docstring)."""
    processes = options.processes or os.cpu_count() or 1
    rng = random.Random(options.seed)
    maxn = options.max_number

    progress(f"counting one whole range of {maxn:,} ({options.algorithm}) on one core")
    seconds, hashes = _solve_all(options.algorithm, [maxn], maxn)
    hashes_per_second = hashes / seconds

    numbers = [rng.randint(0, maxn) for _ in range(options.solves)]
    progress(f"{options.solves} challenges at random in 0..{maxn:,} on one core")
    one_cpu, one_hashes = _solve_all(options.algorithm, numbers, maxn)

    batches = [[rng.randint(0, maxn) for _ in range(options.solves)] for _ in range(processes)]
    progress(f"the whole run: {processes} processes x {options.solves} challenges at once")
    started = time.monotonic()
    with ProcessPoolExecutor(processes) as pool:
        done = list(
            pool.map(_solve_all, [options.algorithm] * processes, batches, [maxn] * processes)
        )
    wall = time.monotonic() - started
    solves = processes * options.solves
    return {
        "algorithm": options.algorithm,
        "max_number": maxn,
        "cores": os.cpu_count(),
        "hashes_per_second_per_core": round(hashes_per_second),
        "worst_case_seconds": round(maxn / hashes_per_second, 3),
        "solves_per_core": options.solves,
        "mean_hashes_per_solve": round(one_hashes / options.solves),
        "solves_per_second_per_core": round(options.solves / one_cpu, 2),
        "whole_run": {
            "processes": processes,
            "solves": solves,
            "wall_seconds": round(wall, 3),
            "cpu_seconds": round(sum(cpu for cpu, _ in done), 3),
            "solves_per_second": round(solves / wall, 2),
            "solves_per_second_per_process": round(solves / wall / processes, 2),
            "solves_per_cpu_second": round(solves / sum(cpu for cpu, _ in done), 2),
        },
    }


def format_altcha_report(report: dict[str, Any]) -> str:
    whole = report["whole_run"]
    rows = [
        f"Altcha proof of work ({report['algorithm']}, maxnumber {report['max_number']:,}; "
        f"{report['cores']} cores)",
        f"  hashes per second per core       {report['hashes_per_second_per_core']:>12,}",
        f"  a whole range (worst case)       {report['worst_case_seconds']:>12.3f} s",
        f"  mean hashes per solve            {report['mean_hashes_per_solve']:>12,}",
        f"  solves per second per core       {report['solves_per_second_per_core']:>12.2f}"
        f"  ({report['solves_per_core']} solves, CPU time)",
        f"  whole run: {whole['processes']} processes x "
        f"{whole['solves'] // whole['processes']} solves",
        f"    solves per second              {whole['solves_per_second']:>12.2f}"
        f"  ({whole['solves']} in {whole['wall_seconds']:.2f} s wall)",
        f"    solves per second per process  {whole['solves_per_second_per_process']:>12.2f}",
        f"    solves per CPU second          {whole['solves_per_cpu_second']:>12.2f}",
    ]
    return "\n".join(rows)
