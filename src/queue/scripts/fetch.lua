-- fetch: promotes due delayed jobs, pops up to N jobs (at most one suspect first, then
-- ready jobs highest priority first) and leases them.
--
-- KEYS: the queue's keys (lib.lua); touches suspects, ready[1..3], delayed[1..3], jobs,
--   lease, paused, counters, dead and errors (invalid ids); reads settings (the limits).
--   KEYS[NQ + 1]: STRING, the global rate's GCRA state (gcra_tat), expiring once past
--   KEYS[NQ + 2]: the prefix (not a key) of the per-key limits' state (key_limits)
--   then the job records (lib.lua's records), last: history, done and results (the dead-letter
--   trim deletes the histories of the jobs it trims)
-- ARGV[1]: N, the most jobs to return (>= 1)
-- ARGV[2]: visibility timeout (ms): lease deadline = Redis TIME + this
-- ARGV[3]: '1' when the consumer adapts a limit per key (--adaptive-per-key): each key's
--   live shares (key_shares.lua) are a concurrency limit of the key (see key_limits)
-- ARGV[4] (optional, '' = none): a batch name, new for each call (the consumer's tag and a
--   sequence number): where nothing needs a job read here (no per-key limit nor parked
--   jobs, no global concurrency, completed jobs not kept, no suspect waiting, the name not
--   in use), the jobs are leased as one batch of that name (lib.lua's batch leases): copied
--   from the first ready list that holds any, high before normal before low, into
--   batch_key(name) by SORT ... STORE, never read into the script; the reply then holds no
--   ids and no envelopes (state bit 1024, below), and the caller reads the batch's list
--   (LRANGE, pipelined behind this call) and the envelopes of its ids (HMGET)
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
--     due time instead of asking again; 512 completed jobs are kept (keep_completed_ms or
--     _count is set): their acks must go through settle, which keeps them;
--   suspects: how many of the returned jobs, at the front, are suspects (0 or 1): jobs
--     that were running when their consumer died (see reclaim.lua). A consumer runs them
--     alone, one at a time, so that a crash is charged to the job that caused it; one per
--     call spreads them over calls and consumers;
--   envelopes: nil for an id whose envelope is over DEFER_BYTES (step 5): the caller
--     reads it from jobs;
--   1024: the jobs were leased as batch ARGV[4], and the fifth value is how many;
--   ids: the ids of the envelopes that follow, in the same order, joined by newlines (one
--     string: a reply value per job costs Redis more than the join); an empty line for an
--     inline job (lib.lua's items): its lease is its envelope, which names it. So line i
--     is the lease item of envelope i: an id with a newline (weir's ids hold none; one
--     pushed by hand may) or an empty id is dead-lettered here, never leased (step 5).

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
-- The bits of the reply's `state` (the header says what each means; fetch.rs's `state`
-- module names the same values, and a test there checks the two agree).
local STATE = { paused = 1, global_rate = 2, global_concurrency = 4, cut_by_rate = 8,
  cut_by_concurrency = 16, held_by_key = 32, parked = 64, concurrency_set = 128, emptied = 256,
  keep_completed = 512, batch = 1024 }

local LIMIT_FIELDS = { 'global_rate', 'global_burst', 'global_concurrency', 'key_rate', 'key_burst',
  'key_concurrency', 'key_overrides', 'keep_completed_ms', 'keep_completed_count' }

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
  if not s.global_rate and not s.global_concurrency then return g end
  local c = tonumber(s.global_concurrency)
  if c then
    g.bits = g.bits + STATE.global_concurrency
    local free = math.max(c - redis.call('ZCARD', K.lease) - batched_jobs(), 0)
    if free < g.n then g.n, g.bits = free, g.bits + STATE.cut_by_concurrency end
  end
  local t = parse_rate(s.global_rate)
  if t then
    g.bits = g.bits + STATE.global_rate
    local tau = math.max(tonumber(s.global_burst) or 1, 1) * t
    local spec = s.global_rate .. ' ' .. (s.global_burst or '1')
    local tat = gcra_tat(redis.call('GET', state), spec, now)
    local free = math.max(math.floor((now + tau - tat) / t + 1e-9), 0)
    if free < g.n then
      g.n, g.bits = free, g.bits + STATE.cut_by_rate
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
--   p .. 'leased:' .. key   ZSET    ids of the key's jobs leased -> when added or last
--                                   found still leased (ms): a member no longer in K.lease
--                                   (settled, reclaimed) is pruned when the set is
--                                   counted (prune: the oldest first, a bounded number a
--                                   call), and a bounded step whenever the fetch adds to
--                                   it, so it stays near the key's live leases with or
--                                   without a limit; extended leases count; gone an hour
--                                   after its last add. (Before, a SET under 'running:',
--                                   which expires by itself.)
--   p .. 'counted'          STRING  present while every leased job with a key is in its
--                                   key's leased set: set when per-key limits (or an
--                                   adaptive per-key limiter) first apply, after the
--                                   fetch adds the leases taken before them (seed), and
--                                   kept while they apply; while it is present even a
--                                   fetch with no per-key limit records its keyed jobs'
--                                   leases, and an hour after the limits went it expires,
--                                   so a queue that stopped using them stops paying
--   p .. 'parked:' .. key   LIST    ids held back by the key's concurrency, oldest first
--                                   (entries of jobs no longer parked are skipped)
--   p .. 'parked'           ZSET    keys with parked jobs -> when last looked at (ms)
--   p .. 'reserved'         HASH    id -> 1: a job the key's rate gave a later start
--   p .. 'throttled'        ZSET    key -> jobs held back so far (the top keys are shown)
--   p .. 'auto:' .. key     HASH    consumer -> '<share> <expires>': the adaptive per-key
--                                   limiters' shares (key_shares.lua); for the consumers
--                                   that adapt per key, their live sum is one more
--                                   concurrency limit of the key (the lower one holds)
-- A job over its key's rate is given the key's next free start: it goes to delayed, due
-- then, with that permit reserved (so it is not held back again when it comes due). A job
-- over its key's concurrency is parked: on the key's parked list, and in delayed with a
-- score that never falls due (PARKED_AT + when it was parked), so it stays visible to
-- `weir jobs`, `weir job show`, delete and run-now, but is never promoted, popped and
-- parked again while it waits. A fetch takes parked jobs back to the front of ready, one
-- per free slot of their key (unpark), and all of them, a batch per call, once the key
-- has no concurrency limit left. Neither charges an attempt. Suspects are never held back.
local PARKED_LOOKS = 32
local THROTTLED_KEPT = 1000
local RUNNING_KEPT_MS = 3600000
-- Delayed scores from here on are parked jobs (2^50 ms: year 37,648; plus a time in ms,
-- still an exact double). fetch.rs's PARKED_AT_MS is the same number.
local PARKED_AT = 1125899906842624
-- Most leased-set members one call checks against the lease, all keys together: of a
-- bigger set, the members not looked at count as running (a key may wait a few calls
-- longer, never more than its limit runs).
local RUNNING_CHECKS = CHUNK

