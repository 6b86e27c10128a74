-- Learn how many captchas the provider takes at once from a "no free slot" answer.
-- KEYS: provider_limit, budget
-- ARGV: ttl_ms
-- Called once the job that got the answer gave its thread back: the captchas still
-- holding threads are what the provider holds for us right now. The limit drops to
-- that (at least 1) and is forgotten after ttl_ms, so threads the provider frees (or
-- another client on the key stops using) are tried again. Returns the limit.
local held = math.max(1, redis.call('ZCARD', KEYS[2]))
local current = tonumber(redis.call('GET', KEYS[1]))
if current == nil or held < current then
  redis.call('SET', KEYS[1], held, 'PX', ARGV[1])
  return held
end
return current
