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
                                      entry is pushed to its claim's expiry, one its
                                      reader holds to a lease ahead.
``{p}solve:budget``           zset    the thread budget: task ids holding a thread,
                                      scored by their lease's expiry.
``{p}solve:wake``             list    nudges for idle engines (new work, freed slot).
``{p}solve:provider_limit``   string  captchas the provider took at once when it last
                                      answered "no free slot": the budget in force
                                      is the lower of this and the configured
                                      threads. TTL: ``PROVIDER_LIMIT_TTL`` (scaled),
                                      then the full budget is tried again.
``{p}solve:budget:{name}``     zset    a named provider's thread budget, as
                                      ``solve:budget``; the provider ``default`` uses
                                      ``solve:budget`` itself (:meth:`Keys.provider_budget`).
``{p}solve:provider_limit:{name}`` string  a named provider's learned limit, as above
                                      (``default``: ``solve:provider_limit``).
``{p}solve:due:{name}``        zset    a named provider's poll schedule, as
                                      ``solve:due`` (``default``: ``solve:due`` itself).
``{p}solve:reader:{name}``     string  the engine that reads a provider's captchas
                                      (its name and a random part): its lease.
                                      TTL: the lease (``READER_LEASE``, scaled),
                                      renewed by its holder every third of it.
``{p}provider:{name}:breaker`` hash   a provider's circuit breaker: state,
                                      open until, failures in a row, the probe's
                                      holder. TTL: ``BREAKER_TTL``, renewed by writes.
``{p}timing:{type}``          list    recent ready times of a captcha type (learning);
                                      a named provider's: ``timing:{name}:{type}``.
``{p}cookies:{host}``         hash    the shared cookie jar of a host: one field per
                                      cookie (name, domain, path), JSON with its
                                      attributes and when it was set. TTL: the
                                      latest cookie expiry (capped).
``{p}cookies:{host}:visitor:{v}`` hash  a visitor's own cookies of a host: those bound
                                      to the IP and user agent that earned them
                                      (DataDome's), never in the shared jar; ``v``
                                      is the pinned proxy id and a hash of the user
                                      agent (no credentials). Layout and TTL: as
                                      ``cookies:{host}``.
``{p}cookies:{host}:page:{id}`` hash  an isolated page's own cookies (``fetch_page``
                                      task ``id``), carried from its load to its
                                      post across workers, never shared; deleted
                                      when the page ends. Layout: as
                                      ``cookies:{host}``; TTL: as it, capped at
                                      ``PAGE_JAR_TTL``.
``{p}lock:session:{host}``    string  the session lock of a host (owner token). TTL:
                                      the lock timeout, so a crashed holder frees it.
``{p}lock:parked:{host}``     zset    tasks parked waiting for that lock: each member
                                      the JSON to re-send the task (same task id),
                                      scored by its wait deadline (epoch ms); member
                                      ``~sweep`` is the due time of the host's one
                                      scheduled sweeper. TTL: the latest deadline
                                      (or the lock's TTL) plus a margin.
``{p}proxies``                hash    the proxy pool: proxy id -> JSON (URL with
                                      credentials). Never shown unmasked. TTL:
                                      ``PROXY_POOL_TTL`` (30 days), refreshed by every
                                      write and every lease heartbeat.
``{p}proxy:lease:{id}``       string  which worker holds the proxy. TTL: the lease,
                                      renewed by the holder's heartbeat.
``{p}proxy:worker:{worker}``  string  the proxy id a worker holds (same TTL).
``{p}proxy:quarantine:{id}``  string  why a proxy was reported bad. TTL: cooldown.
``{p}pool:{pool_id}``         zset    pre-solved tokens, scored by their expiry.
``{p}pool:{pool_id}:takes``   zset    when tokens were taken (consumption rate).
``{p}pool:{pool_id}:filling`` zset    fill solves in flight, scored by deadline.
``{p}pools``                  hash    pool id -> JSON (type, sitekey, scope, target).
``{p}heartbeat:{worker}``     string  a worker's liveness beat: JSON (version, pid,
                                      time), written by its consumer loop. TTL: a few
                                      beat intervals, so a dead worker's goes away.
