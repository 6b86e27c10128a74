"""Pools of pre-solved tokens: each token handed out exactly once, with its own expiry.

A pool is identified by (captcha type, sitekey, scope): the page URL for
reCAPTCHA v2, Turnstile and hCaptcha, the action for reCAPTCHA v3. Tokens sit in
a sorted set scored by their own expiry (never one TTL on a whole list); taking
one is a Lua script that removes it, so two consumers can never get the same
token. A token is *either* pooled *or* returned to a caller: fill jobs store
their token in the pool and nowhere else.

Sizing: a fixed ``target``, or ``adaptive``: enough tokens to cover the recent
demand while a refill is being solved, and never more than can be used before
they expire (``rate x (lifetime - min_life)``), so few expire unused.
"""

from __future__ import annotations

import hashlib
import json
import math
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import redis

from ..errors import InvalidTaskInput
from ..provider import Captcha, HCaptcha, RecaptchaV2, RecaptchaV3, Turnstile
from ..settings import Settings
from ..state.clock import clock_of
from ..state.keys import STRUCTURE_TTL, Keys
from ..state.scripts import run
from .admission import admit
from .jobs import captcha_from_json, captcha_to_json
from .timing import DEADLINE, TOKEN_TTL, FirstPollLearner

__all__ = ["PoolFill", "TokenPool", "pool_id_for"]

#: Demand is measured over this window (production seconds, scaled).
DEMAND_WINDOW = 600.0
#: Fill solves admitted at once at most (a runaway target must not flood the budget).
MAX_FILL_BATCH = 100


def pool_scope(captcha: Captcha) -> str | None:
    """What a token is bound to besides its sitekey; None if it cannot be pooled."""
    if isinstance(captcha, RecaptchaV3):
        return f"action={captcha.action};min_score={captcha.min_score}"
    if isinstance(captcha, RecaptchaV2):
        # data-s and cookies belong to one page load: such tokens cannot be shared.
        if captcha.data_s or captcha.cookies:
            return None
        return captcha.pageurl
    if isinstance(captcha, Turnstile):
        return None if captcha.cdata else captcha.pageurl
    if isinstance(captcha, HCaptcha):
        return captcha.pageurl
    return None


def pool_id_for(captcha: Captcha) -> str | None:
    scope = pool_scope(captcha)
    if scope is None:
        return None
    sitekey = getattr(captcha, "sitekey", "")
    raw = f"{captcha.type}\n{sitekey}\n{scope}".encode()
    return hashlib.sha256(raw).hexdigest()[:20]


@dataclass(frozen=True)
class PoolFill:
    pool_id: str
    target: int
    size: int
    filling: int
    admitted: int

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


