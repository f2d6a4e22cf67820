-- cron_fire: fires one tick of a schedule: claims the tick and enqueues its job in one
-- atomic call, so a claim never goes without its job and a tick never fires twice,
-- whatever the number of consumers racing for it.
--
-- KEYS: the queue's keys (lib.lua), then the schedules (HASH name -> schedule JSON) and
--   the last fired ticks (HASH name -> tick ms), as the last two keys.
-- ARGV: name, schedule JSON (as the caller read it), tick (ms since the epoch),
--   job id, envelope (envelope.rs), priority (0 high, 1 normal, 2 low).
-- Returns: 1 fired; 0 this tick (or a later one) was fired already; -1 the schedule was
--   removed or changed since the caller read it (nothing done: read it again).

local CRON, FIRED = KEYS[#KEYS - 1], KEYS[#KEYS]
-- 0. before the first write: the arguments, and every key it may write
local name, spec, tick = ARGV[1], ARGV[2], arg_whole(3, 'the tick (ms)', 0)
local id, env, p = ARGV[4], ARGV[5], arg_whole(6, 'the priority', 0, 2) + 1
expect_each({ CRON, FIRED, K.jobs }, 'hash')
expect(K.ready[p], 'list')
counters_ready({ 'enqueued' })

-- 1. the schedule must be the one the caller computed the tick from
if redis.call('HGET', CRON, name) ~= spec then return -1 end

-- 2. claim the tick: only a tick later than the last fired one
local last = tonumber(redis.call('HGET', FIRED, name)) or 0
if tick <= last then return 0 end
redis.call('HSET', FIRED, name, tick)

-- 3. enqueue its job (as enqueue.lua does for one job with its own id); a job of this
-- tick still in the queue (a schedule removed and added again) is not doubled
if redis.call('HSETNX', K.jobs, id, env) == 1 then
  redis.call('RPUSH', K.ready[p], id)
  count('enqueued', 1)
  wake('enqueue')
end
return 1
