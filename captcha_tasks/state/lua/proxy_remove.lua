-- Remove a proxy from the pool with its lease and quarantine.
-- KEYS: proxies, proxy_lease(id), proxy_quarantine(id)
-- ARGV: id, worker_proxy_prefix
-- Returns false if the id was not in the pool, else the former holder ('' if none).
if redis.call('HDEL', KEYS[1], ARGV[1]) == 0 then
  return false
end
local holder = redis.call('GET', KEYS[2])
if holder then
  local mine = ARGV[2] .. holder
  if redis.call('GET', mine) == ARGV[1] then
    redis.call('DEL', mine)
  end
end
redis.call('DEL', KEYS[2], KEYS[3])
return holder or ''
