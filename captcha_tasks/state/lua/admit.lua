-- Admit a solve request once: create its job and queue it for a thread.
-- KEYS: job, waiting, wake
-- ARGV: task_id, now, job_ttl, structure_ttl, field1, value1, ...
-- Returns 1 if admitted, 0 if this task id was admitted before (redelivery).
if redis.call('EXISTS', KEYS[1]) == 1 then
  return 0
end
for i = 5, #ARGV, 2 do
  redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1])
end
redis.call('HSET', KEYS[1], 'state', 'waiting')
redis.call('EXPIRE', KEYS[1], ARGV[3])
redis.call('ZADD', KEYS[2], ARGV[2], ARGV[1])
redis.call('EXPIRE', KEYS[2], ARGV[4])
redis.call('LPUSH', KEYS[3], '1')
redis.call('LTRIM', KEYS[3], 0, 99)
redis.call('EXPIRE', KEYS[3], ARGV[4])
return 1
