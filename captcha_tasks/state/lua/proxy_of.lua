-- The proxy a worker holds now, with its record.
-- KEYS: worker_proxy(worker), proxies
-- ARGV: worker, lease_prefix, quarantine_prefix
-- Returns {id, record JSON}, or false if the worker holds no live, usable lease.
local id = redis.call('GET', KEYS[1])
if not id or redis.call('GET', ARGV[2] .. id) ~= ARGV[1]
   or redis.call('EXISTS', ARGV[3] .. id) == 1 then
  return false
end
local record = redis.call('HGET', KEYS[2], id)
if not record then
  return false
end
return {id, record}
