-- fetch: promotes due delayed jobs, pops up to N jobs (at most one suspect first, then
-- ready jobs highest priority first) and leases them.
--
-- KEYS: the queue's keys (lib.lua); touches suspects, ready[1..3], delayed[1..3], jobs,
--   lease, paused, counters.
-- ARGV[1]: N, the most jobs to return (>= 1)
-- ARGV[2]: visibility timeout (ms): lease deadline = Redis TIME + this
-- Returns: { deadline_ms, next_due_in_ms, paused, suspects, id1, envelope1, id2, ... }
--   deadline_ms: the lease deadline of every returned job: the lease's token, which stays
--     the same however often the lease is extended; 0 if none;
--   next_due_in_ms: with no job returned, ms until the next delayed job is due (0 = none);
--   paused: 1 when the queue is paused (nothing is popped then);
--   suspects: how many of the returned jobs, at the front, are suspects (0 or 1): jobs
--     that were running when their consumer died (see reclaim.lua). A consumer runs them
--     alone, one at a time, so that a crash is charged to the job that caused it; one per
--     call spreads them over calls and consumers.

local n = tonumber(ARGV[1])
local vt = tonumber(ARGV[2])

-- 1. a paused queue hands out nothing
if redis.call('EXISTS', K.paused) == 1 then return { 0, 0, 1, 0 } end
local now = now_ms()

-- 2. promote due delayed jobs, at most N per priority so one call stays bounded
for p = 1, 3 do
  local due = redis.call('ZRANGEBYSCORE', K.delayed[p], '-inf', now, 'LIMIT', 0, n)
  if #due > 0 then
    call_chunked('ZREM', K.delayed[p], due)
    call_chunked('RPUSH', K.ready[p], due)
  end
end

-- 3. at most one suspect, then up to N ids in all, high before normal before low
local ids, ni = {}, 0
local suspect = redis.call('LPOP', K.suspects)
if suspect then
  ids[1] = suspect
  ni = 1
end
for p = 1, 3 do
  local want = n - ni
  if want <= 0 then break end
  local got = redis.call('LPOP', K.ready[p], want)
  if got then
    for i = 1, #got do ids[ni + i] = got[i] end
    ni = ni + #got
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
  return { 0, next_due, 0, 0 }
end

-- 5. load envelopes and lease; an id without an envelope (purged meanwhile) is dropped
local deadline = now + vt
local envs = hmget_chunked(K.jobs, ids)
local out, no = { deadline, 0, 0, 0 }, 4
if suspect and envs[1] then out[4] = 1 end
local lease, nl = {}, 0
-- The score as a string, formatted once: a Lua number would be formatted per job.
local score = string.format('%d', deadline)
for i = 1, ni do
  local env = envs[i]
  if env then
    lease[nl + 1] = score
    lease[nl + 2] = ids[i]
    nl = nl + 2
    out[no + 1] = ids[i]
    out[no + 2] = env
    no = no + 2
  end
end
call_chunked('ZADD', K.lease, lease)
count('fetched', nl / 2)
return out
