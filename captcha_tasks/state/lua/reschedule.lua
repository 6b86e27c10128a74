-- After a poll that found no answer: poll each job again at its next_at, if it is still
-- polling the same captcha id (another engine may have finished or resubmitted it)
-- and the caller still holds its claim (claim.lua; '' for no check): a poll made under
-- a claim that ran out does not move the next poll of the engine that took it over.
-- Its read counts all the same (it was made: the provider's cap on reads counts it).
-- One call for every unanswered captcha of a batch read: two commands a job (its fields
-- read, its counts written) and one for all (their next polls, in chunks).
-- KEYS: due
-- ARGV: job_prefix, then per job: task_id, captcha_id, next_at, polls_done,
--       last_poll_at, claim
-- Returns a list: 1 for each job rescheduled, 0 for one that moved on.
local out, due = {}, {}
for i = 2, #ARGV, 6 do
  local job = ARGV[1] .. ARGV[i]
  local f = redis.call('HMGET', job, 'state', 'captcha_id', 'claim', 'polls')
  local done = 0
  if f[1] == 'polling' and f[2] == ARGV[i + 1] then
    local polls = (tonumber(f[4]) or 0) + tonumber(ARGV[i + 3])
    if ARGV[i + 5] == '' or f[3] == ARGV[i + 5] then
      redis.call('HSET', job, 'polls', polls, 'last_poll_at', ARGV[i + 4])
      table.insert(due, ARGV[i + 2])
      table.insert(due, ARGV[i])
      done = 1
    else
      redis.call('HSET', job, 'polls', polls)
    end
  end
  table.insert(out, done)
end
for i = 1, #due, 2000 do
  redis.call('ZADD', KEYS[1], unpack(due, i, math.min(i + 1999, #due)))
end
return out
