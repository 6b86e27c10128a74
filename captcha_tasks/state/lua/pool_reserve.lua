-- Reserve fill solves for a pool up to its target, counting tokens with enough life
-- left and fills already in flight, so concurrent callers never over-fill it.
-- KEYS: pool, filling
-- ARGV: now, min_life, target, max_batch, deadline, structure_ttl, id1, id2, ...
-- Returns {size, filling_before, reserved_id...}.
local now = tonumber(ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
local size = redis.call('ZCOUNT', KEYS[1], now + tonumber(ARGV[2]), '+inf')
local filling = redis.call('ZCARD', KEYS[2])
local need = math.min(tonumber(ARGV[3]) - size - filling, tonumber(ARGV[4]), #ARGV - 6)
local out = {size, filling}
for i = 1, need do
  redis.call('ZADD', KEYS[2], ARGV[5], ARGV[6 + i])
  table.insert(out, ARGV[6 + i])
end
if need > 0 then
  redis.call('EXPIRE', KEYS[2], ARGV[6])
end
return out
