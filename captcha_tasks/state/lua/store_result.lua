-- Store a task's state in the result backend unless it already holds a final one.
-- KEYS: celery-task-meta-{id}
-- ARGV: the encoded meta (JSON), expiry in seconds (0: none), what is stored: 'final'
--       (SUCCESS, FAILURE, REVOKED) or anything else (a passing state: STARTED, RETRY)
-- Returns 1 if stored (and published), 0 if the state there is kept.
-- A passing state never replaces a final one. Celery keeps only SUCCESS from being
-- overwritten, and not atomically: a redelivered message (a worker SIGKILLed before
-- its ack) stores STARTED over the FAILURE the solve engine wrote meanwhile, and the
-- task never ends for its caller. A final state replaces anything but SUCCESS (Celery's
-- own rule, which it checks with a read of its own before its write: here in the
-- same round trip).
local current = redis.call('GET', KEYS[1])
if current then
  local ok, meta = pcall(cjson.decode, current)
  if ok and type(meta) == 'table' then
    local status = meta['status']
    if status == 'SUCCESS' or (ARGV[3] ~= 'final' and (status == 'FAILURE'
                                                       or status == 'REVOKED')) then
      return 0
    end
  end
end
if tonumber(ARGV[2]) > 0 then
  redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[2])
else
  redis.call('SET', KEYS[1], ARGV[1])
end
redis.call('PUBLISH', KEYS[1], ARGV[1])
return 1
