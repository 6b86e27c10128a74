-- After a poll that found no answer: poll again at next_at, if the job is still
-- polling the same captcha id (another engine may have finished or resubmitted it).
-- KEYS: job, due
-- ARGV: task_id, captcha_id, next_at, polls_done, last_poll_at
if redis.call('HGET', KEYS[1], 'state') ~= 'polling'
   or redis.call('HGET', KEYS[1], 'captcha_id') ~= ARGV[2] then
  return 0
end
redis.call('HINCRBY', KEYS[1], 'polls', ARGV[4])
redis.call('HSET', KEYS[1], 'last_poll_at', ARGV[5])
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[1])
return 1
