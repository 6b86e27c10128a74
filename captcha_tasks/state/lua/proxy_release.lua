-- Give a proxy back, only if this worker holds it.
-- KEYS: proxy_lease(id), worker_proxy(worker)
-- ARGV: worker, id
-- Returns 1 if the lease was this worker's and is now free, else 0.
local released = 0
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  released = 1
end
if redis.call('GET', KEYS[2]) == ARGV[2] then
  redis.call('DEL', KEYS[2])
end
return released
