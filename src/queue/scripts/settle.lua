-- settle: applies a batch of outcomes (ack, retry, defer, dead-letter) in one call.
--
-- KEYS: the queue's keys (lib.lua); touches jobs, lease, lease_tokens, started, delayed[1..3],
--   dead, errors, deferrals, counters, wake; reads settings (the dead-letter cap).
-- ARGV[1]: G, the number of ack groups that follow
-- then G ack groups, one per lease token (jobs fetched together share it):
--   token (the lease deadline fetch or extend returned), k, then k job ids
-- then the other outcomes, one group each:
--   'R', id, token, priority (0-2), delay (ms), error
--        retry: attempt + 1 and back to delayed, or dead-letter once attempts are spent
--   'F', id, token, priority (0-2), delay (ms), max deferrals, max age (ms), reason
--        defer: back to delayed with the attempt untouched (backpressure, a kind or size
--        this consumer cannot take); the job's deferral record counts it, and once it is
--        over max deferrals or older than max age (0 = no limit) the job is dead-lettered
--        with a reason that says so
--   'D', id, token, reason                  dead-letter now
-- Returns: { missed, spent }
--   missed: the ids not acted on because this caller no longer holds their lease
--     (expired and reclaimed, already settled, or listed twice), acks first, in ARGV order;
--   spent: the ids of deferrals dead-lettered because their deferral budget was spent.
-- Burying trims the dead-letter queue toward the queue's cap (lib.lua's trim_dead).

local now = now_ms()
local missed, nm = {}, 0
local seen = {}
local retried, deferred, buried = 0, 0, 0
local spent = {}

local function miss(id)
  nm = nm + 1
  missed[nm] = id
end

-- True if this caller holds the lease of `id` with `token` (a string, as sent) and has not
-- settled it in this call already. Scores are integral ms, so Redis formats them as plain
-- digits: a string compare avoids a number parse per job; the numeric compare covers any
-- other formatting.
local function holds(id, score, token)
  local held = score and (score == token or tonumber(score) == tonumber(token)) and not seen[id]
  seen[id] = true
  return held
end

-- 1. acks: every lease score in bulk, then the held ones deleted in bulk
local acked, na = {}, 0
local i = 2
for _ = 1, tonumber(ARGV[1]) do
  local token, k = ARGV[i], tonumber(ARGV[i + 1])
  local first = i + 2
  local c = first
  while c < first + k do
    local e = math.min(c + CHUNK - 1, first + k - 1)
    local scores = redis.call('ZMSCORE', K.lease, unpack(ARGV, c, e))
    for j = 1, #scores do
      local id = ARGV[c + j - 1]
      if holds(id, scores[j], token) then
        na = na + 1
        acked[na] = id
      else
        miss(id)
      end
    end
    c = e + 1
  end
  i = first + k
end
if na > 0 then
  call_chunked('ZREM', K.lease, acked)
  call_chunked('HDEL', K.jobs, acked)
  forget(acked)
end

-- 2. failures, one at a time (the rare path)
while i <= #ARGV do
  local op, id, token = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  local held = holds(id, redis.call('ZSCORE', K.lease, id), token)
  if op == 'R' then
    if held then
      redis.call('ZREM', K.lease, id)
      local env = redis.call('HGET', K.jobs, id)
      local attempt, max = nil, nil
      if env then attempt, max = header(env) end
      local err = ARGV[i + 5]
      if env and attempt and attempt + 1 < max then
        redis.call('HSET', K.jobs, id, with_attempt(env, attempt + 1))
        redis.call('HSET', K.errors, id, err)
        redis.call('ZADD', K.delayed[tonumber(ARGV[i + 3]) + 1], now + tonumber(ARGV[i + 4]), id)
        retried = retried + 1
      elseif env then
        if attempt then redis.call('HSET', K.jobs, id, with_attempt(env, attempt + 1)) end
        bury(id, err, now)
        buried = buried + 1
      end
    end
    i = i + 6
  elseif op == 'F' then
    if held then
      end_leases({ id })
      local p, delay = tonumber(ARGV[i + 3]) + 1, tonumber(ARGV[i + 4])
      local max_n, max_ms = tonumber(ARGV[i + 5]), tonumber(ARGV[i + 6])
      if defer(id, p, delay, max_n, max_ms, ARGV[i + 7], now) then
        deferred = deferred + 1
      else
        buried = buried + 1
        spent[#spent + 1] = id
      end
    end
    i = i + 8
  elseif op == 'D' then
    if held then
      redis.call('ZREM', K.lease, id)
      bury(id, ARGV[i + 3], now)
      buried = buried + 1
    end
    i = i + 4
  else
    return redis.error_reply('ERR weir settle: unknown outcome ' .. tostring(op))
  end
  if not held then miss(id) end
end

-- 3. counters and the dead-letter cap
count('acked', na)
count('retried', retried)
count('deferred', deferred)
count('dead', buried)
if buried > 0 then trim_dead() end

-- 4. a retry or a deferral is new delayed work: wake idle consumers so they learn when it
--    falls due (an idle fetcher otherwise sleeps until its periodic recheck, seconds away)
if retried + deferred > 0 then redis.call('PUBLISH', K.wake, 'retry') end
return { missed, spent }
