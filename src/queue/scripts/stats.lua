-- stats: a consistent snapshot of the queue's sizes and counters.
--
-- KEYS: the queue's keys (lib.lua); reads all of them; then the job records (lib.lua's
--   records).
-- ARGV: none
-- Returns: { ready_high, ready_normal, ready_low, delayed, in_flight, dead, paused,
--   oldest_ready_age_ms, counters (flat field/value pairs), dead_cap, deferred, done }
--   done: the completed jobs kept (`keep_completed_*` settings);
--   dead_cap: the queue's dead-letter cap in force (its setting, or the default);
--   deferred: jobs with a deferral record (put back uncharged, not yet done)
--   ready_high counts the suspects too: they are ready, and fetched before anything else.

records()
local out = {}
for p = 1, 3 do out[#out + 1] = redis.call('LLEN', K.ready[p]) end
out[1] = out[1] + redis.call('LLEN', K.suspects)
local delayed = 0
for p = 1, 3 do delayed = delayed + redis.call('ZCARD', K.delayed[p]) end
out[#out + 1] = delayed
out[#out + 1] = redis.call('ZCARD', K.lease) + batched_jobs()
out[#out + 1] = redis.call('ZCARD', K.dead)
out[#out + 1] = redis.call('EXISTS', K.paused)
-- the oldest ready job heads one of the ready lists; its envelope (the item itself for an
-- inline job, lib.lua's items) says when it was enqueued: its "enqueued_at", or the time
-- a compact envelope's id holds (none when its id is not a time id: skipped)
local now = now_ms()
local oldest = 0
for p = 1, 3 do
  local item = redis.call('LINDEX', K.ready[p], 0)
  if item then
    local env = item
    if not is_inline(item) then env = redis.call('HGET', K.jobs, item) end
    local at = nil
    if env and is_compact(env) then
      at = compact_at(env)
    elseif env then
      at = string.match(env, '"enqueued_at":(%d+)')
    end
    -- 0: unknown (a compact job without a time id, retried), as the consumer reads it
    if at and tonumber(at) > 0 then oldest = math.max(oldest, now - tonumber(at)) end
  end
end
out[#out + 1] = oldest
out[#out + 1] = redis.call('HGETALL', K.counters)
out[#out + 1] = dead_cap()
out[#out + 1] = redis.call('HLEN', K.deferrals)
out[#out + 1] = redis.call('ZCARD', K.done)
return out
