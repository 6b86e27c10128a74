-- Read a host's shared jar, dropping expired cookies. They are deleted here, atomically with
-- the read, so a fresher cookie another worker writes into the same field is never removed
-- on the strength of a reader's outdated view.
-- KEYS[1]: the jar hash ({p}cookies:{host}); ARGV[1]: now (epoch seconds)
-- Returns the live fields as a flat list: field1, json1, field2, json2, ...
local now = tonumber(ARGV[1])
local out = {}
local all = redis.call('HGETALL', KEYS[1])
for i = 1, #all, 2 do
  local ok, cookie = pcall(cjson.decode, all[i + 1])
  if ok and type(cookie) == 'table' and type(cookie.expires) == 'number'
      and cookie.expires <= now then
    redis.call('HDEL', KEYS[1], all[i])
  else
    -- Unreadable values are returned too: the caller logs and skips them, a merge replaces them.
    out[#out + 1] = all[i]
    out[#out + 1] = all[i + 1]
  end
end
return out
