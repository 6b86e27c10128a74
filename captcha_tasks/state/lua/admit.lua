-- Admit a solve request once: create its job and queue it for a thread.
-- KEYS: job, waiting, wake[, pool, pools (the registry)]
-- ARGV: task_id, now, job_ttl, structure_ttl, pool_id ('' for no pool), field1, value1, ...
-- Returns 1 if admitted, 0 if this task id was admitted before (redelivery), 2 (nothing
-- done) if a token pool for it has tokens or is registered: the caller takes from the
-- pool first (pool_take.lua counts the demand), then admits without a pool id. One
-- round trip for a request no pool serves.
if redis.call('EXISTS', KEYS[1]) == 1 then
  return 0
end
if ARGV[5] ~= '' and (redis.call('EXISTS', KEYS[4]) == 1
                      or redis.call('HEXISTS', KEYS[5], ARGV[5]) == 1) then
  return 2
end
redis.call('HSET', KEYS[1], 'state', 'waiting', unpack(ARGV, 6))
redis.call('EXPIRE', KEYS[1], ARGV[3])
redis.call('ZADD', KEYS[2], ARGV[2], ARGV[1])
redis.call('EXPIRE', KEYS[2], ARGV[4])
redis.call('LPUSH', KEYS[3], '1')
redis.call('LTRIM', KEYS[3], 0, 99)
redis.call('EXPIRE', KEYS[3], ARGV[4])
return 1
