-- enqueue: adds a batch of jobs; caller-chosen ids that already exist, and jobs whose
-- unique key is taken, are refused. This is the public `weir_enqueue` of the Functions
-- library too (docs/protocol.md states the contract; change both together).
--
-- KEYS: the queue's keys (lib.lua); touches ready[1..3], delayed[1..3], jobs, counters,
--   wake, and the unique keys (K.unique .. key); then, optionally, KEYS[20] (NQ + 1): the
--   queue registry (SET of queue names, keys.rs's QUEUES). On a Redis Cluster the registry
--   lives in a slot of its own, so the caller leaves it out and adds the name by itself.
-- ARGV: one or more sections, each of jobs that share their options:
--   priority (0 high, 1 normal, 2 low), delay (ms, >= 0), run_at (epoch ms, 0 = none),
--   unique (1 = ids chosen by the caller: check each; 0 = ids weir generated, unique by
--   construction: stored in bulk), unique_for (ms, 0 = none: the window of each job's
--   unique key, which its envelope's "unique_key" field names), n (jobs in the section),
--   then n pairs of id, envelope (JSON, header as envelope.rs writes it; or, in a
--   section of normal priority, the compact form: lib.lua's header).
-- Returns: the ids not enqueued (array): a job with that id exists, or the job's unique
--   key is taken (a job with that key was enqueued within its window).
-- Errors (nothing is stored): 'ERR weir enqueue: ...' for a malformed section or an
--   envelope whose header does not match its id and priority, that lacks the
--   unique_key a section with unique_for needs, or whose "key" (optional: the job's key
--   for per-key limits) is not a token; or, with the registry given, a KEYS[1] whose
--   queue name (its hash tag) is not a queue name of keys.rs.
--
-- A unique key, once taken, is held until its window ends: unique_for after the job is
-- due (now + delay, or run_at), whether the job is waiting, running or done. Only a
-- dead-lettered job frees it early (lib.lua's bury).
--
-- A batch of generated ids that are all ready now, without windows, does not come here:
-- `enqueue_plain` (scripts/enqueue.rs) stores it with plain commands in MULTI/EXEC. This
-- file is the source of truth; tests/scripts/enqueue.rs checks both paths against one
-- expected state (`routed()`), so a change here is a change there.

local function fail(msg)
  return redis.error_reply('ERR weir enqueue: ' .. msg)
end

-- A whole number >= 0 (from its argument string), or nil.
local function whole(arg)
  local x = tonumber(arg)
  if x and x >= 0 and x == math.floor(x) and x <= MAX_WHOLE then return x end
  return nil
end

-- Ids and unique keys: 1 to 128 characters of keys.rs's alphabet.
local function token(s)
  return #s <= 128 and string.find(s, '^[%w_.:%-]+$') ~= nil
end

-- Whether the header of `env` (from position `from` to the first ',"payload":', which
-- ends it: see lib.lua's unique_key) has no "key" field, or a token in one, so that
-- scripts can read the key as they read unique_key: a plain find up to the next quote.
-- Plain finds and an anchored match, no new strings: about 0.25 us per job without a key
-- and 0.5 us with one (Redis 7.0, 200k envelopes of 150 bytes; cutting the header out
-- first cost 1.2 and 2.5 us). A job without a key has its whole envelope scanned for
-- the field name: linear in its size, as Redis's own handling of the argument is.
local function key_ok(env, from)
  local _, f = string.find(env, ',"key":', from, true)
  if not f then return true end
  local stop = string.find(env, ',"payload":', from, true)
  if stop and f > stop then return true end
  local s, e = string.find(env, '^"[%w_.:%-]+",', f + 1)
  return s ~= nil and e - s - 2 <= 128
end

-- Whether a compact envelope names none of the fields its form implies (lib.lua's header):
-- one that did would be read one way by the scripts (attempt 0, 5 attempts, normal
-- priority) and another by the consumer, and written back with the field twice. Plain
-- finds in its header, cut at the first ',"payload":' (the fields' quotes cannot stand
-- unescaped inside a string): the header only, whatever the payload's size.
local IMPLIED = {',"attempt":', ',"max_attempts":', ',"priority":', ',"enqueued_at":'}
local function compact_ok(env)
  local stop = string.find(env, ',"payload":', 1, true)
  local head = stop and string.sub(env, 1, stop) or env
  for _, field in ipairs(IMPLIED) do
    if string.find(head, field, 1, true) then return false end
  end
  return true
end

-- 0. the name the registry would get (step 4) must be a queue name (keys.rs): a caller
--    of weir_enqueue with hostile keys must not plant a name the readers cannot show
local registered = nil
if KEYS[NQ + 1] then
  registered = string.match(KEYS[1], '^weir:{([^}~]*)')
  if not (registered and token(registered)) then
    return fail('the queue name of KEYS[1] must be 1 to 128 characters of [A-Za-z0-9_.:-]')
  end
end

-- 1. check every section and envelope header before anything is written (a script that
--    fails half way keeps its writes); note each windowed job's unique key (by the
--    position of its id in ARGV)
local ukeys = {}
local i = 1
while i <= #ARGV do
  local p, n = whole(ARGV[i]), whole(ARGV[i + 5])
  if not (p and p <= 2) then return fail('priority must be 0, 1 or 2 (argument ' .. i .. ')') end
  if not (whole(ARGV[i + 1]) and whole(ARGV[i + 2]) and whole(ARGV[i + 4])) then
    return fail('delay, run_at and unique_for must be whole numbers >= 0 (section at argument ' .. i .. ')')
  end
  if not (ARGV[i + 3] == '0' or ARGV[i + 3] == '1') then
    return fail('unique must be 0 or 1 (section at argument ' .. i .. ')')
  end
  if not (n and i + 5 + 2 * n <= #ARGV) then
    return fail('the section at argument ' .. i .. ' announces more jobs than it holds')
  end
  local head = '^{"attempt":%d+,"max_attempts":%d+,"priority":' .. p .. ',"enqueued_at":%d+,"id":"'
  -- or, at normal priority, the compact form's opening (lib.lua's header: a compact
  -- envelope carries no other priority)
  local compact = p == 1
  local window = whole(ARGV[i + 4]) > 0
  for j = i + 6, i + 5 + 2 * n, 2 do
    local id, env = ARGV[j], ARGV[j + 1]
    if not token(id) then return fail('invalid job id ' .. string.format('%q', string.sub(id, 1, 200))) end
    local _, e = string.find(env, head)
    local compact_form = false
    if not e and compact then
      _, e = string.find(env, COMPACT)
      compact_form = e ~= nil
    end
    if not e or string.sub(env, e + 1, e + #id + 1) ~= id .. '"' then
      return fail('the envelope of job ' .. id .. ' does not open with the header for its id and priority')
    end
    if compact_form and not compact_ok(env) then
      return fail('the compact envelope of job ' .. id
        .. ' names a field its form implies (attempt, max_attempts, priority, enqueued_at): write the full form')
    end
    if window then
      local key = unique_key(env, e)
      if not (key and token(key)) then
        return fail('job ' .. id .. ' has unique_for but its envelope has no valid unique_key')
      end
      ukeys[j] = key
    end
    if not key_ok(env, e) then
      return fail('job ' .. id .. ' has a "key" that is not 1 to 128 characters of A-Z a-z 0-9 _ . : -')
    end
  end
  i = i + 6 + 2 * n
end

-- 1b. the keys the sections write: a key of another type is refused before any write
--     (TYPE calls for the lists or sets the call uses, the jobs' hash, the registry, and a
--     read of the counters: about 2 us a call)
expect(K.jobs, 'hash')
do
  local lists, sets = {}, {}
  local j = 1
  while j <= #ARGV do
    local q = tonumber(ARGV[j]) + 1
    if tonumber(ARGV[j + 1]) > 0 or tonumber(ARGV[j + 2]) > 0 then sets[q] = true else lists[q] = true end
    j = j + 6 + 2 * tonumber(ARGV[j + 5])
  end
  for q = 1, 3 do
    if lists[q] then expect(K.ready[q], 'list') end
    if sets[q] then expect(K.delayed[q], 'zset') end
  end
end
if KEYS[NQ + 1] then expect(KEYS[NQ + 1], 'set') end
counters_ready({ 'enqueued' })

local dups, nd = {}, 0
local added = 0
local now = nil

local function dup(id)
  nd = nd + 1
  dups[nd] = id
end

-- Takes the unique key of the job at ARGV[j] for `ttl` ms; false if another job holds it.
local function take(j, ttl)
  return redis.call('SET', K.unique .. ukeys[j], ARGV[j], 'NX', 'PX', ttl) ~= false
end

-- Stores a section's envelopes; returns the ids stored, in order. `ttl`: how long unique
-- keys are held (0 = the section has no window).
local function store(first, n, check, ttl)
  local ids, ni = {}, 0
  if ttl > 0 then
    for j = first, first + 2 * n - 1, 2 do
      local id, env = ARGV[j], ARGV[j + 1]
      if (check and redis.call('HEXISTS', K.jobs, id) == 1) or not take(j, ttl) then
        dup(id)
      else
        redis.call('HSET', K.jobs, id, env)
        ni = ni + 1
        ids[ni] = id
      end
    end
    return ids
  end
  if check then
    for j = first, first + 2 * n - 1, 2 do
      if redis.call('HSETNX', K.jobs, ARGV[j], ARGV[j + 1]) == 1 then
        ni = ni + 1
        ids[ni] = ARGV[j]
      else
        dup(ARGV[j])
      end
    end
    return ids
  end
  local pairs_ = {}
  for j = first, first + 2 * n - 1, 2 do
    ni = ni + 1
    ids[ni] = ARGV[j]
    pairs_[2 * ni - 1] = ARGV[j]
    pairs_[2 * ni] = ARGV[j + 1]
  end
  call_chunked('HSET', K.jobs, pairs_)
  return ids
end

-- 2. each section: store the envelopes, then push the ids to ready or delayed in bulk
i = 1
while i <= #ARGV do
  local p = tonumber(ARGV[i]) + 1
  local delay, run_at = tonumber(ARGV[i + 1]), tonumber(ARGV[i + 2])
  local window, n = tonumber(ARGV[i + 4]), tonumber(ARGV[i + 5])
  local due = nil
  if run_at > 0 or delay > 0 or window > 0 then
    now = now or now_ms()
    due = run_at
    if due == 0 then due = now + delay end
  end
  local ttl = 0
  if window > 0 then ttl = window + math.max(due - now, 0) end
  local ids = store(i + 6, n, ARGV[i + 3] == '1', ttl)
  added = added + #ids
  if #ids > 0 then
    if run_at > 0 or delay > 0 then
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
  i = i + 6 + 2 * n
end

-- 3. wake idle consumers once per call
count('enqueued', added)
if added > 0 then wake('enqueue') end

-- 4. the queue registry (`weir queues`), if given: one SADD per call; the name is the
--    hash tag, up to a partition's `~` (a partition registers its queue)
if registered then redis.call('SADD', KEYS[NQ + 1], registered) end
return dups
