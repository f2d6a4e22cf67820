-- notice: tells the queue's running consumers that an operator changed something they
-- otherwise only re-read on a slow safety poll (the runtime settings and retry rules, the
-- periodic jobs), so they read it again now.
--
-- KEYS: the queue's keys (lib.lua), then KEYS[NQ + 1]: the queue's notices channel.
-- ARGV[1]: what changed: 'settings' or 'cron'
-- Returns: how many subscribers received the notice.

local channel = KEYS[NQ + 1]
if channel == nil then refuse('notice takes the notices channel after the queue keys') end
local what = ARGV[1]
if what ~= 'settings' and what ~= 'cron' then
  refuse('unknown notice ' .. tostring(what) .. ': use settings or cron')
end
-- As lib.lua's wake: on sharded pub/sub where consumers listen there (a Redis Cluster).
if redis.call('PUBSUB', 'SHARDNUMSUB', channel)[2] > 0 then
  return redis.call('SPUBLISH', channel, what)
end
return redis.call('PUBLISH', channel, what)
