-- The reader's lease on a provider's reads, renewed (or taken, if free) with the
-- schedule entries of the captchas it holds.
-- KEYS: reader, due
-- ARGV: token, lease_ms, score, then task_id, expected_score pairs
-- Each held captcha whose entry still has the score its reader gave it moves to
-- ARGV[3] (a lease ahead: the next reader claims it once that passes); one whose entry
-- is gone or has another score moved on without its reader (ended, resubmitted,
-- revoked, claimed by another engine) and is left alone.
-- Returns nil when another engine holds the lease (the caller holds nothing), else
-- one flag per pair: 1 moved (still held), 0 let go.
local holder = redis.call('GET', KEYS[1])
if holder and holder ~= ARGV[1] then
  return false
end
if holder then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
else
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
end
if #ARGV < 4 then return {} end
local ids = {}
for i = 4, #ARGV, 2 do table.insert(ids, ARGV[i]) end
local flags, moves = {}, {}
for i = 1, #ids, 1000 do
  local scores = redis.call('ZMSCORE', KEYS[2], unpack(ids, i, math.min(i + 999, #ids)))
  for j = 1, #scores do
    local n = i + j - 1
    if scores[j] and tonumber(scores[j]) == tonumber(ARGV[3 + 2 * n]) then
      flags[n] = 1
      table.insert(moves, ARGV[3])
      table.insert(moves, ids[n])
    else
      flags[n] = 0
    end
  end
end
for i = 1, #moves, 2000 do
  redis.call('ZADD', KEYS[2], 'XX', unpack(moves, i, math.min(i + 1999, #moves)))
end
return flags
