-- jobs_delete: deletes jobs by id, for `weir job delete`, `weir dlq delete` and the UI.
--
-- KEYS: the queue's keys (lib.lua); touches jobs, ready[1..3], suspects, delayed[1..3],
--   lease, lease_tokens, started, dead, errors, deferrals, counters.
-- ARGV[1]: 'any' (a job in any state) or 'dead' (only dead-lettered jobs)
-- ARGV[2..]: job ids
-- Returns: flat pairs of id, the state it was deleted from ('ready', 'delayed',
--   'in_flight', 'dead'), or 'missing' (not found; with 'dead': not dead-lettered).
--   A running job (in_flight) loses its lease here: its consumer's later outcome finds no
--   lease and is dropped as "missed" (settle.lua), its heartbeat drops it as lost, and
--   reclaim never sees it, so it is neither retried nor dead-lettered.
--   Cost: O(log n) per job, but a ready job is removed from its list with LREM, O(length
--   of that list): the price of deleting from the middle of a queue.

local only = ARGV[1]
local out = {}
local deleted = 0

-- Where job `id` is, out of it; returns the state it was in, or nil.
local function take(id, env)
  if redis.call('ZREM', K.dead, id) == 1 then return 'dead' end
  if only == 'dead' then return nil end
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

for i = 2, #ARGV do
  local id = ARGV[i]
  local env = redis.call('HGET', K.jobs, id)
  local state = take(id, env)
  if state then
    redis.call('HDEL', K.jobs, id)
    forget({ id })
    deleted = deleted + 1
  end
  out[#out + 1] = id
  out[#out + 1] = state or 'missing'
end
count('deleted', deleted)
return out
