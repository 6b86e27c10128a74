-- Mark a job as being sent, right before its in.php call. From here until the call's
-- outcome is recorded, a crash leaves it 'sending': maybe accepted (and billed) by the
-- provider, so it is failed, never submitted again. A job still 'submitting' was
-- never sent, and is safe to resubmit.
-- Only one caller moves a job from 'submitting' to 'sending': an engine whose claim
-- ran out before it got this far (and whose job another engine took over) sends nothing.
-- KEYS: job, due
-- ARGV: task_id, claim_until, sending_at, sender, structure_ttl
-- Returns 1 if the caller may send the job now, 0 if it is not the caller's to send.
if redis.call('HGET', KEYS[1], 'state') ~= 'submitting' then
  return 0
end
redis.call('HSET', KEYS[1], 'state', 'sending', 'sending_at', ARGV[3], 'sender', ARGV[4])
-- The claim is renewed for the call: it runs out only if the sender dies.
redis.call('ZADD', KEYS[2], ARGV[2], ARGV[1])
redis.call('EXPIRE', KEYS[2], ARGV[5])
return 1
