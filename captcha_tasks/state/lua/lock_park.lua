-- Park a task waiting for a host's session lock, only while the lock is held: the
-- check and the park are one step, so a release cannot slip between them (a waiter
-- parked after the release's read would sleep until the sweeper).
-- KEYS: session_lock(host), session_parked(host)
-- ARGV: member (the re-send JSON, unique per park), deadline_ms (epoch), margin_ms
-- Returns {0} if the lock is free (not parked: take it now), else {1, sweep_ms}:
-- parked; sweep_ms > 0 asks the caller to schedule the host's sweeper in sweep_ms,
-- with due = ~sweep's new score as its identity; 0: a pending sweeper is due in time.
local pttl = redis.call('PTTL', KEYS[1])
if pttl == -2 then
  return {0}
end
if pttl < 0 then
  pttl = 0  -- a lock without a TTL: the sweeper looks again after the margin
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local deadline = tonumber(ARGV[2])
local margin = tonumber(ARGV[3])
redis.call('ZADD', KEYS[2], deadline, ARGV[1])
-- Wake when the lock expires (a crashed holder) or at this waiter's deadline.
local wanted = now + math.max(0, math.min(pttl, deadline - now)) + margin
local due = redis.call('ZSCORE', KEYS[2], '~sweep')
local sweep_ms = 0
-- None pending, or one overdue (its message was lost). One due later than this
-- waiter's deadline stays in charge (a second would make two sweepers): it comes at
-- the lock's expiry and then at the next deadline.
if not due or tonumber(due) < now - margin then
  sweep_ms = wanted - now
  redis.call('ZADD', KEYS[2], wanted, '~sweep')
end
local keep = math.max(deadline - now, pttl) + 2 * margin
if redis.call('PTTL', KEYS[2]) < keep then
  redis.call('PEXPIRE', KEYS[2], keep)
end
return {1, sweep_ms, wanted}
