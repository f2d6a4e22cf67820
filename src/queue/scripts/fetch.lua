-- fetch: promotes due delayed jobs, pops up to N jobs (at most one suspect first, then
-- ready jobs highest priority first) and leases them.
--
-- KEYS: the queue's keys (lib.lua); touches suspects, ready[1..3], delayed[1..3], jobs,
--   lease, paused, counters; reads settings (the global limits).
--   KEYS[NQ + 1]: STRING, the global rate's GCRA state (gcra_tat), expiring once past
--   KEYS[NQ + 2]: the prefix (not a key) of the per-key limits' state (key_limits)
-- ARGV[1]: N, the most jobs to return (>= 1)
-- ARGV[2]: visibility timeout (ms): lease deadline = Redis TIME + this
-- ARGV[3]: '1' when the consumer adapts a limit per key (--adaptive-per-key): each key's
--   live shares (key_shares.lua) are a concurrency limit of the key (see key_limits)
-- Returns: { deadline_ms, next_due_in_ms, state, suspects, ids, envelope1, envelope2, ... }
--   deadline_ms: the lease deadline of every returned job: the lease's token, which stays
--     the same however often the lease is extended; 0 if none;
--   next_due_in_ms: with no job returned, or with the last ready job returned (256 below),
--     ms until the next delayed job is due (0 = none), or, when the global rate granted
--     nothing, until it grants the next job;
--   state: 1 when the queue is paused (nothing is popped then); otherwise the limits
--     as bits (global_grant, admit): 2 a global rate is set, 4 a global concurrency is
--     set, 8 the global rate cut this call short, 16 the global concurrency did, 32
--     per-key limits held some popped jobs back (the queue may hold more ready), 64
--     jobs are parked waiting for a slot of their key (they come back when one frees),
--     128 a global or per-key concurrency is set (so a settle that ends leases wakes the
--     consumers waiting for a slot: settle.lua's concurrency_limited), 256 this call took
--     the last ready job: the ready lists and suspects are empty now, so the caller may
--     wait for a wake message (every write that readies a job publishes one) or the next
--     due time instead of asking again;
--   suspects: how many of the returned jobs, at the front, are suspects (0 or 1): jobs
--     that were running when their consumer died (see reclaim.lua). A consumer runs them
--     alone, one at a time, so that a crash is charged to the job that caused it; one per
--     call spreads them over calls and consumers;
--   ids: the ids of the envelopes that follow, in the same order, joined by newlines (one
--     string: a reply value per job costs Redis more than the join); an empty line for an
--     inline job (lib.lua's items): its lease is its envelope, which names it. weir's ids never hold
--     a newline; should one pushed by hand hold one, the pieces no longer match the
--     envelopes in number, and the caller pairs what it can by the ids inside them.

-- Rates in settings are written as Rate::spec writes them: a count per s, m or h. Returns
-- the emission interval (ms per job) and the count, or nil.
local PERIOD_MS = { s = 1000, m = 60000, h = 3600000 }

local function parse_rate(spec)
  local count, unit = string.match(spec or '', '^([%d%.]+)/([smh])$')
  count = tonumber(count)
  -- (a count so small that one job's interval passes 2^40 ms, 35 years, is no rate: its
  -- state's expiry would be a number Redis refuses, after the call's writes)
  if not count or count <= 0 or PERIOD_MS[unit] / count > 2 ^ 40 then return nil end
  return PERIOD_MS[unit] / count, count
end

-- A GCRA state string: '<tat> <spec>' (the theoretical arrival time, ms, and the rate and
-- burst it was kept under: a changed rate starts afresh). Returns the TAT, at least `now`.
local function gcra_tat(state, spec, now)
  local kept, kept_spec = string.match(state or '', '^(%S+) (.*)$')
  if kept_spec == spec then return math.max(tonumber(kept) or now, now) end
  return now
end

local function gcra_store(key, tat, spec, now)
  redis.call('SET', key, string.format('%.3f ', tat) .. spec, 'PX', math.ceil(tat - now) + 1)
end

-- The queue's limit settings, one read per call: the global ones and the per-key ones.
local LIMIT_FIELDS = { 'global_rate', 'global_burst', 'global_concurrency', 'key_rate', 'key_burst',
  'key_concurrency', 'key_overrides' }

-- The global limits (`weir limits set --global-rate/--global-concurrency`), `s` as read
-- from LIMIT_FIELDS, for a call asking for `n` jobs at `now`. Returns { n = how many it
-- may lease (0..n), wait = with none granted by the rate, ms until it grants one, bits =
-- as in the header, take = records that k jobs were leased }.
--   global rate: GCRA over the whole fleet, its state in `state` (gcra_tat): each job
--   moves TAT on by the emission interval T = period / count, and a call takes at most
--   what keeps TAT within burst * T of now.
--   global concurrency: the queue's leases are its permits: at most C jobs leased (fetched
--   and not yet settled) at once, fleet-wide. The settle gives them back; a killed
--   consumer's leases expire and are reclaimed, so its permits come back within a lease.
local function global_grant(state, s, n, now)
  local g = { n = n, wait = 0, bits = 0, take = function(_) end }
  if not s[1] and not s[3] then return g end
  local c = tonumber(s[3])
  if c then
    g.bits = g.bits + 4
    local free = math.max(c - redis.call('ZCARD', K.lease), 0)
    if free < g.n then g.n, g.bits = free, g.bits + 16 end
  end
  local t = parse_rate(s[1])
  if t then
    g.bits = g.bits + 2
    local tau = math.max(tonumber(s[2]) or 1, 1) * t
    local spec = s[1] .. ' ' .. (s[2] or '1')
    local tat = gcra_tat(redis.call('GET', state), spec, now)
    local free = math.max(math.floor((now + tau - tat) / t + 1e-9), 0)
    if free < g.n then
      g.n, g.bits = free, g.bits + 8
      if free == 0 then g.wait = math.max(math.ceil(tat + t - tau - now), 1) end
    end
    g.take = function(k)
      if k > 0 then gcra_store(state, tat + k * t, spec, now) end
    end
  end
  return g
end

-- Per-key limits (`weir limits set --per-key-rate/--per-key-concurrency/--key`): each job
-- key (the envelope's "key": a tenant, a customer, a destination) is limited on its own,
-- so a key at its limit holds back only its own jobs. Their state lives under the prefix
-- `p` (KEYS[NQ + 2]), each key's under its own names:
--   p .. 'rate:' .. key     STRING  the key's GCRA state (gcra_tat), expiring when past
--   p .. 'running:' .. key  SET     ids of the key's jobs leased: a member no longer in
--                                   K.lease (settled, reclaimed) is pruned when counted,
--                                   so nothing else has to keep it; extended leases count;
--                                   kept while the key has a concurrency limit (or, with
--                                   auto, always), gone an hour after its last add
--   p .. 'parked:' .. key   LIST    ids held back by the key's concurrency, oldest first
--   p .. 'parked'           ZSET    keys with parked jobs -> when last looked at (ms)
--   p .. 'reserved'         HASH    id -> 1: a job the key's rate gave a later start
--   p .. 'throttled'        ZSET    key -> jobs held back so far (the top keys are shown)
--   p .. 'auto:' .. key     HASH    consumer -> '<share> <expires>': the adaptive per-key
--                                   limiters' shares (key_shares.lua); for the consumers
--                                   that adapt per key, their live sum is one more
--                                   concurrency limit of the key (the lower one holds)
-- A job over its key's rate is given the key's next free start: it goes to delayed, due
-- then, with that permit reserved (so it is not held back again when it comes due). A job
-- over its key's concurrency is parked: to delayed for a lease at most, and on the key's
-- parked list, from which a later fetch takes it back to the front of ready as soon as
-- the key has a free slot. Neither charges an attempt, and both stay visible, delayed, to
-- `weir jobs`, `weir job show` and delete. Suspects are never held back.
local PARKED_LOOKS = 32
local THROTTLED_KEPT = 1000
local RUNNING_KEPT_MS = 3600000

local function key_limits(p, s, auto, now)
  if not s[4] and not s[6] and not s[7] and not auto then return nil end
  -- auto: every leased job of a key is counted in its running set (a key's first share
  -- may come at any time, and must then find its jobs already counted)
  local L = { p = p, by = {}, held = 0, auto = auto }
  -- The sum of key k's live adaptive shares (nil: none); expired ones are removed.
  local function shares(k)
    local h = p .. 'auto:' .. k
    local v = redis.call('HGETALL', h)
    local sum, stale = nil, {}
    for i = 1, #v, 2 do
      local share, expires = string.match(v[i + 1], '^(%d+) (%d+)$')
      if share and tonumber(expires) >= now then
        sum = (sum or 0) + tonumber(share)
      else
        stale[#stale + 1] = v[i]
      end
    end
    if #stale > 0 then redis.call('HDEL', h, unpack(stale)) end
    return sum
  end
  -- The limits of key `k`, with the state this call keeps for it.
  function L.of(k)
    local c = L.by[k]
    if c then return c end
    local rate, burst, conc = s[4], s[5], tonumber(s[6])
    if s[7] then
      local o = redis.call('HMGET', K.settings, 'key_rate:' .. k, 'key_concurrency:' .. k)
      if o[1] then rate, burst = o[1], nil end
      if o[2] then conc = tonumber(o[2]) end
    end
    if auto then
      local a = shares(k)
      if a then conc = math.min(conc or a, a) end
    end
    c = { conc = conc, leased = {} }
    local t, count = parse_rate(rate)
    if t then
      c.t = t
      c.spec = rate .. ' ' .. (burst or '')
      c.tau = (tonumber(burst) or math.max(math.ceil(count / 10), 1)) * t
    end
    L.by[k] = c
    return c
  end
  -- How many of key k's jobs are leased (pruning the members whose lease ended).
  function L.running(k)
    local c = L.of(k)
    if c.running then return c.running end
    local set = p .. 'running:' .. k
    local ids = redis.call('SMEMBERS', set)
    local n = 0
    if #ids > 0 then
      local scores = redis.call('ZMSCORE', K.lease, unpack(ids))
      local gone = {}
      for i = 1, #ids do
        if scores[i] then n = n + 1 else gone[#gone + 1] = ids[i] end
      end
      if #gone > 0 then call_chunked('SREM', set, gone) end
    end
    c.running = n
    return n
  end
  return L
end

-- Takes parked jobs back to the front of ready for keys with free slots: the keys looked
-- at longest ago first, at most PARKED_LOOKS of them per call.
local function unpark(L, now)
  local keys = redis.call('ZRANGE', L.p .. 'parked', 0, PARKED_LOOKS - 1)
  for _, k in ipairs(keys) do
    local c = L.of(k)
    local free = c.conc and (c.conc - L.running(k)) or math.huge
    local list = L.p .. 'parked:' .. k
    while free > 0 do
      local id = redis.call('LPOP', list)
      if not id then break end
      -- Only a job still parked (not deleted, run now, or come due meanwhile) comes back.
      for q = 1, 3 do
        if redis.call('ZREM', K.delayed[q], id) == 1 then
          redis.call('LPUSH', K.ready[q], id)
          free = free - 1
          break
        end
      end
    end
    if redis.call('EXISTS', list) == 1 then
      redis.call('ZADD', L.p .. 'parked', now, k)
    else
      redis.call('ZREM', L.p .. 'parked', k)
    end
  end
end

-- Whether job `id` (envelope `env`, `suspect` or not) may be leased now under its key's
-- limits; if not, it is held back (see key_limits) and false returned.
local function admit(L, id, env, suspect, now, vt)
  local k = job_key(env)
  if not k or suspect then
    if k then L.of(k).leased[#L.of(k).leased + 1] = id end
    return true
  end
  local c = L.of(k)
  local _, _, q = header(env)
  q = q or 2
  if c.conc and L.running(k) >= c.conc then
    redis.call('ZADD', K.delayed[q], now + vt, id)
    local list = L.p .. 'parked:' .. k
    redis.call('RPUSH', list, id)
    redis.call('PEXPIRE', list, vt)
    redis.call('ZADD', L.p .. 'parked', 'NX', now, k)
  elseif c.t and redis.call('HDEL', L.p .. 'reserved', id) == 0 then
    if not c.tat then c.tat = gcra_tat(redis.call('GET', L.p .. 'rate:' .. k), c.spec, now) end
    local tat = math.max(c.tat, now)
    local start = tat + c.t - c.tau
    c.tat = tat + c.t
    if start > now + 1e-9 then
      redis.call('ZADD', K.delayed[q], math.ceil(start), id)
      redis.call('HSET', L.p .. 'reserved', id, 1)
      redis.call('PEXPIRE', L.p .. 'reserved', math.ceil(c.tat - now) + vt)
    else
      if c.conc then c.running = L.running(k) + 1 end
      c.leased[#c.leased + 1] = id
      return true
    end
  else
    if c.conc then c.running = L.running(k) + 1 end
    c.leased[#c.leased + 1] = id
    return true
  end
  c.held = (c.held or 0) + 1
  L.held = L.held + 1
  return false
end

-- Writes what the call's admissions changed: the running sets, the rates' states, the
-- throttled counts.
local function key_commit(L, now, vt)
  for k, c in pairs(L.by) do
    if (c.conc or L.auto) and #c.leased > 0 then
      local set = L.p .. 'running:' .. k
      call_chunked('SADD', set, c.leased)
      -- a set no fetch adds to any more (the key went idle) goes by itself, long after
      -- its last lease (a lease may be extended for hours; this only bounds the garbage)
      redis.call('PEXPIRE', set, math.max(2 * vt, RUNNING_KEPT_MS))
    end
    if c.tat then gcra_store(L.p .. 'rate:' .. k, c.tat, c.spec, now) end
    if c.held then redis.call('ZINCRBY', L.p .. 'throttled', c.held, k) end
  end
  if L.held > 0 then
    count('key_throttled', L.held)
    local excess = redis.call('ZCARD', L.p .. 'throttled') - THROTTLED_KEPT
    if excess > 0 then redis.call('ZPOPMIN', L.p .. 'throttled', excess) end
  end
end

local n = arg_whole(1, 'N', 1)
local vt = arg_whole(2, 'the visibility timeout (ms)', 0)
local auto = ARGV[3] == '1'

-- 1. a paused queue hands out nothing; the global limits may grant fewer than N, or none;
--    under per-key limits, parked jobs of keys with free slots go back to ready first
if redis.call('EXISTS', K.paused) == 1 then return { 0, 0, 1, 0 } end
local now = now_ms()
local limits = hash_fields(K.settings, LIMIT_FIELDS)
-- Before the first write (promotion, or unpark below): the keys whose first touch would
-- come after one. The delayed sets are read before they are written, unless parked jobs
-- come back first. Six TYPE calls and a read of the counters: about 4 us a call.
expect_each(K.ready, 'list')
expect(K.suspects, 'list')
expect(K.jobs, 'hash')
expect(K.lease, 'zset')
counters_ready({ 'fetched', 'key_throttled' })
if limits[4] or limits[6] or limits[7] or auto then expect_each(K.delayed, 'zset') end
local grant = global_grant(KEYS[NQ + 1], limits, n, now)
if limits[3] or limits[6] or limits[7] then grant.bits = grant.bits + 128 end
if grant.n == 0 then return { 0, grant.wait, grant.bits, 0 } end
n = grant.n
local keyed = key_limits(KEYS[NQ + 2], limits, auto, now)
if keyed then
  unpark(keyed, now)
  keyed.parked = redis.call('EXISTS', keyed.p .. 'parked') == 1
  if keyed.parked then grant.bits = grant.bits + 64 end
end

-- 2. promote due delayed jobs, at most N per priority so one call stays bounded (all read
--    before any is written: a delayed set of another type fails the call before a write)
local dues = {}
for p = 1, 3 do
  dues[p] = redis.pcall('ZRANGEBYSCORE', K.delayed[p], '-inf', now, 'LIMIT', 0, n)
  if dues[p].err then expect(K.delayed[p], 'zset') end
end
for p = 1, 3 do
  local due = dues[p]
  if #due > 0 then
    call_chunked('ZREM', K.delayed[p], due)
    call_chunked('RPUSH', K.ready[p], due)
  end
end

-- 3. at most one suspect, then up to N ids in all, high before normal before low
local ids, ni = nil, 0
local suspect = redis.call('LPOP', K.suspects)
if suspect then
  ids, ni = { suspect }, 1
end
for p = 1, 3 do
  local want = n - ni
  if want <= 0 then break end
  local got = redis.call('LPOP', K.ready[p], want)
  if got then
    if ni == 0 then
      ids, ni = got, #got
    else
      for i = 1, #got do ids[ni + i] = got[i] end
      ni = ni + #got
    end
  end
end

-- 4. nothing ready (left): say when the next delayed job is due, so the fetcher sleeps
--    till then, or till a wake message
local function next_due_in()
  local next_due = 0
  for p = 1, 3 do
    local z = redis.call('ZRANGE', K.delayed[p], 0, 0, 'WITHSCORES')
    if z[2] then
      local d = math.max(tonumber(z[2]) - now, 1)
      if next_due == 0 or d < next_due then next_due = d end
    end
  end
  return next_due
end
if ni == 0 then return { 0, next_due_in(), grant.bits, 0 } end
-- It took the last ready job: the due time is read once the jobs held back by their keys'
-- limits (step 5) are in delayed too.
local emptied = ni < n and redis.call('EXISTS', K.suspects) == 0
if emptied then grant.bits = grant.bits + 256 end
local function due_after()
  if emptied then return next_due_in() end
  return 0
end

-- 5. load envelopes and lease: an inline job is its own envelope (lib.lua's items), an id
--    has its envelope in K.jobs; an id without one (purged meanwhile) is dropped, and,
--    under per-key limits, a job its key's limits hold back (see admit; an inline job
--    with a key is adopted first, so that it has a record by id to be held back by)
local deadline = now + vt
local envs, hashed, nh = {}, {}, 0
for i = 1, ni do
  local item = ids[i]
  if is_inline(item) then
    envs[i] = item
  else
    nh = nh + 1
    hashed[nh] = i
  end
end
if nh > 0 then
  local names = {}
  for k = 1, nh do names[k] = ids[hashed[k]] end
  local got = hmget_chunked(K.jobs, names)
  for k = 1, nh do envs[hashed[k]] = got[k] or false end
end
local suspects = 0
if suspect and envs[1] then suspects = 1 end
-- The score as a string, formatted once: a Lua number would be formatted per job.
local score = string.format('%d', deadline)
local lease = {}
local nl = 0
if not keyed then
  for i = 1, ni do
    if not envs[i] then break end
    lease[2 * i - 1] = score
    lease[2 * i] = ids[i]
    nl = i
  end
end
if nl < ni then
  -- keep the jobs that have an envelope (and are admitted), in order
  local kept_ids, kept_envs = {}, {}
  lease, nl = {}, 0
  for i = 1, ni do
    local item, env = ids[i], envs[i]
    if env and keyed and is_inline(item) and job_key(env) then
      item = adopt(item)
      env = item and env
    end
    if env and (not keyed or admit(keyed, item, env, i <= suspects, now, vt)) then
      nl = nl + 1
      lease[2 * nl - 1] = score
      lease[2 * nl] = item
      kept_ids[nl], kept_envs[nl] = item, env
    end
  end
  if keyed then
    key_commit(keyed, now, vt)
    if keyed.held > 0 then
      grant.bits = grant.bits + 32
      if not keyed.parked and redis.call('EXISTS', keyed.p .. 'parked') == 1 then
        grant.bits = grant.bits + 64
      end
    end
  end
  if nl == 0 then return { 0, due_after(), grant.bits, 0 } end
  ids, envs = kept_ids, kept_envs
  nh = nil
end
call_chunked('ZADD', K.lease, lease)
count('fetched', nl)
grant.take(nl)
-- One line per job: its id, or nothing for an inline job (its envelope names it).
local joined
if nh == 0 then
  joined = string.rep('\n', nl - 1)
else
  local names = {}
  for i = 1, nl do
    if is_inline(ids[i]) then names[i] = '' else names[i] = ids[i] end
  end
  joined = table.concat(names, '\n')
end
local next_due = due_after()
if nl <= CHUNK then return { deadline, next_due, grant.bits, suspects, joined, unpack(envs, 1, nl) } end
local out = { deadline, next_due, grant.bits, suspects, joined }
for i = 1, nl do out[5 + i] = envs[i] end
return out
