-- settle: applies a batch of outcomes (ack, retry, dead-letter) in one call.
--
-- KEYS: the queue's keys (lib.lua); touches jobs, lease, delayed[1..3], dead, errors,
--   counters, wake.
-- ARGV[1]: dead-letter cap (entries kept; the oldest beyond it are trimmed and counted)
-- ARGV[2..]: one group per outcome, the lease deadline being the token fetch returned:
--   'A', id, deadline                                   ack: delete the job
--   'R', id, deadline, priority (0-2), delay (ms), error
--        retry: attempt + 1 and back to delayed, or dead-letter once attempts are spent
--   'D', id, deadline, reason                           dead-letter now
-- Returns: the ids not acted on because this caller no longer holds their lease (expired
--   and reclaimed, already settled, or listed twice), in ARGV order.

local cap = tonumber(ARGV[1])
local now = now_ms()
local acked, missed, seen = {}, {}, {}
local retried, buried = 0, 0

-- 1. check each lease against its token, then apply the outcome
local i = 2
while i <= #ARGV do
  local op, id, token = ARGV[i], ARGV[i + 1], tonumber(ARGV[i + 2])
  local score = redis.call('ZSCORE', K.lease, id)
  local held = score and tonumber(score) == token and not seen[id]
  seen[id] = true
  if op == 'A' then
    if held then acked[#acked + 1] = id end
    i = i + 3
  elseif op == 'R' then
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
  if not held then missed[#missed + 1] = id end
end

-- 2. acks in bulk: the lease, the envelope and any last error go
if #acked > 0 then
  call_chunked('ZREM', K.lease, acked)
  call_chunked('HDEL', K.jobs, acked)
  call_chunked('HDEL', K.errors, acked)
end

-- 3. counters and the dead-letter cap
count('acked', #acked)
count('retried', retried)
count('dead', buried)
if buried > 0 then trim_dead(cap) end

-- 4. a retry is new delayed work: wake idle consumers so they learn when it falls due
--    (an idle fetcher otherwise sleeps until its periodic recheck, seconds away)
if retried > 0 then redis.call('PUBLISH', K.wake, 'retry') end
return missed
