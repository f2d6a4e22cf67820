-- enqueue: adds a batch of jobs; caller-chosen ids that already exist are refused.
--
-- KEYS: the queue's keys (lib.lua); touches ready[1..3], delayed[1..3], jobs, counters, wake;
--   then KEYS[19]: the queue registry (SET of queue names, keys.rs's QUEUES).
-- ARGV: one or more sections, each of jobs that share their options:
--   priority (0 high, 1 normal, 2 low), delay (ms, >= 0), run_at (epoch ms, 0 = none),
--   unique (1 = ids chosen by the caller: check each; 0 = ids weir generated, unique by
--   construction: stored in bulk), n (jobs in the section), then n pairs of
--   id, envelope (JSON, header as envelope.rs writes it).
-- Returns: the ids not enqueued because a job with that id exists (array).
--
-- A batch of generated ids that are all ready now does not come here: `enqueue_plain`
-- (scripts/enqueue.rs) stores it with plain commands in MULTI/EXEC. This file is the
-- source of truth; tests/scripts/enqueue.rs checks both paths against one expected state
-- (`routed()`), so a change here is a change there.

local dups, nd = {}, 0
local added = 0
local now = nil

-- Stores a section's envelopes; returns the ids stored, in order.
local function store(first, n, unique)
  local ids, ni = {}, 0
  if unique then
    for i = first, first + 2 * n - 1, 2 do
      if redis.call('HSETNX', K.jobs, ARGV[i], ARGV[i + 1]) == 1 then
        ni = ni + 1
        ids[ni] = ARGV[i]
      else
        nd = nd + 1
        dups[nd] = ARGV[i]
      end
    end
    return ids
  end
  local pairs_ = {}
  for i = first, first + 2 * n - 1, 2 do
    ni = ni + 1
    ids[ni] = ARGV[i]
    pairs_[2 * ni - 1] = ARGV[i]
    pairs_[2 * ni] = ARGV[i + 1]
  end
  call_chunked('HSET', K.jobs, pairs_)
  return ids
end

-- 1. each section: store the envelopes, then push the ids to ready or delayed in bulk
local i = 1
while i <= #ARGV do
  local p = tonumber(ARGV[i]) + 1
  local delay, run_at = tonumber(ARGV[i + 1]), tonumber(ARGV[i + 2])
  local n = tonumber(ARGV[i + 4])
  local ids = store(i + 5, n, ARGV[i + 3] == '1')
  added = added + #ids
  if #ids > 0 then
    if run_at > 0 or delay > 0 then
      now = now or now_ms()
      local due = run_at
      if due == 0 then due = now + delay end
      local scored = {}
      for k = 1, #ids do
        scored[2 * k - 1] = due
        scored[2 * k] = ids[k]
      end
      call_chunked('ZADD', K.delayed[p], scored)
    else
      call_chunked('RPUSH', K.ready[p], ids)
    end
  end
  i = i + 5 + 2 * n
end

-- 2. wake idle consumers once per call
count('enqueued', added)
if added > 0 then redis.call('PUBLISH', K.wake, 'enqueue') end

-- 3. the queue registry (`weir queues`): one SADD per call; the name is the hash tag
redis.call('SADD', KEYS[19], string.match(KEYS[1], '^weir:{(.*)}:'))
return dups
