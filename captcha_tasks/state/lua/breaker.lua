-- A provider's circuit breaker: closed -> open (cool-down) -> half_open (one probe,
-- taken by acquire.lua) -> closed on the probe's success, open again (a longer
-- cool-down) on its failure.
-- KEYS: breaker
-- ARGV: op, now, threshold, base_cooldown, max_cooldown, reason, ttl
--   op 'ok':   the provider took a call (an accepted submit): failures in a row end;
--              a half-open breaker closes.
--   op 'fail': a transient failure (5xx, connection, timeout; ARGV reason: its code);
--              the threshold-th in a row opens it, and any during half-open reopens it.
--   op 'trip': opens it at once (zero balance, a refused key).
--   op 'slow': an answer far slower than the provider's learned time; the threshold-th
--              in a row (no 'fast' between) opens a closed breaker.
--   op 'fast': an answer in normal time: the run of slow ones ends.
-- Returns {state, cooldown (seconds, when this call opened it, else 0), changed (0/1)[,
-- the reason stored, when it opened]}.
local op = ARGV[1]
local now = tonumber(ARGV[2])
local b = redis.call('HMGET', KEYS[1], 'state', 'failures', 'cooldown')
local state = b[1] or 'closed'
if op == 'ok' then
  if state == 'half_open' then
    redis.call('HSET', KEYS[1], 'state', 'closed', 'failures', 0)
    redis.call('HDEL', KEYS[1], 'until', 'probe', 'probe_until', 'reason', 'cooldown',
               'opened_at')
    redis.call('EXPIRE', KEYS[1], ARGV[7])
    return {'closed', 0, 1}
  end
  if state == 'closed' and (tonumber(b[2]) or 0) > 0 then
    redis.call('HSET', KEYS[1], 'failures', 0)
  end
  -- open: a call sent before it opened came back fine; the cool-down still holds.
  return {state, 0, 0}
end
if op == 'fast' then
  if (tonumber(redis.call('HGET', KEYS[1], 'slow')) or 0) > 0 then
    redis.call('HSET', KEYS[1], 'slow', 0)
  end
  return {state, 0, 0}
end
local failures
if op == 'slow' then
  failures = redis.call('HINCRBY', KEYS[1], 'slow', 1)
  if state == 'half_open' then
    state = 'closed' -- a probe's slow answer counts like any other, not as a failed probe
  end
elseif op == 'fail' then
  failures = redis.call('HINCRBY', KEYS[1], 'failures', 1)
else
  failures = 0 -- a trip is not a transient failure: it counts none
end
local reason = ARGV[6]
if op == 'fail' then
  reason = failures .. ' transient failures in a row, the last ' .. reason
end
redis.call('EXPIRE', KEYS[1], ARGV[7])
if state == 'open' then
  return {state, 0, 0}
end
if op == 'trip' or state == 'half_open' or failures >= tonumber(ARGV[3]) then
  local base = tonumber(ARGV[4])
  local cooldown = base
  if state == 'half_open' then
    cooldown = math.min(math.max((tonumber(b[3]) or base) * 2, base), tonumber(ARGV[5]))
  end
  redis.call('HSET', KEYS[1], 'state', 'open', 'until', now + cooldown, 'cooldown', cooldown,
             'reason', reason, 'opened_at', now, 'slow', 0)
  redis.call('HDEL', KEYS[1], 'probe', 'probe_until')
  return {'open', tostring(cooldown), 1, reason}
end
return {state, 0, 0}
