-- Give a job's thread back and queue it again (no slot at the provider, a submit
-- error that proves it was not processed, an unsolvable captcha's one resubmit).
-- KEYS: job, due, budget, waiting, wake
-- ARGV: task_id, expected_state, expected_captcha_id ('' for any), not_before,
--       structure_ttl, counter_field ('' for none), reads (of the captcha, to count),
--       route ('' to keep it: else the providers it may take next, e.g. without the
--       one that just failed it), claim (the caller's token, see claim.lua; '' for no
--       check), sender ('' for no check)
-- A job being sent is the sender's to requeue (its submit surely failed) even if another
-- engine claimed it since to fail it; any other state needs the caller's claim.
local f = redis.call('HMGET', KEYS[1], 'state', 'captcha_id', 'claim', 'sender')
if f[1] ~= ARGV[2] then
  return 0
end
if ARGV[3] ~= '' and f[2] ~= ARGV[3] then
  return 0
end
if ARGV[9] and ARGV[9] ~= '' and f[3] ~= ARGV[9] then
  return 0
end
if ARGV[10] and ARGV[10] ~= '' and f[4] ~= ARGV[10] then
  return 0
end
redis.call('HSET', KEYS[1], 'state', 'waiting')
if tonumber(ARGV[7]) > 0 then
  redis.call('HINCRBY', KEYS[1], 'polls', ARGV[7])
end
if ARGV[8] and ARGV[8] ~= '' then
  redis.call('HSET', KEYS[1], 'route', ARGV[8])
end
if ARGV[6] ~= '' then
  redis.call('HINCRBY', KEYS[1], ARGV[6], 1)
end
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('ZREM', KEYS[3], ARGV[1])
redis.call('ZADD', KEYS[4], ARGV[4], ARGV[1])
redis.call('EXPIRE', KEYS[4], ARGV[5])
redis.call('LPUSH', KEYS[5], '1')
redis.call('LTRIM', KEYS[5], 0, 99)
return 1
