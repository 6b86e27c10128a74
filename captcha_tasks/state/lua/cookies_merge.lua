-- Merge changed cookies into a host's shared jar: the freshest write of each cookie wins.
-- KEYS[1]: the jar hash ({p}cookies:{host}); one field per cookie "name;domain;path".
-- ARGV[1]: now (epoch seconds, the caller's clock, like the set_at stamps)
-- ARGV[2]: TTL cap of the key (s); ARGV[3]: lifetime counted for a session cookie (s)
-- ARGV[4..]: triples op, field, arg:
--   'set', field, cookie JSON  written unless the stored cookie is live and its set_at is
--                              newer than ours (a stale jar never overwrites a fresher value)
--   'del', field, set_at       removed only if the stored cookie's set_at <= set_at, i.e. it
--                              is the version the caller saw (or older), not a newer one
-- Then drops expired cookies and sets the key's TTL to the latest expiry left, capped.
-- Returns {written, stale, deleted}.
local now = tonumber(ARGV[1])
local cap = tonumber(ARGV[2])
local session_life = tonumber(ARGV[3])

-- The decoded cookie, or nil if it is absent, expired or unreadable (then it may be replaced).
local function live(raw)
  if not raw then return nil end
  local ok, cookie = pcall(cjson.decode, raw)
  if not ok or type(cookie) ~= 'table' or type(cookie.set_at) ~= 'number' then return nil end
  if type(cookie.expires) == 'number' and cookie.expires <= now then return nil end
  return cookie
end

local written, stale, deleted = 0, 0, 0
for i = 4, #ARGV, 3 do
  local op, field, arg = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  local raw = redis.call('HGET', KEYS[1], field)
  local stored = live(raw)
  if op == 'set' then
    local incoming = cjson.decode(arg)
    if stored == nil or stored.set_at <= incoming.set_at then
      redis.call('HSET', KEYS[1], field, arg)
      written = written + 1
    else
      stale = stale + 1
    end
  elseif raw then
    if stored == nil or stored.set_at <= tonumber(arg) then
      redis.call('HDEL', KEYS[1], field)
      deleted = deleted + 1
    else
      stale = stale + 1
    end
  end
end

local latest = nil
local all = redis.call('HGETALL', KEYS[1])
for i = 1, #all, 2 do
  local cookie = live(all[i + 1])
  if cookie == nil then
    redis.call('HDEL', KEYS[1], all[i])
  else
    local until_ = now + session_life
    if type(cookie.expires) == 'number' then until_ = cookie.expires end
    if latest == nil or until_ > latest then latest = until_ end
  end
end
if latest ~= nil then
  local ttl = math.ceil(math.min(latest - now, cap))
  if ttl < 1 then ttl = 1 end
  redis.call('EXPIRE', KEYS[1], ttl)
end
return {written, stale, deleted}
