-- Admit a solve request once: create its job and queue it for a thread.
-- KEYS: job, waiting, wake, then the n providers' budgets[, pool, pools (the registry)]
-- ARGV: task_id, now, job_ttl, structure_ttl, pool_id ('' for no pool), n, then the n
--       providers' threads, then field1, value1, ...
-- Returns 1 if admitted, 0 if this task id was admitted before (redelivery), 2 (nothing
-- done) if a token pool for it has tokens or is registered: the caller takes from the
-- pool first (pool_take.lua counts the demand), then admits without a pool id. One
-- round trip for a request no pool serves.
-- An idle engine is woken only if some provider's budget has a free thread: with every
-- thread held, the engine whose thread frees takes the oldest waiting job itself, and
-- finish.lua wakes the others (a wake-up per admission at a full budget would cost each
-- idle engine a look at Redis that could take nothing).
local n = tonumber(ARGV[6])
if redis.call('EXISTS', KEYS[1]) == 1 then
  return 0
end
if ARGV[5] ~= '' and (redis.call('EXISTS', KEYS[4 + n]) == 1
                      or redis.call('HEXISTS', KEYS[5 + n], ARGV[5]) == 1) then
  return 2
end
redis.call('HSET', KEYS[1], 'state', 'waiting', unpack(ARGV, 7 + n))
redis.call('EXPIRE', KEYS[1], ARGV[3])
redis.call('ZADD', KEYS[2], ARGV[2], ARGV[1])
redis.call('EXPIRE', KEYS[2], ARGV[4])
for i = 1, n do
  if redis.call('ZCOUNT', KEYS[3 + i], ARGV[2], '+inf') < tonumber(ARGV[6 + i]) then
    redis.call('LPUSH', KEYS[3], '1')
    redis.call('LTRIM', KEYS[3], 0, 99)
    redis.call('EXPIRE', KEYS[3], ARGV[4])
    break
  end
end
return 1
