-- End a job (solved or failed): free its thread and its poll entry, exactly once.
-- KEYS: job, due, budget, wake
-- ARGV: task_id, expected_captcha_id ('' for any), final_state, field1, value1, ...
-- Returns 1 for the caller that ended it, 0 if it had already ended.
local state = redis.call('HGET', KEYS[1], 'state')
if state ~= 'polling' and state ~= 'sending' and state ~= 'submitting'
   and state ~= 'waiting' then
  return 0
end
if ARGV[2] ~= '' and redis.call('HGET', KEYS[1], 'captcha_id') ~= ARGV[2] then
  return 0
end
redis.call('HSET', KEYS[1], 'state', ARGV[3])
for i = 4, #ARGV, 2 do
  redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1])
end
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('ZREM', KEYS[3], ARGV[1])
redis.call('LPUSH', KEYS[4], '1')
redis.call('LTRIM', KEYS[4], 0, 99)
return 1
