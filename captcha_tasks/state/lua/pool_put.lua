-- Add a solved token to its pool (scored by its expiry) and end its fill.
-- The pool key lives until its last token expires.
-- KEYS: pool, filling
-- ARGV: member, expires_at, task_id
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1])
local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
redis.call('EXPIREAT', KEYS[1], math.ceil(tonumber(last[2])) + 1)
redis.call('ZREM', KEYS[2], ARGV[3])
return 1
