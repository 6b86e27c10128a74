-- An MCP agent's solve asks for a slot: refused when the agent is at its cap of solves
-- in flight or has spent its cap in the last hour, else the call holds a leased slot.
-- KEYS[1] the agent's in-flight zset, KEYS[2] its spend zset.
-- ARGV: now (epoch ms), call id, lease (ms), max in flight (0: no cap),
--       max spend in the window (nano-USD, 0: no cap), window (ms), spend TTL (s).
-- Returns {"ok"} or {cap, current, frees_at_ms}: cap "in_flight" (frees_at: the
-- earliest lease expiry, at the latest) or "spend" (frees_at: when enough of the
-- window's spend has aged out to be under the cap again).
local now = tonumber(ARGV[1])
local lease = tonumber(ARGV[3])
local max_in_flight = tonumber(ARGV[4])
local max_spend = tonumber(ARGV[5])
local window = tonumber(ARGV[6])

redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local in_flight = redis.call('ZCARD', KEYS[1])
if max_in_flight > 0 and in_flight >= max_in_flight then
  local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  return {'in_flight', tostring(in_flight), first[2]}
end

if max_spend > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now - window)
  local entries = redis.call('ZRANGE', KEYS[2], 0, -1, 'WITHSCORES')
  local total = 0
  for i = 1, #entries, 2 do
    total = total + tonumber(string.match(entries[i], ':(%d+)$') or '0')
  end
  if total >= max_spend then
    local left = total
    local frees = now
    for i = 1, #entries, 2 do
      left = left - tonumber(string.match(entries[i], ':(%d+)$') or '0')
      frees = tonumber(entries[i + 1]) + window
      if left < max_spend then break end
    end
    return {'spend', tostring(total), tostring(frees)}
  end
end

redis.call('ZADD', KEYS[1], now + lease, ARGV[2])
local ttl = redis.call('PTTL', KEYS[1])
if ttl < lease then redis.call('PEXPIRE', KEYS[1], lease) end
return {'ok'}
