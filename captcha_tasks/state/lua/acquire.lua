-- Take free threads of the budget for waiting jobs, oldest first.
-- KEYS: budget, waiting, due, provider_limit
-- ARGV: now, limit, max_n, claim_until, job_prefix, structure_ttl
-- The budget in force is the lower of `limit` (the configured threads) and the
-- provider's limit learned from its "no free slot" answers, while that is known.
-- Expired leases (their holder died and nobody finished the job) are dropped first.
-- Each taken job holds a thread (lease = now + its lease_s) and is claimed in `due`
-- until claim_until while it is being submitted. Its state is 'submitting' (not sent
-- yet: sending.lua marks the moment its in.php call starts). Returns the taken task ids.
local now = tonumber(ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local limit = tonumber(ARGV[2])
local learned = tonumber(redis.call('GET', KEYS[4]))
if learned and learned < limit then
  limit = learned
end
local free = limit - redis.call('ZCARD', KEYS[1])
if free <= 0 then
  return {}
end
local ids = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now, 'LIMIT', 0,
                       math.min(free, tonumber(ARGV[3])))
local taken = {}
for _, id in ipairs(ids) do
  redis.call('ZREM', KEYS[2], id)
  local job = ARGV[5] .. id
  local lease = tonumber(redis.call('HGET', job, 'lease_s'))
  if lease then
    redis.call('ZADD', KEYS[1], now + lease, id)
    redis.call('ZADD', KEYS[3], ARGV[4], id)
    redis.call('HSET', job, 'state', 'submitting')
    table.insert(taken, id)
  end
end
for i = 1, 3 do
  redis.call('EXPIRE', KEYS[i], ARGV[6])
end
return taken
