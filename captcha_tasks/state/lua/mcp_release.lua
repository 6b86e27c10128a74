-- An MCP agent's solve ended: its slot is freed and what it cost is recorded.
-- KEYS[1] the agent's in-flight zset, KEYS[2] its spend zset.
-- ARGV: now (epoch ms), call id, cost (nano-USD, 0: nothing to record), spend TTL (s).
redis.call('ZREM', KEYS[1], ARGV[2])
if tonumber(ARGV[3]) > 0 then
  redis.call('ZADD', KEYS[2], tonumber(ARGV[1]), ARGV[2] .. ':' .. ARGV[3])
  redis.call('EXPIRE', KEYS[2], tonumber(ARGV[4]))
end
return 1
