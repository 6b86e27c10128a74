-- Count a site's verdict on one solve's token, once per task id.
-- KEYS: feedback mark, acceptance bucket (this minute), running totals (the metrics')
-- ARGV: verdict ('a' accepted, 'r' rejected), mark_ttl, bucket_ttl, cost (nano-USD),
--       field prefix of the provider's and type's figures ('{provider}|{type}||'),
--       field prefix of the host's ('' when the host is not counted on its own),
--       field prefix of the totals ('{provider}|{type}|{host or other}|'), totals_ttl
-- Returns 1 if this call counted it, else the verdict counted before ('a' or 'r').
if redis.call('HSETNX', KEYS[1], 'verdict', ARGV[1]) == 0 then
  return redis.call('HGET', KEYS[1], 'verdict')
end
redis.call('EXPIRE', KEYS[1], ARGV[2])
for i = 5, 6 do
  if ARGV[i] ~= '' then
    redis.call('HINCRBY', KEYS[2], ARGV[i] .. ARGV[1], 1)
    if tonumber(ARGV[4]) > 0 then
      redis.call('HINCRBY', KEYS[2], ARGV[i] .. 'c', ARGV[4])
    end
  end
end
redis.call('EXPIRE', KEYS[2], ARGV[3])
redis.call('HINCRBY', KEYS[3], ARGV[7] .. ARGV[1], 1)
redis.call('EXPIRE', KEYS[3], ARGV[8])
return 1
