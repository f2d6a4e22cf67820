-- dlq_purge: deletes up to N dead-lettered jobs, oldest first.
--
-- KEYS: the queue's keys (lib.lua); touches dead, jobs, errors, deferrals; then the job
--   records (lib.lua's records), whose histories go with the jobs.
-- ARGV[1]: the most jobs to delete in this call (the caller loops for more)
-- Returns: the number deleted.

-- a limit of 0 would make the stop index -1, which Redis reads as "to the end"
-- 0. before the first write: the limit, and the keys written
local limit = arg_whole(1, 'the limit', 0)
records()
expect(K.dead, 'zset')
expect_each({ K.jobs, K.errors, K.deferrals }, 'hash')
if limit == 0 then return 0 end
local ids = redis.call('ZRANGE', K.dead, 0, limit - 1)
if #ids == 0 then return 0 end
call_chunked('ZREM', K.dead, ids)
call_chunked('HDEL', K.jobs, ids)
forget(ids)
return #ids
