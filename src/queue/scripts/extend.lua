-- extend: the heartbeat; pushes back the lease deadline of jobs still held.
--
-- KEYS: the queue's keys (lib.lua); touches lease.
-- ARGV[1]: visibility timeout (ms): new deadline = Redis TIME + this
-- ARGV[2..]: pairs of id, current lease deadline (the token fetch or the last extend gave)
-- Returns: { new_deadline_ms, lost_id1, lost_id2, ... } where lost ids are the ones whose
--   lease this caller no longer holds.

local deadline = now_ms() + tonumber(ARGV[1])
local out = { deadline }
for i = 2, #ARGV, 2 do
  local id = ARGV[i]
  local score = redis.call('ZSCORE', K.lease, id)
  if score and tonumber(score) == tonumber(ARGV[i + 1]) then
    redis.call('ZADD', K.lease, 'XX', deadline, id)
  else
    out[#out + 1] = id
  end
end
return out
