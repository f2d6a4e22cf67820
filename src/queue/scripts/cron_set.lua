-- cron_set: adds, replaces or removes one schedule of periodic jobs (queue/cron.rs).
--
-- KEYS: the queue's keys (lib.lua), then the schedules (HASH name -> schedule JSON) and
--   the last fired ticks (HASH name -> tick ms), as the last two keys.
-- ARGV: name, schedule JSON ('' to remove).
-- Returns: adding: 2 new, 1 changed, 0 unchanged; removing: 1 removed, 0 there was none.
--
-- A new or changed schedule counts every tick up to now (Redis TIME) as fired: it never
-- fires at once for a tick that came before it. An unchanged one keeps its state, so
-- running the same `weir cron add` at every deploy disturbs nothing.

local CRON, FIRED = KEYS[#KEYS - 1], KEYS[#KEYS]
local name, spec = ARGV[1], ARGV[2]
expect_each({ CRON, FIRED }, 'hash')

-- 1. remove
if spec == '' then
  redis.call('HDEL', FIRED, name)
  return redis.call('HDEL', CRON, name)
end

-- 2. add or replace; a change resets the last fired tick to now
local old = redis.call('HGET', CRON, name)
if old == spec then return 0 end
redis.call('HSET', CRON, name, spec)
redis.call('HSET', FIRED, name, now_ms())
if old then return 1 end
return 2