-- `force`: the state even with no limit set (to bring back jobs parked under a limit
-- since removed). `counted`: p .. 'counted' is present (keyed leases are recorded even
-- with no limit set).
local function key_limits(p, s, auto, now, force, counted)
  if not s.key_rate and not s.key_concurrency and not s.key_overrides and not auto and not force and not counted then return nil end
  -- auto: every leased job of a key is counted in its leased set (a key's first share
  -- may come at any time, and must then find its jobs already counted)
  local L = { p = p, by = {}, held = 0, auto = auto, checks = RUNNING_CHECKS, unparked = {} }
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
    if #stale > 0 then call_chunked('HDEL', h, stale) end
    return sum
  end
  -- The concurrency limit that holds key k's parked jobs: its own, and the adaptive
  -- shares whoever fetches (a consumer that does not adapt per key must not release jobs
  -- the shares parked).
  function L.park_limit(k)
    local conc = L.of(k).conc
    if not auto then
      local a = shares(k)
      if a then conc = math.min(conc or a, a) end
    end
    return conc
  end
  -- The limits of key `k`, with the state this call keeps for it.
  function L.of(k)
    local c = L.by[k]
    if c then return c end
    local rate, burst, conc = s.key_rate, s.key_burst, tonumber(s.key_concurrency)
    if s.key_overrides then
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
  -- Removes from key k's leased set the members whose lease ended, looking at `budget`
  -- of them at most (and at what is left of the call's RUNNING_CHECKS), those looked at
  -- longest ago first: all when the set is that small, so the count is exact; else the
  -- members still leased are stamped `now`, so the next call looks at the others. Returns
  -- how many of the key's jobs are running, counting the members not looked at. Bounded:
  -- a ZRANGE and a ZMSCORE of at most CHUNK ids.
  function L.prune(k, budget)
    local set = p .. 'leased:' .. k
    local total = redis.call('ZCARD', set)
    local look = math.min(budget, L.checks, total)
    if look <= 0 then return total end
    L.checks = L.checks - look
    local ids = redis.call('ZRANGE', set, 0, look - 1)
    local scores = redis.call('ZMSCORE', K.lease, unpack(ids, 1, #ids))
    local gone, alive = {}, {}
    local stamp = string.format('%d', now)
    for i = 1, #ids do
      if scores[i] then
        alive[#alive + 1] = stamp
        alive[#alive + 1] = ids[i]
      else
        gone[#gone + 1] = ids[i]
      end
    end
    if #gone > 0 then call_chunked('ZREM', set, gone) end
    if look < total then
      for i = 1, #alive, CHUNK do
        redis.call('ZADD', set, 'XX', unpack(alive, i, math.min(i + CHUNK - 1, #alive)))
      end
    end
    return total - #gone
  end
  -- How many of key k's jobs are leased, counted once per call (see prune).
  function L.running(k)
    local c = L.of(k)
    if not c.running then c.running = L.prune(k, RUNNING_CHECKS) end
    return c.running
  end
  return L
end

-- The priority (1-3) of the delayed set job `id` is parked in, or nil: a job deleted, run
-- now or gone on since it was parked is not parked any more.
local function parked_in(id)
  for q = 1, 3 do
    local s = redis.call('ZSCORE', K.delayed[q], id)
    if s then
      if tonumber(s) >= PARKED_AT then return q end
      return nil
    end
  end
  return nil
end

-- Takes parked jobs back to the front of ready, in the order they were parked: for each
-- key (the keys looked at longest ago first, at most PARKED_LOOKS of them) one per free
-- slot (L.park_limit), or, for a key without a concurrency limit now, as many as the
-- budget allows.
-- At most `budget` jobs in all, and 2 * budget + PARKED_LOOKS list entries looked at (an
-- entry of a job deleted or run now meanwhile is dropped). O(1) per job brought back.
local function unpark(L, now, budget)
  local keys = redis.call('ZRANGE', L.p .. 'parked', 0, PARKED_LOOKS - 1)
  local pops = 2 * budget + PARKED_LOOKS
  local back = { {}, {}, {} }
  for _, k in ipairs(keys) do
    if budget <= 0 or pops <= 0 then break end
    local conc = L.park_limit(k)
    local free = budget
    if conc then free = math.min(free, conc - L.running(k)) end
    local list = L.p .. 'parked:' .. k
    while free > 0 and pops > 0 do
      local id = redis.call('LPOP', list)
      if not id then break end
      pops = pops - 1
      local q = parked_in(id)
      if q then
        redis.call('ZREM', K.delayed[q], id)
        back[q][#back[q] + 1] = id
        L.unparked[id] = true
        free, budget = free - 1, budget - 1
      end
    end
    if redis.call('EXISTS', list) == 1 then
      redis.call('ZADD', L.p .. 'parked', now, k)
    else
      redis.call('ZREM', L.p .. 'parked', k)
    end
  end
  -- LPUSH reverses: push the last first, so the first parked is first in ready
  for q = 1, 3 do
    local ids, rev = back[q], {}
    for i = #ids, 1, -1 do rev[#rev + 1] = ids[i] end
    if #rev > 0 then call_chunked('LPUSH', K.ready[q], rev) end
  end
end

-- Parks job `id` (priority q) of key k: see key_limits. A job brought back from parked by
-- this call and beaten to the slot goes back to the head of the list, not counted again.
local function park(L, k, c, id, q, now)
  redis.call('ZADD', K.delayed[q], string.format('%d', PARKED_AT + now), id)
  local list = L.p .. 'parked:' .. k
  if L.unparked[id] then
    redis.call('LPUSH', list, id)
  else
    redis.call('RPUSH', list, id)
    c.held = (c.held or 0) + 1
  end
  redis.call('ZADD', L.p .. 'parked', 'NX', now, k)
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
    park(L, k, c, id, q, now)
  elseif c.t and redis.call('HDEL', L.p .. 'reserved', id) == 0 then
    if not c.tat then c.tat = gcra_tat(redis.call('GET', L.p .. 'rate:' .. k), c.spec, now) end
    local tat = math.max(c.tat, now)
    local start = tat + c.t - c.tau
    c.tat = tat + c.t
    if start > now + 1e-9 then
      redis.call('ZADD', K.delayed[q], math.ceil(start), id)
      redis.call('HSET', L.p .. 'reserved', id, 1)
      redis.call('PEXPIRE', L.p .. 'reserved', math.ceil(c.tat - now) + vt)
      c.held = (c.held or 0) + 1
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
  L.held = L.held + 1
  return false
end

-- Writes what the call's admissions changed: the leased sets (each pruned a bounded step
-- first when this call did not count it, so a set grows only with its live leases), the
-- rates' states, the throttled counts (jobs held back, a job brought back and parked
-- again in the same call not twice).
local function key_commit(L, now, vt)
  local counted = 0
  for k, c in pairs(L.by) do
    if #c.leased > 0 then
      local set = L.p .. 'leased:' .. k
      if not c.running then L.prune(k, 2 * #c.leased + 16) end
      local stamp, added = string.format('%d', now), {}
      for i = 1, #c.leased do
        added[2 * i - 1] = stamp
        added[2 * i] = c.leased[i]
      end
      call_chunked('ZADD', set, added)
      -- a set no fetch adds to any more (the key went idle) goes by itself, long after
      -- its last lease (a lease may be extended for hours; this only bounds the garbage)
      redis.call('PEXPIRE', set, math.max(2 * vt, RUNNING_KEPT_MS))
    end
    if c.tat then gcra_store(L.p .. 'rate:' .. k, c.tat, c.spec, now) end
    if c.held then
      redis.call('ZINCRBY', L.p .. 'throttled', c.held, k)
      counted = counted + c.held
    end
  end
  if counted > 0 then
    count('key_throttled', counted)
    local excess = redis.call('ZCARD', L.p .. 'throttled') - THROTTLED_KEPT
    if excess > 0 then redis.call('ZPOPMIN', L.p .. 'throttled', excess) end
  end
end

-- Adds every leased job with a key to its key's leased set: the leases taken while no
-- per-key limit applied (and so not recorded), when limits first apply. Live batches are
-- split first (lib.lua's split_all), so their jobs are lease entries too. O(jobs leased)
-- once (and again only after an hour without per-key limits): a ZRANGE of the lease, the
-- envelopes of the leased ids (HMGET in chunks), a ZADD per key in chunks.
local function seed(p, now, vt)
  split_all()
  local members = redis.call('ZRANGE', K.lease, 0, -1)
  local ids, at = {}, {}
  for i = 1, #members do
    if not is_inline(members[i]) then
      ids[#ids + 1] = members[i]
      at[#ids] = i
    end
  end
  local envs = {}
  if #ids > 0 then
    local got = hmget_chunked(K.jobs, ids)
    for j = 1, #ids do envs[at[j]] = got[j] end
  end
  local stamp, by = string.format('%d', now), {}
  for i = 1, #members do
    local env = envs[i] or (is_inline(members[i]) and members[i])
    local k = env and job_key(env)
    if k then
      local add = by[k]
      if not add then add = {}; by[k] = add end
      add[#add + 1] = stamp
      add[#add + 1] = members[i]
    end
  end
  for k, add in pairs(by) do
    call_chunked('ZADD', p .. 'leased:' .. k, add)
    redis.call('PEXPIRE', p .. 'leased:' .. k, math.max(2 * vt, RUNNING_KEPT_MS))
  end
end

local n = arg_whole(1, 'N', 1)
local vt = arg_whole(2, 'the visibility timeout (ms)', 0)
local auto = ARGV[3] == '1'
local batch = ARGV[4]
if batch == '' then batch = nil end

-- 1. a paused queue hands out nothing; the global limits may grant fewer than N, or none;
--    parked jobs of keys with free slots (or with their limit gone) go back to ready first
if redis.call('EXISTS', K.paused) == 1 then return { 0, 0, STATE.paused, 0 } end
local now = now_ms()
local limits = hash_named(K.settings, LIMIT_FIELDS)
records()
-- Before the first write (promotion, or unpark below): the keys whose first touch would
-- come after one. The delayed sets are read before they are written, unless parked jobs
-- come back first. Six TYPE calls and a read of the counters: about 4 us a call.
expect_each(K.ready, 'list')
expect(K.suspects, 'list')
expect(K.jobs, 'hash')
expect(K.lease, 'zset')
expect(K.batches, 'zset')
counters_ready({ 'fetched', 'key_throttled' })
local counted_key = KEYS[NQ + 2] .. 'counted'
local counted = redis.call('EXISTS', counted_key) == 1
if limits.key_rate or limits.key_concurrency or limits.key_overrides or auto or counted then expect_each(K.delayed, 'zset') end
local grant = global_grant(KEYS[NQ + 1], limits, n, now)
if limits.global_concurrency or limits.key_concurrency or limits.key_overrides then grant.bits = grant.bits + STATE.concurrency_set end
if keep_setting(limits.keep_completed_ms, limits.keep_completed_count) then grant.bits = grant.bits + STATE.keep_completed end
if grant.n == 0 then return { 0, grant.wait, grant.bits, 0 } end
n = grant.n
local keyed = key_limits(KEYS[NQ + 2], limits, auto, now, false, counted)
if limits.key_rate or limits.key_concurrency or limits.key_overrides or auto then
  -- per-key limits apply: the leases taken before they did count too (seed, once)
  -- (with nothing leased there is nothing to count: no mark, and the next call's seed
  -- is as cheap as this one's)
  if not counted then seed(KEYS[NQ + 2], now, vt) end
  if counted or redis.call('EXISTS', K.lease) == 1 then
    redis.call('SET', counted_key, '1', 'PX', RUNNING_KEPT_MS)
  end
end
-- with no per-key limit left, parked jobs still come back (a batch per call)
local parking = keyed
if not parking and redis.call('EXISTS', KEYS[NQ + 2] .. 'parked') == 1 then
  parking = key_limits(KEYS[NQ + 2], limits, auto, now, true)
end
if parking then
  unpark(parking, now, n)
  parking.parked = redis.call('EXISTS', parking.p .. 'parked') == 1
  if parking.parked then grant.bits = grant.bits + STATE.parked end
end

-- 2. promote due delayed jobs, at most N per priority so one call stays bounded (all read
--    before any is written: a delayed set of another type fails the call before a write)
-- (one EXISTS of the three first, lib.lua's any_key: most calls find no delayed job)
if any_key(K.delayed) then
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
end

-- When nothing is ready (left), ms until the next delayed job is due, so the fetcher
-- sleeps till then, or till a wake message (parked jobs are never due: see key_limits).
local function next_due_in()
  if not any_key(K.delayed) then return 0 end
  local next_due = 0
  for p = 1, 3 do
    local z = redis.call('ZRANGEBYSCORE', K.delayed[p], '-inf', '(' .. PARKED_AT, 'WITHSCORES', 'LIMIT', 0, 1)
    if z[2] then
      local d = math.max(tonumber(z[2]) - now, 1)
      if next_due == 0 or d < next_due then next_due = d end
    end
  end
  return next_due
end

-- 3a. a batch lease (ARGV[4]), where nothing needs the jobs read here: up to N jobs (at
--     most BATCH_MAX) of the first ready list that holds any, copied into the batch's
--     list inside Redis (SORT BY nosort LIMIT ... STORE: in list order, no item passes
--     through Lua), trimmed off the ready list, and one lease entry for the batch
if batch and not keyed and not parking and not limits.global_concurrency
    and not keep_setting(limits.keep_completed_ms, limits.keep_completed_count)
    and redis.call('EXISTS', K.suspects) == 0 and redis.call('EXISTS', batch_key(batch)) == 0 then
  local got, refused = 0, false
  for p = 1, 3 do
    if redis.call('LLEN', K.ready[p]) > 0 then
      -- (a user without SORT or LTRIM, as the minimal ACL of an older weir had it:
      -- security.md, is refused them; then nothing is left written by them, and the jobs
      -- are leased one by one below)
      local r = redis.pcall('SORT', K.ready[p], 'BY', 'nosort', 'LIMIT', 0, math.min(n, BATCH_MAX), 'STORE', batch_key(batch))
      if type(r) == 'table' and r.err then
        refused = true
      elseif redis.pcall('LTRIM', K.ready[p], r, -1).err then
        -- (refused too: the copy goes, and nothing else was written)
        redis.call('DEL', batch_key(batch))
        refused = true
      else
        got = r
      end
      break
    end
  end
  if not refused then
    if got == 0 then return { 0, next_due_in(), grant.bits, 0 } end
    local deadline = now + vt
    redis.call('ZADD', K.batches, deadline, batch)
    count('fetched', got)
    grant.take(got)
    local bits, next_due = grant.bits + STATE.batch, 0
    if got < n and not any_key(K.ready) then
      bits, next_due = bits + STATE.emptied, next_due_in()
    end
    return { deadline, next_due, bits, 0, got }
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

-- 4. nothing ready (left): say when the next delayed job is due (see next_due_in)
if ni == 0 then return { 0, next_due_in(), grant.bits, 0 } end
-- It took the last ready job: the due time is read once the jobs held back by their keys'
-- limits (step 5) are in delayed too.
local emptied = ni < n and redis.call('EXISTS', K.suspects) == 0
if emptied then grant.bits = grant.bits + STATE.emptied end
local function due_after()
  if emptied then return next_due_in() end
  return 0
end

-- An id no job may have: one with a newline would break the reply's lines (ids below),
-- and an empty one would read as an inline job's line. Returns why, or nil.
local function bad_id(id)
  if id == '' then return 'invalid id: empty' end
  if string.find(id, '\n', 1, true) then return 'invalid id: contains a newline' end
  return nil
end

-- An envelope longer than this (enqueue.rs's INLINE_MAX_BYTES: those stored by id for
-- their size) is not read into the script: copying one into Lua and back out to the reply
-- costs Redis about 20 times a plain HMGET of it (900 KiB: 3.6 ms against 0.17).
local DEFER_BYTES = 16384
-- Step 5's envelope of a job whose envelope is over DEFER_BYTES (nil in the reply), and
-- whether any job has it.
local DEFERRED = {}
local deferred = false

-- The envelopes of `names` (ids in K.jobs) as step 5 takes them: an envelope, false for
-- none, or DEFERRED for one over DEFER_BYTES, which the caller reads with HMGET
-- (fetch.rs's read_deferred). Only without per-key limits (admit reads each envelope's
-- key). The first envelope's size decides: if it is short, all are read here (one HMGET, as
-- before: a queue of short jobs pays one HSTRLEN per fetch); if long, each id's size is
-- read (an HSTRLEN each) and only the short ones are.
local function envelopes(names)
  if redis.call('HSTRLEN', K.jobs, names[1]) <= DEFER_BYTES then return hmget_chunked(K.jobs, names) end
  local got, short, at = { DEFERRED }, {}, {}
  deferred = true
  for k = 2, #names do
    -- (0 is a missing field or an empty envelope: the HMGET tells them apart)
    if redis.call('HSTRLEN', K.jobs, names[k]) > DEFER_BYTES then
      got[k] = DEFERRED
    else
      short[#short + 1] = names[k]
      at[#short] = k
    end
  end
  if #short > 0 then
    local envs = hmget_chunked(K.jobs, short)
    for j = 1, #short do got[at[j]] = envs[j] end
  end
  return got
end

-- 5. load envelopes and lease: an inline job is its own envelope (lib.lua's items), an id
--    has its envelope in K.jobs; an id without one (purged meanwhile) is dropped, an
--    invalid one (bad_id) is dead-lettered, never leased, and, under per-key limits, a
--    job its key's limits hold back is too (see admit; an inline job with a key is adopted
--    first, so that it has a record by id to be held back by)
local deadline = now + vt
local envs, hashed, nh = {}, {}, 0
local bad, nbad = {}, 0
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
  local got = keyed and hmget_chunked(K.jobs, names) or envelopes(names)
  for k = 1, nh do
    local i = hashed[k]
    envs[i] = got[k] or false
    if envs[i] and bad_id(ids[i]) then
      bad[i], envs[i], nbad = bad_id(ids[i]), false, nbad + 1
    end
  end
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
      -- (an id read from a hand-written envelope may be invalid too)
      if bad_id(item) then
        bad[i], env, nbad = bad_id(item), false, nbad + 1
        ids[i] = item
      end
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
      grant.bits = grant.bits + STATE.held_by_key
      if not keyed.parked and redis.call('EXISTS', keyed.p .. 'parked') == 1 then
        grant.bits = grant.bits + STATE.parked
      end
    end
  end
  for i, reason in pairs(bad) do bury(ids[i], reason, now) end
  if nbad > 0 then
    count('dead', nbad)
    trim_dead()
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
if deferred then
  for i = 1, nl do
    if envs[i] == DEFERRED then envs[i] = false end
  end
end
if nl <= CHUNK then return { deadline, next_due, grant.bits, suspects, joined, unpack(envs, 1, nl) } end
local out = { deadline, next_due, grant.bits, suspects, joined }
for i = 1, nl do out[5 + i] = envs[i] end
return out
