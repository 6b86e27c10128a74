-- Put a claimed job back (its result could not be published): another pass retries it.
-- KEYS[1] the pending hash, KEYS[2] the job's "published" marker
-- ARGV[1] Celery task id, ARGV[2] entry JSON, ARGV[3] TTL of the hash in seconds
redis.call('DEL', KEYS[2])
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('EXPIRE', KEYS[1], tonumber(ARGV[3]))
return 1
