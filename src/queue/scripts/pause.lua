-- pause: pauses or resumes a queue; resuming wakes idle consumers.
--
-- KEYS: the queue's keys (lib.lua); touches paused, wake.
-- ARGV[1]: '1' to pause, '0' to resume
-- Returns: 1 if the state changed, 0 if it already was so.

if ARGV[1] == '1' then
  if redis.call('SET', K.paused, '1', 'NX') then return 1 end
  return 0
end
local changed = redis.call('DEL', K.paused)
if changed == 1 then wake('resume') end
return changed
