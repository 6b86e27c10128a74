"""Every Redis key captcha_tasks writes, named in one place.

============================  ======  =============================================
key                           type    what
============================  ======  =============================================
``{p}job:{task_id}``          hash    one solve request: its captcha, state, captcha
                                      id, timings. TTL: deadline + report window.
``{p}solve:waiting``          zset    task ids waiting for a thread, scored by the
                                      time they may be submitted (FIFO, back-off).
``{p}solve:due``              zset    task ids at the provider (or being submitted),
                                      scored by their next poll time; a claimed
                                      entry is pushed to its claim's expiry.
``{p}solve:budget``           zset    the thread budget: task ids holding a thread,
                                      scored by their lease's expiry.
``{p}solve:wake``             list    nudges for idle engines (new work, freed slot).
``{p}timing:{type}``          string  learned first-poll wait for a captcha type (s).
============================  ======  =============================================

The shared zsets and lists get their TTL refreshed on every write (``STRUCTURE_TTL``);
they are empty, hence gone, whenever the cluster is idle for that long.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["STRUCTURE_TTL", "Keys"]

#: Seconds a shared structure lives after its last write.
STRUCTURE_TTL = 86_400


@dataclass(frozen=True)
class Keys:
    prefix: str = "ct:"

    def job(self, task_id: str) -> str:
        return f"{self.prefix}job:{task_id}"

    @property
    def job_prefix(self) -> str:
        return f"{self.prefix}job:"

    @property
    def waiting(self) -> str:
        return f"{self.prefix}solve:waiting"

    @property
    def due(self) -> str:
        return f"{self.prefix}solve:due"

    @property
    def budget(self) -> str:
        return f"{self.prefix}solve:budget"

    @property
    def wake(self) -> str:
        return f"{self.prefix}solve:wake"

    def timing(self, captcha_type: str) -> str:
        return f"{self.prefix}timing:{captcha_type}"
