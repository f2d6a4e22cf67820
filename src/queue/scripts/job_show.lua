-- job_show: one job, wherever it is, for `weir job show` and the UI.
--
-- KEYS: the queue's keys (lib.lua); reads jobs, lease, lease_tokens, started, dead,
--   delayed[1..3], errors, deferrals, the batches.
--   Then the job records (lib.lua's records): history, done and results.
-- ARGV[1]: job id
-- ARGV[2..4] (optional): where inline_find.lua saw the job waiting: its list's number, its
--   item and its index from the list's head (lib.lua's find_inline)
-- Returns: { now_ms, state, envelope (or false), score (or false), last error (or false),
--   start mark (or false), lease token (or false), deferral record (or false), run
--   history (or false: lib.lua's run_history), result (or false: a completed job kept
--   with its handler's result) }
--   state: 'in_flight' (score: lease deadline), 'dead' (score: dead-lettered at), 'done'
--   (a completed job kept on request; score: completed at),
--   'delayed' (score: due time), 'ready' (an envelope in no lease or set: it waits in a
--   ready list or among the suspects; found without scanning them), or 'missing'.
--   lease token: the fetch token of an extended lease (else the lease's first deadline
--   was its token).
--   An id in no set and not in jobs may be an inline job (lib.lua's items), ready or
--   leased: it is looked for in the lease and the batches (lib.lua's find_inline: the
--   jobs in flight), else shown waiting as ARGV[2..4] say the search saw it, and its
--   per-lease records are read by its item. Cost: O(log n) for an id in jobs; for any
--   other, O(jobs in flight).

local id = ARGV[1]
records()
expect(K.results, 'hash')
local now = now_ms()
local env = redis.call('HGET', K.jobs, id)
-- the field of its per-lease records: its id, or its item for an inline job
local item = id
local state, score = 'missing', false
local lease = redis.call('ZSCORE', K.lease, id)
local dead = redis.call('ZSCORE', K.dead, id)
local done = redis.call('ZSCORE', K.done, id)
if lease then
  state, score = 'in_flight', tonumber(lease)
elseif dead then
  state, score = 'dead', tonumber(dead)
elseif done then
  state, score = 'done', tonumber(done)
else
  for p = 1, 3 do
    local due = redis.call('ZSCORE', K.delayed[p], id)
    if due then state, score = 'delayed', tonumber(due) end
  end
  if state == 'missing' and env then
    -- (leased in a batch: lib.lua's batch leases)
    local b = redis.call('EXISTS', K.batches) == 1 and find_in_batches({ [id] = true })[id]
    if b then state, score = 'in_flight', b[2] else state = 'ready' end
  end
end
if state == 'missing' then
  local f = find_inline({ [id] = true }, hint(id, 2))[id]
  if f then
    item, env = f[1], f[1]
    if f[2] == K.lease then state, score = 'in_flight', f[3] else state = 'ready' end
  end
end
return { now, state, env or false, score, redis.call('HGET', K.errors, id),
  redis.call('HGET', K.started, item), redis.call('HGET', K.lease_tokens, item),
  redis.call('HGET', K.deferrals, id), redis.call('HGET', K.history, id),
  redis.call('HGET', K.results, id) }
