-- The host's sweeper: hand back the parked tasks that must run now: all of them when
-- the lock is free (its holder crashed, or a release's re-sends were lost), those past
-- their deadline when it is held (they then fail with SessionLockTimeout).
-- KEYS: session_lock(host), session_parked(host)
-- ARGV: margin_ms, due_ms (this sweeper's identity: the ~sweep score it was sent for)
-- Returns {again_ms, due, member...}: again_ms > 0 asks for this sweeper again in
-- again_ms with identity due (tasks remain parked behind a held lock); 0: it stops
-- (none remain, or a newer sweeper is in charge).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local margin = tonumber(ARGV[1])
local pttl = redis.call('PTTL', KEYS[1])
local members
if pttl == -2 then
  members = redis.call('ZRANGE', KEYS[2], 0, -1)
else
  members = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now)
end
local out = {0, 0}
local handed = 0
for _, member in ipairs(members) do
  if member ~= '~sweep' then
    out[#out + 1] = member
    handed = handed + 1
  end
end
local due = redis.call('ZSCORE', KEYS[2], '~sweep')
if due and tonumber(due) ~= tonumber(ARGV[2]) then
  return out  -- a newer sweeper is in charge
end
local left = redis.call('ZCARD', KEYS[2]) - (due and 1 or 0) - handed
if left <= 0 then
  redis.call('ZREM', KEYS[2], '~sweep')
  return out
end
-- The earliest deadline still ahead, so a waiter times out on time.
local next_deadline = nil
local ahead = redis.call('ZRANGEBYSCORE', KEYS[2], '(' .. now, '+inf', 'WITHSCORES', 'LIMIT', 0, 2)
for i = 1, #ahead, 2 do
  if ahead[i] ~= '~sweep' and not next_deadline then
    next_deadline = tonumber(ahead[i + 1])
  end
end
if pttl < 0 then
  pttl = 0
end
local wait = pttl
if next_deadline then
  wait = math.min(wait, math.max(0, next_deadline - now))
end
out[1] = wait + margin
out[2] = now + out[1]
redis.call('ZADD', KEYS[2], out[2], '~sweep')
return out
