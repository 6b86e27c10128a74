-- Take free threads of one provider's budget (this engine's, the "lane") for the
-- waiting jobs routed to it, oldest first.
-- KEYS: waiting, due (the lane's), then per provider i = 1..n: budget_i, limit_i, breaker_i
--       (KEYS[3i], KEYS[3i+1], KEYS[3i+2])
-- ARGV: now, max_n, claim_until, job_prefix, structure_ttl, lane (its index i), n,
--       then per provider i: name_i, threads_i (ARGV[6+2i], ARGV[7+2i]), then the
--       claimer (the engine's name, ARGV[8+2n]; absent or '' for none)
--
-- A provider's budget in force is the lower of its configured threads and its limit
-- learned from "no free slot" answers, while that is known. Expired leases (their
-- holder died and nobody finished the job) are dropped first.
--
-- A job's `route` (names joined by ",", set at admission; empty or absent: every
-- provider in order, e.g. a token pool's fill) lists the providers that may take it.
-- It goes to the first of them that is usable and has a free thread: this lane takes
-- it only when that one is the lane, so the engines of several providers never race
-- for a job. A provider is usable while its breaker is closed; open, it is skipped until
-- its cool-down ends; then (half-open) exactly one job, its probe, may take it until
-- the probe's claim runs out (breaker.lua closes it on the probe's accepted submit).
--
-- A job past its queue deadline is taken without a thread (its engine fails it with
-- SolveTimeout at once), so a job no usable provider can take still ends in time.
-- A taken job holds a thread (lease = now + its lease_s), is claimed in the lane's
-- `due` until claim_until while being submitted, is in state 'submitting' and names
-- the lane in `provider`; its claim is a new fencing token (`claim` + 1, `claimed_by`:
-- see claim.lua). Returns {id1, {field, value, ...}, id2, {...}, ...}: each
-- taken job with its fields after the take (one round trip less per submit).
local now = tonumber(ARGV[1])
local lane = tonumber(ARGV[6])
local n = tonumber(ARGV[7])
local claim_until = ARGV[3]
local claimer = ARGV[8 + 2 * n] or ''

local function free_of(i)
  local budget = KEYS[3 * i]
  redis.call('ZREMRANGEBYSCORE', budget, '-inf', now)
  local limit = tonumber(ARGV[7 + 2 * i])
  local learned = tonumber(redis.call('GET', KEYS[3 * i + 1]))
  if learned and learned < limit then
    limit = learned
  end
  return limit - redis.call('ZCARD', budget)
end

-- 'yes', 'no', or 'probe' (one job may take it, to try it again).
local function usable_of(i)
  local b = redis.call('HMGET', KEYS[3 * i + 2], 'state', 'until', 'probe_until')
  if not b[1] or b[1] == 'closed' then
    return 'yes'
  end
  if b[1] == 'open' and (tonumber(b[2]) or 0) > now then
    return 'no'
  end
  if b[1] == 'half_open' and (tonumber(b[3]) or 0) > now then
    return 'no' -- its probe is out
  end
  return 'probe'
end

local free = {}
local usable = {}
free[lane] = free_of(lane)
if free[lane] <= 0 then
  return {}
end
usable[lane] = n > 1 and usable_of(lane) or 'yes'
local index = {}
for i = 1, n do
  index[ARGV[6 + 2 * i]] = i
  if i ~= lane then
    free[i] = free_of(i)
    usable[i] = usable_of(i)
  end
end

local all = {}
for i = 1, n do
  all[i] = i
end
local routes = {}
local function route_of(raw)
  if not raw or raw == '' then
    return all
  end
  local known = routes[raw]
  if known then
    return known
  end
  local out = {}
  for name in string.gmatch(raw, '[^,]+') do
    if index[name] then
      table.insert(out, index[name])
    end
  end
  routes[raw] = out
  return out
end

local want = math.min(free[lane], tonumber(ARGV[2]))
-- One provider: every job is the lane's. Several: look a little further, so jobs
-- bound for a full or open provider do not hide the lane's own behind them.
local scan = n > 1 and want + 100 or want
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, scan)
local taken = {}
local lane_name = ARGV[6 + 2 * lane]

local function take(id, job, lease, claim)
  redis.call('ZREM', KEYS[1], id)
  if lease then
    redis.call('ZADD', KEYS[3 * lane], now + lease, id)
  end
  redis.call('ZADD', KEYS[2], claim_until, id)
  local fields = {'state', 'submitting', 'provider', lane_name,
                  'claim', (tonumber(claim) or 0) + 1}
  if claimer ~= '' then
    table.insert(fields, 'claimed_by')
    table.insert(fields, claimer)
  end
  redis.call('HSET', job, unpack(fields))
  table.insert(taken, id)
  table.insert(taken, redis.call('HGETALL', job))
end

for _, id in ipairs(ids) do
  if #taken >= 2 * want or usable[lane] == 'no' then
    break
  end
  local job = ARGV[4] .. id
  local f = redis.call('HMGET', job, 'lease_s', 'route', 'queue_deadline', 'claim')
  local lease = tonumber(f[1])
  if not lease then
    redis.call('ZREM', KEYS[1], id) -- its hash is gone: a stale entry
  elseif (tonumber(f[3]) or now) < now then
    take(id, job, nil, f[4])
  else
    local pick = nil
    for _, i in ipairs(route_of(f[2])) do
      if usable[i] ~= 'no' and free[i] > 0 then
        pick = i
        break
      end
    end
    if pick then
      free[pick] = free[pick] - 1
      if pick == lane then
        take(id, job, lease, f[4])
        if usable[lane] == 'probe' then
          redis.call('HSET', KEYS[3 * lane + 2], 'state', 'half_open', 'probe', id,
                     'probe_until', claim_until)
          redis.call('EXPIRE', KEYS[3 * lane + 2], ARGV[5])
        end
      end
      if usable[pick] == 'probe' then
        usable[pick] = 'no'
      end
    end
  end
end
-- The keys written to keep their TTL from their last write (waiting only shrinks here:
-- its writers, admit.lua and requeue.lua, refresh its TTL).
if #taken > 0 then
  redis.call('EXPIRE', KEYS[2], ARGV[5])
  redis.call('EXPIRE', KEYS[3 * lane], ARGV[5])
end
return taken
