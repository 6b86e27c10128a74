-- After a poll that found no answer: poll again at next_at, if the job is still
-- polling the same captcha id (another engine may have finished or resubmitted it)
-- and the caller still holds its claim (claim.lua; '' for no check): a poll made under
-- a claim that ran out does not move the next poll of the engine that took it over.
-- Its read counts all the same (it was made: the provider's cap on reads counts it).
-- KEYS: job, due
-- ARGV: task_id, captcha_id, next_at, polls_done, last_poll_at, claim
local f = redis.call('HMGET', KEYS[1], 'state', 'captcha_id', 'claim')
if f[1] ~= 'polling' or f[2] ~= ARGV[2] then
  return 0
end
redis.call('HINCRBY', KEYS[1], 'polls', ARGV[4])
if ARGV[6] and ARGV[6] ~= '' and f[3] ~= ARGV[6] then
  return 0
end
redis.call('HSET', KEYS[1], 'last_poll_at', ARGV[5])
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[1])
return 1
