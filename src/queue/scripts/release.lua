-- release: hands leased but un-started jobs back at shutdown, ahead of the backlog, with
-- their attempt count untouched.
--
-- KEYS: the queue's keys (lib.lua); touches lease, lease_tokens, started, ready[1..3],
--   wake.
-- ARGV: triples of lease item (lib.lua: a job id, or an inline job's envelope, which goes
--   back as it is), lease token, priority (0-2), in the order fetched
-- Returns: the items not released because this caller no longer holds their lease.

-- 0. before the first write: the arguments and the keys written (the lease's first touch
--    is a read)
if #ARGV % 3 ~= 0 then refuse('release: items come in triples of item, token, priority') end
for i = 3, #ARGV, 3 do arg_whole(i, 'a priority', 0, 2) end
expect_each(K.ready, 'list')
expect_each({ K.lease_tokens, K.started }, 'hash')

local missed = {}
local released = {}
-- walk backwards so LPUSH leaves the first-fetched job at the front
for i = #ARGV - 2, 1, -3 do
  local id = ARGV[i]
  if lease_held(id, redis.call('ZSCORE', K.lease, id), ARGV[i + 1]) then
    redis.call('LPUSH', K.ready[tonumber(ARGV[i + 2]) + 1], id)
    released[#released + 1] = id
  else
    missed[#missed + 1] = id
  end
end
end_leases(released)
if #released > 0 then wake('release') end
return missed
