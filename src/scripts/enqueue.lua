-- enqueue: adds a batch of jobs, rejecting ids that already exist.
--
-- KEYS: the queue's keys (lib.lua); touches ready[1..3], delayed[1..3], jobs, counters, wake.
-- ARGV: groups of five per job:
--   id, priority (0 high, 1 normal, 2 low), delay (ms, >= 0), run_at (epoch ms, 0 = none),
--   envelope (JSON, header as envelope.rs writes it).
-- Returns: the ids that were not enqueued because a job with that id exists (array).

local ready = { {}, {}, {} }
local dups = {}
local now = nil
local added = 0

-- 1. store each envelope unless its id is taken; route to ready or delayed
for i = 1, #ARGV, 5 do
  local id = ARGV[i]
  local p = tonumber(ARGV[i + 1]) + 1
  local delay = tonumber(ARGV[i + 2])
  local run_at = tonumber(ARGV[i + 3])
  if redis.call('HSETNX', K.jobs, id, ARGV[i + 4]) == 0 then
    dups[#dups + 1] = id
  else
    added = added + 1
    if run_at > 0 or delay > 0 then
      now = now or now_ms()
      local due = run_at
      if due == 0 then due = now + delay end
      redis.call('ZADD', K.delayed[p], due, id)
    else
      local r = ready[p]
      r[#r + 1] = id
    end
  end
end

-- 2. one push per priority
for p = 1, 3 do
  if #ready[p] > 0 then call_chunked('RPUSH', K.ready[p], ready[p]) end
end

-- 3. wake idle consumers once per batch
count('enqueued', added)
if added > 0 then redis.call('PUBLISH', K.wake, 'enqueue') end
return dups
