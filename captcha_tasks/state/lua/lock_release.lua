-- Release a host's session lock if ARGV[1] still owns it, and hand back the tasks
-- parked on it in the same step (they are removed only once re-sent: lock_forget).
-- KEYS: session_lock(host), session_parked(host)
-- ARGV: token
-- Returns {released (1/0), member...}. When another owner holds the lock now (ours
-- expired and moved on), nothing is handed back: that owner's release wakes them.
-- When the lock is free (ours expired), the parked are handed back all the same.
local current = redis.call('GET', KEYS[1])
local released = 0
if current == ARGV[1] then
  redis.call('DEL', KEYS[1])
  released = 1
elseif current then
  return {0}
end
local out = {released}
for _, member in ipairs(redis.call('ZRANGE', KEYS[2], 0, -1)) do
  if member ~= '~sweep' then
    out[#out + 1] = member
  end
end
return out
