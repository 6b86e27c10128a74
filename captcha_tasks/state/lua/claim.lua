-- Claim jobs whose next poll (or whose submit claim) is due, with their fields.
-- KEYS: due
-- ARGV: now, claim_until, max_n, job_prefix
-- Returns {id1, {field, value, ...}, id2, {...}, ...}; entries whose job expired are dropped.
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, ARGV[3])
local out = {}
for _, id in ipairs(ids) do
  local fields = redis.call('HGETALL', ARGV[4] .. id)
  if #fields == 0 then
    redis.call('ZREM', KEYS[1], id)
  else
    redis.call('ZADD', KEYS[1], ARGV[2], id)
    table.insert(out, id)
    table.insert(out, fields)
  end
end
return out