class TokenPool:
    def __init__(
        self, client: redis.Redis, settings: Settings, *, clock: Callable[[], float] | None = None
    ) -> None:
        self.redis = client
        # Redis's clock: token expiries and demand are compared by every worker.
        self.clock = clock or clock_of(client)
        self.settings = settings
        self.keys = Keys(settings.key_prefix)

    def min_life(self) -> float:
        """Seconds a token must have left to be handed out (scaled)."""
        return self.settings.scaled(self.settings.pool_min_life)

    # -- consumers --------------------------------------------------------------------

    def take(self, captcha: Captcha, *, min_life: float | None = None) -> dict[str, Any] | None:
        """A pooled token for ``captcha`` with at least ``min_life`` seconds left (default
        ``CAPTCHA_TASKS_POOL_MIN_LIFE``), as a solve result with ``source="pool"``; or None.

        Every call counts as demand; a registered pool is topped up after it."""
        pool_id = pool_id_for(captcha)
        if pool_id is None:
            return None
        now = self.clock()
        life = self.min_life() if min_life is None else min_life
        window = self.settings.scaled(DEMAND_WINDOW)
        got = run(
            self.redis,
            "pool_take",
            [self.keys.pool(pool_id), self.keys.pool_takes(pool_id), self.keys.pools],
            [now, life, f"{now:.6f}:{uuid.uuid4().hex[:8]}", window, int(window) + 60, pool_id],
        )
        meta = self.redis.hget(self.keys.pools, pool_id)
        if meta:
            self.fill_registered(pool_id, json.loads(meta))
        if not got:
            return None
        member, expires_at = got[0], float(got[1])
        captcha_id, _, token = member.partition("|")
        # The pool keeps no provider per token: named only when there is one to name.
        configs = self.settings.providers()
        only = configs[0] if len(configs) == 1 else None
        return {
            "solution": token,
            "source": "pool",
            "type": captcha.type,
            "captcha_id": captcha_id,
            "solve_seconds": 0.0,
            "queued_seconds": 0.0,
            "expires_at": round(expires_at, 3),
            "submits": 0,
            "polls": 0,
            "provider": only.name if only else None,
            "protocol": only.protocol if only else None,
            "cost": None,  # paid by the fill that solved it
        }

    # -- producers (the engine) -------------------------------------------------------

    def put(
        self, pool_id: str, *, captcha_id: str, token: str, expires_at: float, task_id: str
    ) -> None:
        run(
            self.redis,
            "pool_put",
            [self.keys.pool(pool_id), self.keys.pool_filling(pool_id)],
            [f"{captcha_id}|{token}", expires_at, task_id],
        )

    def fill_ended(self, pool_id: str, task_id: str) -> None:
        self.redis.zrem(self.keys.pool_filling(pool_id), task_id)

    # -- keeping pools filled -----------------------------------------------------------

    def fill(
        self, captcha: Captcha, *, target: int | None = None, adaptive: bool = False
    ) -> PoolFill:
        """Register the pool of ``captcha`` (target size or adaptive) and admit the fill
        solves it lacks now. Later takes top it up again by themselves."""
        captcha.validate(max_image_bytes=self.settings.max_image_bytes)
        pool_id = pool_id_for(captcha)
        if pool_id is None:
            raise InvalidTaskInput(
                f"{captcha.type} tokens with these options cannot be pooled "
                "(images, GeeTest and page-bound data-s/cookies/cdata are single-page)"
            )
        if not adaptive and (target is None or target < 0 or target > 10_000):
            raise InvalidTaskInput("fill_token_pool: give target (0-10000) or adaptive=True")
        meta = {
            "type": captcha.type,
            "sitekey": getattr(captcha, "sitekey", ""),
            "scope": pool_scope(captcha),
            "target": target,
            "adaptive": adaptive,
            "captcha": captcha_to_json(captcha),
        }
        pipe = self.redis.pipeline(transaction=True)
        pipe.hset(self.keys.pools, pool_id, json.dumps(meta))
        pipe.expire(self.keys.pools, STRUCTURE_TTL)
        pipe.execute()
        return self.fill_registered(pool_id, meta)

    def fill_registered(self, pool_id: str, meta: dict[str, Any]) -> PoolFill:
        now = self.clock()
        target = (
            self.adaptive_target(pool_id, meta["type"]) if meta.get("adaptive") else meta["target"]
        )
        captcha = captcha_from_json(meta["captcha"])
        deadline = now + self.settings.queue_timeout + self.settings.scaled(DEADLINE[captcha.type])
        candidates = [f"fill-{uuid.uuid4()}" for _ in range(min(int(target), MAX_FILL_BATCH))]
        got = run(
            self.redis,
            "pool_reserve",
            [self.keys.pool(pool_id), self.keys.pool_filling(pool_id)],
            [
                now,
                self.min_life(),
                int(target),
                MAX_FILL_BATCH,
                deadline,
                STRUCTURE_TTL,
                *candidates,
            ],
        )
        size, filling, reserved = int(got[0]), int(got[1]), list(got[2:])
        for task_id in reserved:
            admit(self.redis, self.settings, task_id, captcha, now=now, pool=pool_id)
        return PoolFill(pool_id, int(target), size, filling, len(reserved))

    def demand_per_second(self, pool_id: str) -> float:
        now = self.clock()
        window = self.settings.scaled(DEMAND_WINDOW)
        count = self.redis.zcount(self.keys.pool_takes(pool_id), now - window, "+inf")
        return float(count) / window

    def adaptive_target(self, pool_id: str, captcha_type: str) -> int:
        """Cover the demand during one refill; never more than can be used in time."""
        rate = self.demand_per_second(pool_id)
        if rate <= 0:
            return 0
        lifetime = self.settings.scaled(TOKEN_TTL.get(captcha_type, 120.0))
        usable = lifetime - self.min_life()
        refill = FirstPollLearner(self.settings, self.redis).first_poll(captcha_type) * 1.5
        ceiling = math.floor(rate * usable)
        return max(0, min(math.ceil(rate * refill * 1.25), ceiling))

    def status(self) -> list[dict[str, Any]]:
        now = self.clock()
        out = []
        pools: dict[str, str] = self.redis.hgetall(self.keys.pools)  # type: ignore[assignment]
        for pool_id, raw in sorted(pools.items()):
            meta = json.loads(raw)
            soonest = self.redis.zrangebyscore(
                self.keys.pool(pool_id), now, "+inf", start=0, num=1, withscores=True
            )
            out.append(
                {
                    "pool_id": pool_id,
                    "type": meta["type"],
                    "sitekey": meta["sitekey"],
                    "scope": meta["scope"],
                    "target": meta["target"],
                    "adaptive": meta["adaptive"],
                    "size": self.redis.zcount(self.keys.pool(pool_id), now, "+inf"),
                    "filling": self.redis.zcount(self.keys.pool_filling(pool_id), now, "+inf"),
                    "soonest_expiry_s": round(float(soonest[0][1]) - now, 1) if soonest else None,
                    "demand_per_min": round(self.demand_per_second(pool_id) * 60, 2),
                }
            )
        return out
