-- reclaim: brings back jobs whose lease expired (their consumer crashed or stalled).
--
-- KEYS: the queue's keys (lib.lua); touches lease, jobs, ready[1..3], dead, errors,
--   counters, wake; reads settings (the dead-letter cap).
-- ARGV[1]: the most leases to reclaim in this call
-- Returns: { requeued, dead_lettered, trimmed, trimmed_total }
--   Every call, expired leases or not, trims the dead-letter queue a bounded step toward
--   the queue's cap, so an excess left by a lowered cap drains over calls. trimmed: the
--   entries this call trimmed; trimmed_total: the queue's 'trimmed' counter after it (the
--   consumer logs trim streaks from its changes, whoever trimmed).
--   An expired lease counts as a failed attempt: a job that keeps killing its consumer
--   ends in the dead-letter queue instead of looping. Requeued jobs go to the front of
--   their ready list, since they have waited already.

local n = tonumber(ARGV[1])
local now = now_ms()

-- The reply, after the dead-letter trim every call makes.
local function done(requeued, buried)
  local trimmed = trim_dead()
  return { requeued, buried, trimmed, tonumber(redis.call('HGET', K.counters, 'trimmed')) or 0 }
end

-- 1. leases past their deadline
local ids = redis.call('ZRANGEBYSCORE', K.lease, '-inf', '(' .. now, 'LIMIT', 0, n)
if #ids == 0 then return done(0, 0) end
call_chunked('ZREM', K.lease, ids)

-- 2. requeue or dead-letter each; an envelope weir did not write goes back as it is (the
--    consumer dead-letters it when it fails to decode)
local requeued, buried = 0, 0
local envs = hmget_chunked(K.jobs, ids)
for i = 1, #ids do
  local id, env = ids[i], envs[i]
  if env then
    local attempt, max, p = header(env)
    if not attempt then
      redis.call('LPUSH', K.ready[2], id)
      requeued = requeued + 1
    elseif attempt + 1 >= max then
      redis.call('HSET', K.jobs, id, with_attempt(env, attempt + 1))
      bury(id, 'lease expired after ' .. (attempt + 1) .. ' attempts', now)
      buried = buried + 1
    else
      redis.call('HSET', K.jobs, id, with_attempt(env, attempt + 1))
      redis.call('HSET', K.errors, id, 'lease expired')
      redis.call('LPUSH', K.ready[p], id)
      requeued = requeued + 1
    end
  end
end

-- 3. counters, wake, cap
count('reclaimed', requeued + buried)
count('dead', buried)
if requeued > 0 then redis.call('PUBLISH', K.wake, 'reclaim') end
return done(requeued, buried)
