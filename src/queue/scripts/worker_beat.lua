-- worker_beat: registers or refreshes a consumer in the queue's worker registry (`weir
-- workers`), or removes it; drops the entries of consumers that stopped beating.
--
-- KEYS: the queue's keys (lib.lua), then KEYS[20]: the workers ZSET (worker id -> when
--   its entry expires, ms), KEYS[21]: this worker's HASH (expires with it)
-- ARGV[1]: worker id
-- ARGV[2]: time to live, ms (0 = remove the entry: the consumer stops)
-- ARGV[3..]: field, value pairs of the record (host, pid, version, started_ms, limit,
--   running, ...)
-- Returns: the number of expired entries dropped from the registry.

local workers, record = KEYS[NQ + 1], KEYS[NQ + 2]
-- 0. before the first write: the arguments, and the keys written
local id, ttl = ARGV[1], arg_whole(2, 'the time to live (ms)', 0)
expect(workers, 'zset')
expect(record, 'hash')
if #ARGV % 2 ~= 0 then refuse('worker_beat: the record takes field, value pairs') end
local now = now_ms()
if ttl == 0 then
  redis.call('DEL', record)
  redis.call('ZREM', workers, id)
  return 0
end
local fields = { 'last_beat_ms', now }
for i = 3, #ARGV do fields[#fields + 1] = ARGV[i] end
call_chunked('HSET', record, fields)
redis.call('PEXPIRE', record, ttl)
redis.call('ZADD', workers, now + ttl, id)
-- Entries whose record expired: their consumers died without removing them.
return redis.call('ZREMRANGEBYSCORE', workers, '-inf', '(' .. now)
