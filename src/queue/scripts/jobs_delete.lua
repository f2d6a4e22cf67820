-- jobs_delete: deletes jobs by id, for `weir job delete`, `weir dlq delete` and the UI.
--
-- KEYS: the queue's keys (lib.lua); touches jobs, ready[1..3], suspects, delayed[1..3],
--   lease, lease_tokens, started, dead, errors, deferrals, counters.
-- KEYS also end with the job records (lib.lua's records): history, done and results; a
--   job's history goes with it, and a completed job kept on request can be deleted (its
--   result with it).
-- ARGV[1]: 'any' (a job in any state) or 'dead' (only dead-lettered jobs)
-- ARGV[2]: n, the number of ids; ARGV[3..n + 2]: the job ids
-- ARGV[n + 3..]: hints, in fours: an id, then where inline_find.lua saw it waiting (its
--   list's number, its item and its index from the list's head; lib.lua's find_inline)
-- Returns: flat pairs of id, the state it was deleted from ('ready', 'delayed',
--   'in_flight', 'dead', 'done'), or 'missing' (not found; with 'dead': not
--   dead-lettered).
--   A running job (in_flight) loses its lease here: its consumer's later outcome finds no
--   lease and is dropped as "missed" (settle.lua), its heartbeat drops it as lost, and
--   reclaim never sees it, so it is neither retried nor dead-lettered.
--   Cost: O(log n) per job, but a ready job is removed from its list with LREM, O(length
--   of that list): the price of deleting from the middle of a queue. The ids not in jobs
--   may be inline jobs (lib.lua's items), ready or leased: they are looked for in the
--   lease and the batches (the jobs in flight), all in one pass, and a waiting one is
--   removed from the list its hint names with LREM from the end it was nearer, O(the
--   items between), if it is still there (lib.lua's find_inline); not with 'dead': an
--   inline job is never dead-lettered.

local only = ARGV[1]
local ids, hints = {}, {}
local n = tonumber(ARGV[2])
for i = 3, n + 2 do ids[#ids + 1] = ARGV[i] end
for i = n + 3, #ARGV - 3, 4 do
  hints[ARGV[i]] = { tonumber(ARGV[i + 1]), ARGV[i + 2], tonumber(ARGV[i + 3]) }
end
-- 0. before the first write: every key it may write
records()
expect(K.dead, 'zset')
expect(K.lease, 'zset')
expect_each(K.delayed, 'zset')
expect_each(K.ready, 'list')
expect(K.suspects, 'list')
expect_each({ K.jobs, K.errors, K.deferrals, K.lease_tokens, K.started, K.results }, 'hash')
counters_ready({ 'deleted' })
-- the jobs leased in a batch (lib.lua's batch leases) get lease entries of their own
-- first: their batches are split (read first, then written)
if only ~= 'dead' and expect(K.batches, 'zset') then
  local set = {}
  for _, id in ipairs(ids) do set[id] = true end
  local _, holding = find_in_batches(set)
  for name, b in pairs(holding) do split_batch(name, b[1], b[2]) end
end
local states = {}
local deleted = 0

-- Where job `id` is, out of it; returns the state it was in, or nil.
local function take(id, env)
  if redis.call('ZREM', K.dead, id) == 1 then return 'dead' end
  if only == 'dead' then return nil end
  if redis.call('ZREM', K.done, id) == 1 then return 'done' end
  if redis.call('ZREM', K.lease, id) == 1 then
    redis.call('HDEL', K.lease_tokens, id)
    redis.call('HDEL', K.started, id)
    return 'in_flight'
  end
  for p = 1, 3 do
    if redis.call('ZREM', K.delayed[p], id) == 1 then return 'delayed' end
  end
  if not env then return nil end
  local _, _, first = header(env)
  local lists = { K.suspects, K.ready[first or 2], K.ready[1], K.ready[2], K.ready[3] }
  for i = 1, #lists do
    if redis.call('LREM', lists[i], 1, id) == 1 then return 'ready' end
  end
  return nil
end

-- 1. by id
local tried, wanted, nw = {}, {}, 0
for i, id in ipairs(ids) do
  local env = redis.call('HGET', K.jobs, id)
  local state = take(id, env)
  if state then
    redis.call('HDEL', K.jobs, id)
    forget({ id })
    -- (a completed job kept was counted as acked: 'deleted' counts jobs that never ended)
    if state ~= 'done' then deleted = deleted + 1 else drop_results({ id }) end
  elseif not env and only ~= 'dead' and not tried[id] then
    wanted[id] = i
    nw = nw + 1
  end
  tried[id] = true
  states[i] = state
end

-- 2. the inline jobs among the others, out of their list or lease with their per-lease
--    records (keyed by the item)
if nw > 0 then
  local found = find_inline(wanted, hints)
  for i, id in ipairs(ids) do
    local f = wanted[id] == i and found[id]
    if f then
      local item = f[1]
      if f[2] == K.lease then
        redis.call('ZREM', K.lease, item)
        redis.call('HDEL', K.lease_tokens, item)
        redis.call('HDEL', K.started, item)
        states[i] = 'in_flight'
      else
        -- From the end it was nearer when seen (its index from the head only falls as
        -- jobs are fetched): O(the items between it and that end); 0 if it went meanwhile.
        local from = 1
        if f[5] and f[5] > redis.call('LLEN', f[2]) / 2 then from = -1 end
        if redis.call('LREM', f[2], from, item) == 1 then states[i] = 'ready' end
      end
      if states[i] then
        forget({ id })
        deleted = deleted + 1
      end
    end
  end
end

local out = {}
for i, id in ipairs(ids) do
  out[#out + 1] = id
  out[#out + 1] = states[i] or 'missing'
end
count('deleted', deleted)
return out
