-- Claim jobs whose next poll (or whose submit claim) is due, with their fields.
-- KEYS: due
-- ARGV: now, claim_until, max_n, job_prefix, claimer (the engine's name; '' for none)
-- Returns {id1, {field, value, ...}, id2, {...}, ...}; entries whose job expired are dropped.
-- Each claim is a new fencing token: the job's `claim` counter goes up by one and
-- `claimed_by` names the claimer. The scripts that move a job for its claimer (sending,
-- reschedule, requeue) refuse a token that is no longer the job's, so an engine that
-- comes back after its claim ran out (a partition, a long pause) and another engine
-- took the job over changes nothing.
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, ARGV[3])
local out = {}
for _, id in ipairs(ids) do
  local job = ARGV[4] .. id
  if redis.call('EXISTS', job) == 0 then
    redis.call('ZREM', KEYS[1], id)
  else
    redis.call('ZADD', KEYS[1], ARGV[2], id)
    redis.call('HINCRBY', job, 'claim', 1)
    if ARGV[5] and ARGV[5] ~= '' then
      redis.call('HSET', job, 'claimed_by', ARGV[5])
    end
    table.insert(out, id)
    table.insert(out, redis.call('HGETALL', job))
  end
end
return out
