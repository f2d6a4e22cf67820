-- job_run_now: moves a delayed or dead-lettered job to the front of its ready list, for
-- `weir job run-now` and the UI.
--
-- KEYS: the queue's keys (lib.lua); touches delayed[1..3], dead, jobs, errors, deferrals,
--   ready[1..3], wake; reads lease and the batches.
-- ARGV[1]: job id
-- ARGV[2..4] (optional): where inline_find.lua saw the job waiting: its list's number, its
--   item and its index from the list's head (lib.lua's find_inline)
-- Returns: the state the job was in: 'delayed' (moved, its attempt count kept: a retry
--   runs now instead of later), 'dead' (moved with a fresh attempt count, as a requeue),
--   'in_flight', 'done' (a completed job kept) or 'ready' (left as it is), or 'missing'.
--   KEYS end with the job records (lib.lua's records).
--   An id not in jobs may be an inline job (lib.lua's items), which is only ever ready or
--   leased: it is looked for in the lease and the batches (the jobs in flight), else
--   taken as waiting where ARGV[2..4] say the search saw it (lib.lua's find_inline), and
--   left as it is.

local id = ARGV[1]
-- 0. before the first write: the keys written
records()
expect(K.dead, 'zset')
expect_each(K.delayed, 'zset')
expect_each(K.ready, 'list')
expect_each({ K.jobs, K.errors, K.deferrals }, 'hash')
local env = redis.call('HGET', K.jobs, id)
if not env then
  local f = find_inline({ [id] = true }, hint(id, 2))[id]
  if not f then return 'missing' end
  if f[2] == K.lease then return 'in_flight' end
  return 'ready'
end
local state = nil
if redis.call('ZREM', K.dead, id) == 1 then
  revive(id, env, true, true)
  state = 'dead'
else
  for p = 1, 3 do
    if not state and redis.call('ZREM', K.delayed[p], id) == 1 then
      redis.call('LPUSH', K.ready[p], id)
      state = 'delayed'
    end
  end
end
if state then
  wake('run-now')
  return state
end
if redis.call('ZSCORE', K.lease, id) then return 'in_flight' end
if redis.call('EXISTS', K.batches) == 1 and find_in_batches({ [id] = true })[id] then return 'in_flight' end
if redis.call('ZSCORE', K.done, id) then return 'done' end
return 'ready'
