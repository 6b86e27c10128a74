-- Record a captcha id the provider gave for a job we were sending (see sending.lua).
-- KEYS: job, due
-- ARGV: task_id, captcha_id, submitted_at, first_poll_at, structure_ttl
-- Returns 1, or 0 if the job was no longer ours to submit (finished elsewhere).
if redis.call('HGET', KEYS[1], 'state') ~= 'sending' then
  return 0
end
redis.call('HSET', KEYS[1], 'state', 'polling', 'captcha_id', ARGV[2],
           'submitted_at', ARGV[3], 'polls', 0)
redis.call('HINCRBY', KEYS[1], 'submits', 1)
redis.call('ZADD', KEYS[2], ARGV[4], ARGV[1])
redis.call('EXPIRE', KEYS[2], ARGV[5])
return 1
