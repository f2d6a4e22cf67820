-- fetch: promotes due delayed jobs, pops up to N jobs (at most one suspect first, then
-- ready jobs highest priority first) and leases them.
--
-- KEYS: the queue's keys (lib.lua); touches suspects, ready[1..3], delayed[1..3], jobs,
--   lease, paused, counters; reads settings (the global limits).
--   KEYS[NQ + 1]: STRING, the global rate's GCRA state (its theoretical arrival time, ms,
--   expiring once it is in the past)
-- ARGV[1]: N, the most jobs to return (>= 1)
-- ARGV[2]: visibility timeout (ms): lease deadline = Redis TIME + this
-- Returns: { deadline_ms, next_due_in_ms, state, suspects, ids, envelope1, envelope2, ... }
--   deadline_ms: the lease deadline of every returned job: the lease's token, which stays
--     the same however often the lease is extended; 0 if none;
--   next_due_in_ms: with no job returned, ms until the next delayed job is due (0 = none),
--     or, when the global rate granted nothing, until it grants the next job;
--   state: 1 when the queue is paused (nothing is popped then); otherwise the global
--     limits (lib.lua's global_grant) as bits: 2 a global rate is set, 4 a global
--     concurrency is set, 8 the global rate cut this call short, 16 the global
--     concurrency did;
--   suspects: how many of the returned jobs, at the front, are suspects (0 or 1): jobs
--     that were running when their consumer died (see reclaim.lua). A consumer runs them
--     alone, one at a time, so that a crash is charged to the job that caused it; one per
--     call spreads them over calls and consumers;
--   ids: the ids of the envelopes that follow, in the same order, joined by newlines (one
--     string: a reply value per job costs Redis more than the join). weir's ids never hold
--     a newline; should one pushed by hand hold one, the pieces no longer match the
--     envelopes in number, and the caller pairs what it can by the ids inside them.

-- The global limits (`weir limits set --global-rate/--global-concurrency`: fields of
-- K.settings) for a call asking for `n` jobs at `now`. Returns { n = how many it may lease
-- (0..n), wait = with none granted by the rate, ms until it grants one, bits = as in the
-- header, take = records that k jobs were leased }.
--   global rate: GCRA over the whole fleet. `state` holds the theoretical arrival time
--   (TAT, ms) and the rate and burst it was kept under ('<tat> <rate> <burst>': a changed
--   rate starts afresh); each job moves TAT on by the emission interval T = period /
--   count, and a call takes at most what keeps TAT within burst * T of now.
--   global concurrency: the queue's leases are its permits: at most C jobs leased (fetched
--   and not yet settled) at once, fleet-wide. The settle gives them back; a killed
--   consumer's leases expire and are reclaimed, so its permits come back within a lease.
local PERIOD_MS = { s = 1000, m = 60000, h = 3600000 }

local function global_grant(state, n, now)
  local g = { n = n, wait = 0, bits = 0, take = function(_) end }
  local s = redis.call('HMGET', K.settings, 'global_rate', 'global_burst', 'global_concurrency')
  if not s[1] and not s[3] then return g end
  local c = tonumber(s[3])
  if c then
    g.bits = g.bits + 4
    local free = math.max(c - redis.call('ZCARD', K.lease), 0)
    if free < g.n then g.n, g.bits = free, g.bits + 16 end
  end
  local count, unit = string.match(s[1] or '', '^([%d%.]+)/([smh])$')
  count = tonumber(count)
  if count and count > 0 then
    g.bits = g.bits + 2
    local t = PERIOD_MS[unit] / count
    local tau = math.max(tonumber(s[2]) or 1, 1) * t
    local spec = s[1] .. ' ' .. (s[2] or '1')
    local kept, kept_spec = string.match(redis.call('GET', state) or '', '^(%S+) (.*)$')
    local tat = now
    if kept_spec == spec then tat = math.max(tonumber(kept) or now, now) end
    local free = math.max(math.floor((now + tau - tat) / t + 1e-9), 0)
    if free < g.n then
      g.n, g.bits = free, g.bits + 8
      if free == 0 then g.wait = math.max(math.ceil(tat + t - tau - now), 1) end
    end
    g.take = function(k)
      if k <= 0 then return end
      local next_tat = tat + k * t
      redis.call('SET', state, string.format('%.3f ', next_tat) .. spec, 'PX', math.ceil(next_tat - now) + 1)
    end
  end
  return g
end

local n = tonumber(ARGV[1])
local vt = tonumber(ARGV[2])

-- 1. a paused queue hands out nothing; the global limits may grant fewer than N, or none
if redis.call('EXISTS', K.paused) == 1 then return { 0, 0, 1, 0 } end
local now = now_ms()
local grant = global_grant(KEYS[NQ + 1], n, now)
if grant.n == 0 then return { 0, grant.wait, grant.bits, 0 } end
n = grant.n

-- 2. promote due delayed jobs, at most N per priority so one call stays bounded
for p = 1, 3 do
  local due = redis.call('ZRANGEBYSCORE', K.delayed[p], '-inf', now, 'LIMIT', 0, n)
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

-- 4. nothing ready: say when the next delayed job is due, so the fetcher sleeps till then
if ni == 0 then
  local next_due = 0
  for p = 1, 3 do
    local z = redis.call('ZRANGE', K.delayed[p], 0, 0, 'WITHSCORES')
    if z[2] then
      local d = math.max(tonumber(z[2]) - now, 1)
      if next_due == 0 or d < next_due then next_due = d end
    end
  end
  return { 0, next_due, grant.bits, 0 }
end

-- 5. load envelopes and lease; an id without an envelope (purged meanwhile) is dropped
local deadline = now + vt
local envs = hmget_chunked(K.jobs, ids)
local suspects = 0
if suspect and envs[1] then suspects = 1 end
-- The score as a string, formatted once: a Lua number would be formatted per job.
local score = string.format('%d', deadline)
local lease = {}
local nl = 0
for i = 1, ni do
  if not envs[i] then break end
  lease[2 * i - 1] = score
  lease[2 * i] = ids[i]
  nl = i
end
if nl < ni then
  -- some envelopes are gone: keep the jobs that have one, in order
  local kept_ids, kept_envs = {}, {}
  lease, nl = {}, 0
  for i = 1, ni do
    if envs[i] then
      nl = nl + 1
      lease[2 * nl - 1] = score
      lease[2 * nl] = ids[i]
      kept_ids[nl], kept_envs[nl] = ids[i], envs[i]
    end
  end
  if nl == 0 then return { 0, 0, grant.bits, 0 } end
  ids, envs = kept_ids, kept_envs
end
call_chunked('ZADD', K.lease, lease)
count('fetched', nl)
grant.take(nl)
local joined = table.concat(ids, '\n')
if nl <= CHUNK then return { deadline, 0, grant.bits, suspects, joined, unpack(envs, 1, nl) } end
local out = { deadline, 0, grant.bits, suspects, joined }
for i = 1, nl do out[5 + i] = envs[i] end
return out
