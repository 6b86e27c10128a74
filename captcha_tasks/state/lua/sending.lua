-- Mark a job as being sent, right before its in.php call. From here until the call's
-- outcome is recorded, a crash leaves it 'sending': maybe accepted (and billed) by the
-- provider, so it is failed, never submitted again. A job still 'submitting' was
-- never sent, and is safe to resubmit.
-- Only one caller moves a job from 'submitting' to 'sending', and only while it holds
-- the job's claim (its fencing token, see claim.lua): an engine whose claim ran out
-- before it got this far (and whose job another engine took over) sends nothing.
-- KEYS: job, due
-- ARGV: task_id, claim_until, sending_at, sender, structure_ttl, claim (the caller's
--       token; '' for no check)
-- Returns 1 if the caller may send the job now, 0 if it is not the caller's to send.
local f = redis.call('HMGET', KEYS[1], 'state', 'claim', 'sender', 'sending_at')
local token = ARGV[6] or ''
if token ~= '' and f[2] ~= token then
  return 0
end
if f[1] == 'sending' and token ~= '' and f[3] == ARGV[4] and f[4] == ARGV[3] then
  -- This very call ran already (a client that timed out sent it again on a new
  -- connection, and both got through): the job is still the caller's to send, once.
  return 1
end
if f[1] ~= 'submitting' then
  return 0
end
redis.call('HSET', KEYS[1], 'state', 'sending', 'sending_at', ARGV[3], 'sender', ARGV[4])
-- The claim is renewed for the call: it runs out only if the sender dies.
redis.call('ZADD', KEYS[2], ARGV[2], ARGV[1])
redis.call('EXPIRE', KEYS[2], ARGV[5])
return 1
