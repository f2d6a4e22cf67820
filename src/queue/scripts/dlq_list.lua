-- dlq_list: the newest entries of the dead-letter queue.
--
-- KEYS: the queue's keys (lib.lua); reads dead, jobs, errors.
-- ARGV[1]: offset (0 = newest), ARGV[2]: how many
-- Returns: flat groups of four: id, dead-lettered-at ms, envelope (or false), reason (or false)

-- a count of 0 would make the stop index -1, which Redis reads as "to the end"
if tonumber(ARGV[2]) <= 0 then return {} end
local ids = redis.call('ZREVRANGE', K.dead, tonumber(ARGV[1]),
  tonumber(ARGV[1]) + tonumber(ARGV[2]) - 1, 'WITHSCORES')
local out = {}
for i = 1, #ids, 2 do
  local id = ids[i]
  out[#out + 1] = id
  out[#out + 1] = tonumber(ids[i + 1])
  out[#out + 1] = redis.call('HGET', K.jobs, id)
  out[#out + 1] = redis.call('HGET', K.errors, id)
end
return out
