-- End a job (solved or failed): free its thread, exactly once.
-- KEYS: job, due, budget, wake, waiting[, spend bucket]
-- ARGV: task_id, expected_captcha_id ('' for any), final_state, report_until,
--       spend_type ('' for none), spend_nano_usd, spend_ttl, expected_state ('' for any
--       state not ended), claim ('' for any), wake ('1': wake an idle engine if a job
--       waits; '0': the caller takes the freed thread for it itself), field1, value1, ...
-- Returns 1 for the caller that ended it, 0 if it had already ended (or moved on from
-- what the caller expected: a send another engine gave up on whose captcha id its
-- sender recorded since, a claim taken over).
-- The job stays in `due` until report_until: the caller reports the outcome to Celery
-- (result, callbacks) and then removes it (``reported``). If the caller dies first,
-- another engine claims the entry after report_until and reports the stored outcome,
-- so an ended job is never left unreported.
local f = redis.call('HMGET', KEYS[1], 'state', 'captcha_id', 'claim')
local state = f[1]
if state ~= 'polling' and state ~= 'sending' and state ~= 'submitting'
   and state ~= 'waiting' then
  return 0
end
if ARGV[8] ~= '' and state ~= ARGV[8] then
  return 0
end
if (ARGV[2] ~= '' and f[2] ~= ARGV[2]) or (ARGV[9] ~= '' and f[3] ~= ARGV[9]) then
  return 0
end
redis.call('HSET', KEYS[1], 'state', ARGV[3], unpack(ARGV, 11))
-- A solve's spend lands in its minute's bucket with the finish itself: counted once,
-- and never for a job another engine had ended already.
if ARGV[5] ~= '' then
  redis.call('HINCRBY', KEYS[6], 'solves:' .. ARGV[5], 1)
  if tonumber(ARGV[6]) > 0 then
    redis.call('HINCRBY', KEYS[6], 'cost:' .. ARGV[5], ARGV[6])
  end
  redis.call('EXPIRE', KEYS[6], ARGV[7])
end
redis.call('ZADD', KEYS[2], ARGV[4], ARGV[1])
redis.call('ZREM', KEYS[3], ARGV[1])
-- A freed thread wakes an idle engine only if a job waits for one (with none waiting
-- it could take nothing; the next admission wakes one, seeing the thread free) and the
-- caller does not take the thread for it at once (a poll's answers: the engine's own
-- refill; a woken engine would only find the job taken).
if ARGV[10] == '1' and redis.call('EXISTS', KEYS[5]) == 1 then
  redis.call('LPUSH', KEYS[4], '1')
  redis.call('LTRIM', KEYS[4], 0, 99)
end
return 1