``{p}bridge:{group}:pending``  hash    NATS bridge: Celery task id -> the job whose
                                      result is still to be published. TTL: renewed
                                      on each write (bridge/pending.py).
``{p}bridge:{group}:published:{id}`` string  a result one bridge published (so a
                                      redelivered job is not enqueued again). TTL: same.
``{p}key_refused:{engine}``   string  the provider refused this engine's key (its
                                      code). TTL: two pauses, renewed while refused.
                                      A named provider's engines:
                                      ``key_refused:{name}:{engine}``.
``{p}spend:{provider}:{minute}`` hash  what a provider (by name: ``default``) solved in
                                      one minute (epoch seconds // 60): ``cost:{type}``
                                      in nano-USD (integers add up exactly) and
                                      ``solves:{type}``. TTL: ``SPEND_TTL`` (2 h).
``{p}acceptance:{minute}``    hash    the site's verdicts on tokens in one minute (epoch
                                      seconds // 60): ``{provider}|{type}|{host}|a``
                                      (accepted), ``...|r`` (rejected) and ``...|c``
                                      (their solves' cost, nano-USD); ``{host}`` empty
                                      for the per-type figures, else one of
                                      ``CAPTCHA_TASKS_ACCEPTANCE_HOSTS``. TTL: the
                                      acceptance window plus ``ACCEPTANCE_MARGIN``.
``{p}acceptance:totals``      hash    every verdict since the key was made (what the
                                      Prometheus counters show):
                                      ``{provider}|{type}|{host}|a`` / ``|r``, ``{host}``
                                      a listed host or ``other``. TTL:
                                      ``ACCEPTANCE_TOTALS_TTL``, renewed by writes.
``{p}feedback:{task_id}``     hash    a solve's verdict, counted once: ``verdict``
                                      (``a``/``r``) and ``reported`` (its provider was
                                      told, once). TTL: ``FEEDBACK_TTL``.
``{p}balance:{provider}``     hash    the provider's last balance check: ``usd``,
                                      ``checked_at``, ``stale`` (the last check
                                      failed), ``low`` (below the floor). TTL: 1 h.
``{p}balance:{provider}:check`` string  taken (SET NX) by the one engine whose
                                      balance check is due. TTL: the check interval.
``{p}dev:checkout``            string  ``captcha-tasks-dev dev`` on a Redis it did not start:
                                      the checkout (host and run directory) whose
                                      stack this database is. TTL: ``DEV_CLAIM_TTL``,
                                      renewed at every start.
``{p}mcp:{agent}:in_flight``  zset    an MCP agent's solves in flight (by its
                                      configured name, never its token): call ids
                                      scored by their lease's expiry (epoch ms), so a
                                      server that died frees its slots. TTL: the
                                      longest lease, renewed by each call.
``{p}mcp:{agent}:spend``      zset    what an MCP agent's solves cost in the last
                                      hour: members ``{call id}:{nano-USD}``, scored
                                      by when each ended (epoch ms). TTL:
                                      ``MCP_SPEND_TTL``, renewed by each write.
============================  ======  =============================================

The shared zsets and lists get their TTL refreshed on every write (``STRUCTURE_TTL``);
they are empty, hence gone, whenever the cluster is idle for that long.
"""

from __future__ import annotations

from dataclasses import dataclass

# The provider whose per-provider keys carry no name (``solve:budget``, ``solve:due``,
# ``solve:provider_limit``, ``timing:{type}``, ``key_refused:{engine}``): the one the
# single-provider variables configure. So a cluster with one provider keeps one budget,
# one poll schedule and its learned timings across a rolling deploy, whatever version
# each of its workers runs.
from ..settings.providers import DEFAULT_PROVIDER as _DEFAULT_PROVIDER

__all__ = [
    "ACCEPTANCE_MARGIN",
    "ACCEPTANCE_TOTALS_TTL",
    "BREAKER_TTL",
    "DEV_CLAIM_TTL",
    "FEEDBACK_TTL",
    "MCP_SPEND_TTL",
    "PROXY_POOL_TTL",
    "SPEND_TTL",
    "STRUCTURE_TTL",
    "Keys",
]

#: Seconds a shared structure lives after its last write.
STRUCTURE_TTL = 86_400
#: Seconds the proxy pool hash lives after its last write or lease heartbeat: long,
#: so a cluster stopped for a holiday keeps its pool, yet an abandoned one goes.
PROXY_POOL_TTL = 30 * 86_400
#: Seconds a spend bucket (one minute) lives: the last hour's sum needs 60 of them,
#: the margin covers clocks a little apart.
SPEND_TTL = 7_200
#: Seconds an acceptance bucket outlives the window it is read in (clocks a little apart).
ACCEPTANCE_MARGIN = 120
#: Seconds the running acceptance totals live after their last write.
ACCEPTANCE_TOTALS_TTL = 30 * 86_400
#: Seconds a solve's verdict mark lives: longer than any job is kept for feedback
#: (``CAPTCHA_TASKS_REPORT_WINDOW`` past its deadline), so no token is counted twice.
FEEDBACK_TTL = 2 * 86_400
#: Seconds an MCP agent's spend record lives after its last write: the hour its cap
#: counts, and a margin for clocks a little apart.
MCP_SPEND_TTL = 3_660
#: Seconds a provider's breaker lives after its last write: longer than any cool-down,
#: short enough that a provider removed from the configuration leaves nothing behind.
BREAKER_TTL = 86_400
#: Seconds a ``captcha-tasks-dev dev`` checkout keeps its database of a shared Redis after its
#: last start: the next ``make run`` of that checkout finds its own database again.
DEV_CLAIM_TTL = 30 * 86_400


@dataclass(frozen=True)
class Keys:
    prefix: str = "ct:"

    def job(self, task_id: str) -> str:
        return f"{self.job_prefix}{task_id}"

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

    @property
    def provider_limit(self) -> str:
        return f"{self.prefix}solve:provider_limit"

    # -- per provider: its configured name, never its key ---------------------------------

    def provider_budget(self, name: str) -> str:
        """A provider's thread budget; ``default``'s is :attr:`budget` itself."""
        return self.budget if name == _DEFAULT_PROVIDER else f"{self.budget}:{name}"

    def provider_limit_of(self, name: str) -> str:
        """A provider's learned limit; ``default``'s is :attr:`provider_limit` itself."""
        if name == _DEFAULT_PROVIDER:
            return self.provider_limit
        return f"{self.provider_limit}:{name}"

    def due_of(self, name: str) -> str:
        """A provider's poll schedule; ``default``'s is :attr:`due` itself."""
        return self.due if name == _DEFAULT_PROVIDER else f"{self.due}:{name}"

    def reader_of(self, name: str) -> str:
        """Which engine reads a provider's captchas now (its lease: ``reader_hold.lua``)."""
        return f"{self.prefix}solve:reader:{name}"

    def breaker(self, name: str) -> str:
        return f"{self.prefix}provider:{name}:breaker"

    def timing(self, captcha_type: str, provider: str = _DEFAULT_PROVIDER) -> str:
        """Recent ready times of a type at a provider (``default``'s: ``timing:{type}``)."""
        if provider == _DEFAULT_PROVIDER:
            return f"{self.prefix}timing:{captcha_type}"
        return f"{self.prefix}timing:{provider}:{captcha_type}"

    def key_refused_prefix_of(self, provider: str) -> str:
        """``key_refused`` marks of one provider's engines (``default``'s: unnamed)."""
        if provider == _DEFAULT_PROVIDER:
            return self.key_refused_prefix
        return f"{self.key_refused_prefix}{provider}:"

    # -- shared session state (hosts are lower-case, without port) -------------------

    def cookies(self, host: str) -> str:
        return f"{self.prefix}cookies:{host}"

    def visitor_cookies(self, host: str, visitor: str) -> str:
        return f"{self.prefix}cookies:{host}:visitor:{visitor}"

    def page_cookies(self, host: str, page_id: str) -> str:
        return f"{self.prefix}cookies:{host}:page:{page_id}"

    def session_lock(self, host: str) -> str:
        return f"{self.prefix}lock:session:{host}"

    def session_parked(self, host: str) -> str:
        return f"{self.prefix}lock:parked:{host}"

    @property
    def proxies(self) -> str:
        return f"{self.prefix}proxies"

    def proxy_lease(self, proxy_id: str) -> str:
        return f"{self.proxy_lease_prefix}{proxy_id}"

    def worker_proxy(self, worker: str) -> str:
        return f"{self.worker_proxy_prefix}{worker}"

    def proxy_quarantine(self, proxy_id: str) -> str:
        return f"{self.proxy_quarantine_prefix}{proxy_id}"

    @property
    def proxy_lease_prefix(self) -> str:
        """``proxy_lease(id)`` is this plus the id (for Lua scripts that scan the pool)."""
        return f"{self.prefix}proxy:lease:"

    @property
    def worker_proxy_prefix(self) -> str:
        """``worker_proxy(worker)`` is this plus the worker name (for Lua scripts)."""
        return f"{self.prefix}proxy:worker:"

    @property
    def proxy_quarantine_prefix(self) -> str:
        """``proxy_quarantine(id)`` is this plus the id (for Lua scripts)."""
        return f"{self.prefix}proxy:quarantine:"

    def pool(self, pool_id: str) -> str:
        return f"{self.prefix}pool:{pool_id}"

    def pool_takes(self, pool_id: str) -> str:
        return f"{self.prefix}pool:{pool_id}:takes"

    def pool_filling(self, pool_id: str) -> str:
        return f"{self.prefix}pool:{pool_id}:filling"

    @property
    def pools(self) -> str:
        return f"{self.prefix}pools"

    # -- fleet operations ------------------------------------------------------------

    def heartbeat(self, worker: str) -> str:
        return f"{self.heartbeat_prefix}{worker}"

    @property
    def heartbeat_prefix(self) -> str:
        """``heartbeat(worker)`` is this plus the worker name (to list the fleet's beats)."""
        return f"{self.prefix}heartbeat:"

    # -- the NATS bridge ---------------------------------------------------------------

    def bridge_pending(self, group: str) -> str:
        return f"{self.prefix}bridge:{group}:pending"

    def bridge_published_prefix(self, group: str) -> str:
        """Plus a Celery task id: marks a job whose result one bridge has published."""
        return f"{self.prefix}bridge:{group}:published:"

    def key_refused(self, engine: str) -> str:
        return f"{self.key_refused_prefix}{engine}"

    @property
    def key_refused_prefix(self) -> str:
        """``key_refused(engine)`` is this plus the engine's name."""
        return f"{self.prefix}key_refused:"

    # -- spend and balance, per provider (its configured name, never its key) -------------

    def spend(self, provider: str, minute: int) -> str:
        return f"{self.prefix}spend:{provider}:{minute}"

    # -- acceptance: the sites' verdicts on tokens ---------------------------------------

    def acceptance(self, minute: int) -> str:
        return f"{self.prefix}acceptance:{minute}"

    @property
    def acceptance_totals(self) -> str:
        return f"{self.prefix}acceptance:totals"

    def feedback(self, task_id: str) -> str:
        return f"{self.prefix}feedback:{task_id}"

    def balance(self, provider: str) -> str:
        return f"{self.prefix}balance:{provider}"

    def balance_check(self, provider: str) -> str:
        return f"{self.prefix}balance:{provider}:check"

    # -- the MCP server's budget per agent (its configured name, never its token) ----------

    def mcp_in_flight(self, agent: str) -> str:
        return f"{self.prefix}mcp:{agent}:in_flight"

    def mcp_spend(self, agent: str) -> str:
        return f"{self.prefix}mcp:{agent}:spend"

    # -- captcha-tasks-dev dev on a Redis it did not start ---------------------------------

    @property
    def dev_checkout(self) -> str:
        return f"{self.prefix}dev:checkout"
