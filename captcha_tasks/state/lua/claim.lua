-- Claim jobs whose next poll (or whose submit claim) is due, with their fields.
-- KEYS: due
-- ARGV: now, claim_until, max_n, job_prefix, claimer (the engine's name; '' for none)
-- Returns {id1, {field, value, ...}, id2, {...}, ...}; entries whose job expired are dropped.
-- Each claim is a new fencing token: the job's `claim` counter goes up by one and
-- `claimed_by` names the claimer. The scripts that move a job for its claimer (sending,
-- reschedule, requeue) refuse a token that is no longer the job's, so an engine that
-- comes back after its claim ran out (a partition, a long pause) and another engine
-- took the job over changes nothing.
-- Two commands a job (its fields read, its claim written) and three for the whole claim
-- (the due entries read, moved to claim_until and dropped for expired jobs together).
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, ARGV[3])
local out, kept, gone = {}, {}, {}
-- Variadic ZADD / ZREM in chunks: Lua's unpack takes a few thousand values at most.
local function each_chunk(command, values, step)
  for i = 1, #values, 1000 * step do
    redis.call(command, KEYS[1], unpack(values, i, math.min(i + 1000 * step - 1, #values)))
  end
end
for _, id in ipairs(ids) do
  local job = ARGV[4] .. id
  local fields = redis.call('HGETALL', job)
  if #fields == 0 then
    table.insert(gone, id)
  else
    -- The new token: one up from the job's, set in the fields returned as in the hash.
    local claim, at_claim, at_by = 0, nil, nil
    for i = 1, #fields, 2 do
      if fields[i] == 'claim' then
        claim, at_claim = tonumber(fields[i + 1]) or 0, i + 1
      elseif fields[i] == 'claimed_by' then
        at_by = i + 1
      end
    end
    claim = claim + 1
    if at_claim then fields[at_claim] = tostring(claim)
    else table.insert(fields, 'claim'); table.insert(fields, tostring(claim)) end
    if ARGV[5] and ARGV[5] ~= '' then
      redis.call('HSET', job, 'claim', claim, 'claimed_by', ARGV[5])
      if at_by then fields[at_by] = ARGV[5]
      else table.insert(fields, 'claimed_by'); table.insert(fields, ARGV[5]) end
    else
      redis.call('HSET', job, 'claim', claim)
    end
    table.insert(kept, ARGV[2])
    table.insert(kept, id)
    table.insert(out, id)
    table.insert(out, fields)
  end
end
each_chunk('ZREM', gone, 1)
each_chunk('ZADD', kept, 2)
return out
