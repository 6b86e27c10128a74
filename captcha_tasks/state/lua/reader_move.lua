-- Move the schedule entries of captchas the reader holds, if it still holds the lease:
-- each to the score given, where its entry still has the score its reader gave it
-- (one that moved on without it is left alone). With ARGV[2] = '1' the reader lets go
-- of its lease too (an engine stopping: the next reader reads them when due), and each
-- job moved counts the reads its reader kept unsaved.
-- KEYS: reader, due
-- ARGV: token, release ('1' or '0'), job_prefix, then
--       score, task_id, reads, expected_score quadruples
-- Returns 1 if this engine held the lease, 0 if another engine reads (nothing moved).
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
local moves = {}
for i = 4, #ARGV, 4 do
  local score = redis.call('ZSCORE', KEYS[2], ARGV[i + 1])
  if score and tonumber(score) == tonumber(ARGV[i + 3]) then
    table.insert(moves, ARGV[i])
    table.insert(moves, ARGV[i + 1])
    if ARGV[2] == '1' and tonumber(ARGV[i + 2]) > 0 then
      redis.call('HINCRBY', ARGV[3] .. ARGV[i + 1], 'polls', ARGV[i + 2])
    end
  end
end
for i = 1, #moves, 2000 do
  redis.call('ZADD', KEYS[2], 'XX', unpack(moves, i, math.min(i + 1999, #moves)))
end
if ARGV[2] == '1' then redis.call('DEL', KEYS[1]) end
return 1
