-- dlq_requeue: moves dead-lettered jobs back to ready with a fresh attempt count.
--
-- KEYS: the queue's keys (lib.lua); touches dead, jobs, errors, ready[1..3], counters, wake.
-- ARGV[1]: the most jobs to requeue when no ids are given (oldest first)
-- ARGV[2..]: ids to requeue (optional)
-- Returns: { requeued, missing_id1, ... } where missing ids are not in the dead-letter queue.

-- 0. before the first write: the limit, and the keys written
local limit = #ARGV <= 1 and arg_whole(1, 'the limit', 0)
expect(K.dead, 'zset')
expect_each({ K.jobs, K.errors, K.deferrals }, 'hash')
expect_each(K.ready, 'list')

local ids = {}
if #ARGV > 1 then
  for i = 2, #ARGV do ids[#ids + 1] = ARGV[i] end
elseif limit > 0 then
  -- (a limit of 0 would make the stop index -1, which Redis reads as "to the end")
  ids = redis.call('ZRANGE', K.dead, 0, limit - 1)
end
local out = { 0 }
local requeued = 0
for i = 1, #ids do
  local id = ids[i]
  local env = redis.call('HGET', K.jobs, id)
  if redis.call('ZREM', K.dead, id) == 1 and env then
    revive(id, env, false, true)
    requeued = requeued + 1
  else
    out[#out + 1] = id
  end
end
out[1] = requeued
if requeued > 0 then wake('requeue') end
return out
