-- Take jobs off the pending hash to publish their results: each is taken by one bridge only.
-- KEYS[1] the pending hash
-- ARGV[1] prefix of the "published" markers, ARGV[2] their TTL in seconds, ARGV[3..] Celery task ids
-- Returns the ids this caller took (and marked published).
local taken = {}
for i = 3, #ARGV do
  if redis.call('HDEL', KEYS[1], ARGV[i]) == 1 then
    redis.call('SET', ARGV[1] .. ARGV[i], '1', 'EX', tonumber(ARGV[2]))
    taken[#taken + 1] = ARGV[i]
  end
end
return taken
