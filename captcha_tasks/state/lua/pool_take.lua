-- Hand out one pooled token, exactly once: the one that expires soonest among
-- those with at least min_life seconds left. Expired tokens are dropped.
-- Every call counts as demand (taken or not), for adaptive pool sizing.
-- KEYS: pool, takes, pools (the registry)
-- ARGV: now, min_life, demand_member, demand_window, ttl, pool_id
-- Returns {member, expires_at} or nil. Unregistered, empty pools cost nothing.
local now = tonumber(ARGV[1])
if redis.call('EXISTS', KEYS[1]) == 0 and redis.call('HEXISTS', KEYS[3], ARGV[6]) == 0 then
  return nil
end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
redis.call('ZADD', KEYS[2], now, ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now - tonumber(ARGV[4]))
redis.call('EXPIRE', KEYS[2], ARGV[5])
local got = redis.call('ZRANGEBYSCORE', KEYS[1], now + tonumber(ARGV[2]), '+inf',
                       'WITHSCORES', 'LIMIT', 0, 1)
if #got == 0 then
  return nil
end
redis.call('ZREM', KEYS[1], got[1])
return got
