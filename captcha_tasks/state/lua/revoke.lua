-- Revoke a job that no provider has been sent: out of the waiting queue, the thread it
-- took (if any) freed, ended 'failed' with the given fields (the revocation), exactly
-- once, and listed in `due` until report_until so that its outcome is reported even if
-- the revoking engine dies first (as finish.lua does).
-- KEYS: job, waiting, due (the lane of the job if it took a thread, else the revoking
--       engine's), budget (the lane of the job)
-- ARGV: task_id, report_until, expected ('waiting' to end only a job still waiting; ''
--       for a waiting or a submitting one), field1, value1, ...
-- Returns the state it was revoked from ('waiting' or 'submitting'), or '' when it is
-- not this script's to end: ended already, being sent or at the provider (their lane's
-- engine ends those), not in the expected state, or unknown. Its `claim` goes up: the engine that took it to
-- submit it holds a claim that is no longer the job's, so its send is refused.
local state = redis.call('HGET', KEYS[1], 'state')
if state ~= 'waiting' and state ~= 'submitting' then
  return ''
end
if ARGV[3] ~= '' and state ~= ARGV[3] then
  return ''
end
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('ZREM', KEYS[4], ARGV[1])
redis.call('HSET', KEYS[1], 'state', 'failed', unpack(ARGV, 4))
redis.call('HINCRBY', KEYS[1], 'claim', 1)
redis.call('ZADD', KEYS[3], ARGV[2], ARGV[1])
return state
