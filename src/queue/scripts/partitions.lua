-- partitions: writes a queue's partition map unless it has one (`weir queue create
-- --partitions P`, queue/partitions.rs); returns the map the queue has.
--
-- KEYS: the queue's keys (lib.lua); KEYS[NQ + 1]: HASH the partition map
--   (count -> P, tags -> the P partition tags joined by spaces, created_at -> ms)
-- ARGV[1]: P; ARGV[2]: the tags, joined by spaces
-- Returns: { count, tags, created } (created: 1 when this call wrote the map, 0 when the
--   queue had one, which is returned as it is)
local m = KEYS[NQ + 1]

-- 1. a map already there stays: partitions never change under jobs
local have = redis.call('HMGET', m, 'count', 'tags')
if have[1] then return { tonumber(have[1]), have[2], 0 } end

-- 2. otherwise this one is written
redis.call('HSET', m, 'count', ARGV[1], 'tags', ARGV[2], 'created_at', now_ms())
return { tonumber(ARGV[1]), ARGV[2], 1 }
