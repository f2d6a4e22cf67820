-- job_show: one job, wherever it is, for `weir job show` and the UI.
--
-- KEYS: the queue's keys (lib.lua); reads jobs, lease, lease_tokens, started, dead,
--   delayed[1..3], errors, deferrals; for an id not in jobs, suspects and ready[1..3].
-- ARGV[1]: job id
-- Returns: { now_ms, state, envelope (or false), score (or false), last error (or false),
--   start mark (or false), lease token (or false), deferral record (or false) }
--   state: 'in_flight' (score: lease deadline), 'dead' (score: dead-lettered at),
--   'delayed' (score: due time), 'ready' (an envelope in no lease or set: it waits in a
--   ready list or among the suspects; found without scanning them), or 'missing'.
--   lease token: the fetch token of an extended lease (else the lease's first deadline
--   was its token).
--   An id in no set and not in jobs may be an inline job (lib.lua's items), ready or
--   leased: it is looked for by a scan of the lease, the suspects and the ready lists,
--   SCAN items a call, and its per-lease records are read by its item. Cost: O(n) in the
--   queue's size, paid only for such an id (an inline job, or a missing one); any other
--   id costs O(log n).

-- Finds inline jobs by id: a scan of the lease, then the suspects and the ready lists,
-- SCAN items a call, that stops once every id is found. `wanted`: id -> anything but
-- false. Returns id -> { item, the key holding it, lease deadline (leased only) }.
local SCAN = 1000
local function find_inline(wanted)
  local found, left = {}, 0
  for _ in pairs(wanted) do left = left + 1 end
  if left == 0 then return found end
  local function hit(item, key, score)
    if not is_inline(item) then return false end
    local id = item_id(item)
    if id and wanted[id] and not found[id] then
      found[id] = { item, key, score }
      left = left - 1
    end
    return left == 0
  end
  local n = redis.call('ZCARD', K.lease)
  for at = 0, n - 1, SCAN do
    local got = redis.call('ZRANGE', K.lease, at, at + SCAN - 1, 'WITHSCORES')
    for i = 1, #got, 2 do
      if hit(got[i], K.lease, tonumber(got[i + 1])) then return found end
    end
  end
  for _, key in ipairs({ K.suspects, K.ready[1], K.ready[2], K.ready[3] }) do
    local len = redis.call('LLEN', key)
    for at = 0, len - 1, SCAN do
      local got = redis.call('LRANGE', key, at, at + SCAN - 1)
      for i = 1, #got do
        if hit(got[i], key) then return found end
      end
    end
  end
  return found
end

local id = ARGV[1]
local now = now_ms()
local env = redis.call('HGET', K.jobs, id)
-- the field of its per-lease records: its id, or its item for an inline job
local item = id
local state, score = 'missing', false
local lease = redis.call('ZSCORE', K.lease, id)
local dead = redis.call('ZSCORE', K.dead, id)
if lease then
  state, score = 'in_flight', tonumber(lease)
elseif dead then
  state, score = 'dead', tonumber(dead)
else
  for p = 1, 3 do
    local due = redis.call('ZSCORE', K.delayed[p], id)
    if due then state, score = 'delayed', tonumber(due) end
  end
  if state == 'missing' and env then state = 'ready' end
end
if state == 'missing' then
  local f = find_inline({ [id] = true })[id]
  if f then
    item, env = f[1], f[1]
    if f[2] == K.lease then state, score = 'in_flight', f[3] else state = 'ready' end
  end
end
return { now, state, env or false, score, redis.call('HGET', K.errors, id),
  redis.call('HGET', K.started, item), redis.call('HGET', K.lease_tokens, item),
  redis.call('HGET', K.deferrals, id) }
