-- jobs_page: one page of a queue's jobs in one state, for `weir jobs` and the UI. The cost
-- is bounded by the window, whatever the queue's size: ranges on the lists and sets, never
-- a scan of them.
--
-- KEYS: the queue's keys (lib.lua); reads ready[1..3], suspects, delayed[1..3], lease,
--   dead, jobs, errors, started.
--   Then the job records (lib.lua's records): history, done and results.
-- ARGV[1]: state: 'ready', 'delayed', 'in_flight', 'dead' or 'done' (completed jobs kept)
-- ARGV[2..4]: the cursor, offsets where the page starts (0 0 0 = the first page):
--   ready: ARGV[2] is a rank in suspects ++ high ++ normal ++ low (fetch order);
--   delayed: one rank per priority, high, normal, low (the page merges them by due time);
--   in_flight: ARGV[2] is a rank by lease deadline (the jobs of batch leases after the
--   others); dead and done: a rank newest first.
-- ARGV[5]: the most jobs to return (>= 1)
-- ARGV[6]: the most entries to look at (>= ARGV[5]): with a kind filter, a page may end
--   with fewer jobs than asked for, and a cursor to go on from
-- ARGV[7]: the kind to keep ('' = every kind)
-- ARGV[8]: the job key to keep ('' = any job, with a key or not; lib.lua's job_key)
-- Returns: { now_ms, more, o1, o2, o3, then per job: id, envelope (or false), score (due
--   time, lease deadline, dead-lettered-at or completed-at ms; false for ready), last
--   error (or false; on a done page, where no job has one, its result or false),
--   start mark (or false), segment (0 suspect, 1..3 priority of the list or set it is in) }
--   more: 1 if entries remain past the returned offsets (the next page's cursor).
--   An inline job (lib.lua's items: ready and in_flight pages) is reported by the id its
--   envelope holds (false if it holds none) with the item as its envelope; its start mark
--   is read by the item, its last error by the id.

local state = ARGV[1]
records()
if state == 'done' then expect(K.results, 'hash') end
local o = { tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]) }
local limit, window, kind = tonumber(ARGV[5]), tonumber(ARGV[6]), ARGV[7]
local key = ARGV[8] or ''
local now = now_ms()

-- Entries looked at, in page order: { item, score, segment }.
local seen = {}
local more = 0

-- 1. the window of entries, by state
if state == 'ready' then
  local lists = { K.suspects, K.ready[1], K.ready[2], K.ready[3] }
  local skip, total = o[1], 0
  for s = 1, 4 do
    local len = redis.call('LLEN', lists[s])
    total = total + len
    if skip >= len then
      skip = skip - len
    elseif #seen < window then
      local got = redis.call('LRANGE', lists[s], skip, skip + window - #seen - 1)
      for i = 1, #got do seen[#seen + 1] = { got[i], false, s - 1 } end
      skip = 0
    end
  end
  o[1] = o[1] + #seen
  if total > o[1] then more = 1 end
elseif state == 'delayed' then
  -- the next `window` of each priority, merged by due time (ties: higher priority first)
  local heads = {}
  for p = 1, 3 do
    heads[p] = redis.call('ZRANGE', K.delayed[p], o[p], o[p] + window - 1, 'WITHSCORES')
  end
  local at = { 1, 1, 1 }
  while #seen < window do
    local best = nil
    for p = 1, 3 do
      local score = heads[p][at[p] + 1]
      if score and (not best or tonumber(score) < tonumber(heads[best][at[best] + 1])) then best = p end
    end
    if not best then break end
    seen[#seen + 1] = { heads[best][at[best]], tonumber(heads[best][at[best] + 1]), best }
    at[best] = at[best] + 2
    o[best] = o[best] + 1
  end
  for p = 1, 3 do
    if redis.call('ZCARD', K.delayed[p]) > o[p] then more = 1 end
  end
elseif state == 'in_flight' then
  -- the leases by deadline, then the jobs of batch leases (lib.lua's batch leases), a
  -- batch after another by deadline, each in fetch order
  local got = redis.call('ZRANGE', K.lease, o[1], o[1] + window - 1, 'WITHSCORES')
  for i = 1, #got, 2 do seen[#seen + 1] = { got[i], tonumber(got[i + 1]), 0 } end
  local total = redis.call('ZCARD', K.lease)
  local skip = math.max(o[1] - total, 0)
  local batches = redis.call('ZRANGE', K.batches, 0, -1, 'WITHSCORES')
  for j = 1, #batches, 2 do
    local list = batch_key(batches[j])
    local len = redis.call('LLEN', list)
    total = total + len
    if skip >= len then
      skip = skip - len
    elseif #seen < window then
      local items = redis.call('LRANGE', list, skip, skip + window - #seen - 1)
      for i = 1, #items do seen[#seen + 1] = { items[i], tonumber(batches[j + 1]), 0 } end
      skip = 0
    end
  end
  o[1] = o[1] + #seen
  if total > o[1] then more = 1 end
else
  local key, cmd = K.lease, 'ZRANGE'
  if state == 'dead' then key, cmd = K.dead, 'ZREVRANGE' end
  if state == 'done' then key, cmd = K.done, 'ZREVRANGE' end
  local got = redis.call(cmd, key, o[1], o[1] + window - 1, 'WITHSCORES')
  for i = 1, #got, 2 do seen[#seen + 1] = { got[i], tonumber(got[i + 1]), 0 } end
  o[1] = o[1] + #seen
  if redis.call('ZCARD', key) > o[1] then more = 1 end
end

-- 2. their ids and envelopes: an inline job is its own envelope and holds its id, an id
--    has its envelope in K.jobs (delayed and dead hold ids only); keep those of the kind
--    and key asked for, up to the limit (the cursor then stops after the last one kept, so the
--    next page goes on from there)
local items = state == 'ready' or state == 'in_flight'
local ids, envs = {}, {}
local hashed, at = {}, {}
for i = 1, #seen do
  local item = seen[i][1]
  if items and is_inline(item) then
    ids[i], envs[i] = item_id(item) or false, item
  else
    ids[i] = item
    hashed[#hashed + 1] = item
    at[#hashed] = i
  end
end
if #hashed > 0 then
  local got = hmget_chunked(K.jobs, hashed)
  for k = 1, #hashed do envs[at[k]] = got[k] end
end
local out = { now, 0, 0, 0, 0 }
local kept = 0
for i = 1, #seen do
  local env = envs[i]
  if (kind == '' or (env and env_kind(env) == kind)) and (key == '' or (env and job_key(env) == key)) then
    if kept == limit then
      -- a page of `limit` jobs is full: rewind the cursor to this entry
      more = 1
      local back = #seen - i + 1
      if state == 'delayed' then
        for j = i, #seen do o[seen[j][3]] = o[seen[j][3]] - 1 end
      else
        o[1] = o[1] - back
      end
      break
    end
    kept = kept + 1
    local id = ids[i]
    out[#out + 1] = id
    out[#out + 1] = env or false
    out[#out + 1] = seen[i][2] or false
    out[#out + 1] = id and redis.call('HGET', state == 'done' and K.results or K.errors, id)
    out[#out + 1] = redis.call('HGET', K.started, seen[i][1])
    out[#out + 1] = seen[i][3]
  end
end
out[2], out[3], out[4], out[5] = more, o[1], o[2], o[3]
return out
