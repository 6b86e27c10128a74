-- Heartbeat of a worker's lease: extend it if the worker still holds it.
-- KEYS: proxy_lease(id), worker_proxy(worker), proxies, proxy_quarantine(id)
-- ARGV: worker, id, lease_ms, pool_ttl
-- Returns 1 if renewed; 0 if the lease was lost (expired and taken, quarantined,
-- removed from the pool), in which case the worker's keys for it are dropped.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  if redis.call('GET', KEYS[2]) == ARGV[2] then
    redis.call('DEL', KEYS[2])
  end
  return 0
end
if redis.call('EXISTS', KEYS[4]) == 1 or redis.call('HEXISTS', KEYS[3], ARGV[2]) == 0 then
  redis.call('DEL', KEYS[1])
  if redis.call('GET', KEYS[2]) == ARGV[2] then
    redis.call('DEL', KEYS[2])
  end
  return 0
end
redis.call('PEXPIRE', KEYS[1], ARGV[3])
redis.call('SET', KEYS[2], ARGV[2], 'PX', ARGV[3])
redis.call('EXPIRE', KEYS[3], ARGV[4])
return 1
