-- Lease one proxy to a worker: its current lease if still alive, else a free one.
-- KEYS: proxies (pool hash), worker_proxy(worker)
-- ARGV: worker, lease_ms, pool_ttl, lease_prefix, quarantine_prefix, start
-- A proxy is free when nobody holds its lease and it is not quarantined. The worker's
-- previous proxy is preferred (affinity across a lapsed lease); otherwise the scan
-- starts at a random offset (`start`) so proxies wear evenly. Each lease is its own
-- key with its own TTL: SET NX PX, so two workers can never hold the same proxy.
-- Returns the proxy id, or false when none is free.
local worker, ms = ARGV[1], tonumber(ARGV[2])
local function usable(id)
  return redis.call('HEXISTS', KEYS[1], id) == 1
     and redis.call('EXISTS', ARGV[5] .. id) == 0
end
local function take(id)
  redis.call('SET', KEYS[2], id, 'PX', ms)
  redis.call('EXPIRE', KEYS[1], ARGV[3])
  return id
end
local current = redis.call('GET', KEYS[2])
if current then
  local lease = ARGV[4] .. current
  local holder = redis.call('GET', lease)
  if holder == worker then
    if usable(current) then
      redis.call('PEXPIRE', lease, ms)
      return take(current)
    end
    redis.call('DEL', lease)  -- quarantined or removed: let it go
  elseif not holder and usable(current)
      and redis.call('SET', lease, worker, 'NX', 'PX', ms) then
    return take(current)
  end
  redis.call('DEL', KEYS[2])
end
local ids = redis.call('HKEYS', KEYS[1])
local n = #ids
if n == 0 then
  return false
end
local start = tonumber(ARGV[6]) % n
for i = 0, n - 1 do
  local id = ids[(start + i) % n + 1]
  local lease = ARGV[4] .. id
  if redis.call('EXISTS', ARGV[5] .. id) == 0 then
    local holder = redis.call('GET', lease)
    if holder == worker then
      redis.call('PEXPIRE', lease, ms)
      return take(id)
    elseif not holder and redis.call('SET', lease, worker, 'NX', 'PX', ms) then
      return take(id)
    end
  end
end
return false
