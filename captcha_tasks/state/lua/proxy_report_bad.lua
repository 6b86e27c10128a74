-- Quarantine a proxy for the cooldown and take it from whoever holds it.
-- KEYS: proxies, proxy_quarantine(id), proxy_lease(id)
-- ARGV: id, reason, cooldown_ms, worker_proxy_prefix, pool_ttl
-- The holder's next heartbeat finds its lease gone and leases another proxy.
-- Returns false if the id is not in the pool, else the former holder ('' if none).
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then
  return false
end
if tonumber(ARGV[3]) > 0 then
  redis.call('SET', KEYS[2], ARGV[2], 'PX', ARGV[3])
end
local holder = redis.call('GET', KEYS[3])
if holder then
  redis.call('DEL', KEYS[3])
  local mine = ARGV[4] .. holder
  if redis.call('GET', mine) == ARGV[1] then
    redis.call('DEL', mine)
  end
end
redis.call('EXPIRE', KEYS[1], ARGV[5])
return holder or ''
