-- Record a captcha id the provider gave for a job we were sending (see sending.lua).
-- KEYS: job, due
-- ARGV: task_id, captcha_id, submitted_at, first_poll_at, structure_ttl, sender (''
--       for no check)
-- Returns 1, or 0 if the job was no longer ours to submit (finished elsewhere).
-- The sender's captcha id is recorded even if another engine claimed the job since (to
-- fail it: its claim ran out mid-send): the captcha is at the provider, billed, and
-- this is the one record of it; that engine's failure then finds the job moved on.
local f = redis.call('HMGET', KEYS[1], 'state', 'sender', 'polls', 'earlier_polls',
                     'submits', 'last_poll_at')
if f[1] ~= 'sending' or (ARGV[6] and ARGV[6] ~= '' and f[2] ~= ARGV[6]) then
  return 0
end
-- A resubmit (an unsolvable captcha's) starts a new captcha at the provider: its reads
-- (the provider's per-task cap) and its last empty poll (the token's age, the first
-- poll's learning) start afresh. The old captcha's reads stay in the solve's count.
local fields = {'state', 'polling', 'captcha_id', ARGV[2], 'submitted_at', ARGV[3],
                'polls', 0, 'submits', (tonumber(f[5]) or 0) + 1}
local earlier = tonumber(f[3] or '0') or 0
if earlier > 0 then
  table.insert(fields, 'earlier_polls')
  table.insert(fields, (tonumber(f[4]) or 0) + earlier)
end
redis.call('HSET', KEYS[1], unpack(fields))
if f[6] then
  redis.call('HDEL', KEYS[1], 'last_poll_at')
end
redis.call('ZADD', KEYS[2], ARGV[4], ARGV[1])
redis.call('EXPIRE', KEYS[2], ARGV[5])
return 1
