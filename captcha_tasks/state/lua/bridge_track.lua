-- Record a job whose result the bridge must publish, unless it was published already.
-- KEYS[1] the pending hash (Celery task id -> entry JSON), KEYS[2] the job's "published" marker
-- ARGV[1] Celery task id, ARGV[2] entry JSON, ARGV[3] TTL of the hash in seconds
-- Returns 1 when recorded, 0 when the result was published (a redelivered job).
if redis.call('EXISTS', KEYS[2]) == 1 then
  return 0
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('EXPIRE', KEYS[1], tonumber(ARGV[3]))
return 1
