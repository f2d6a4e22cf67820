-- samples: appends one sample of the queue's counters and depths to its history, at most
-- once per period whoever calls: every consumer's housekeeping calls it once a period,
-- the first call of a period writes and the others find the period taken and write
-- nothing. So N consumers cost N O(1) calls and one write per period, and every reader
-- (the UI, `weir stats`) sees the same samples.
--
-- KEYS: the queue's keys (lib.lua), then the history (LIST of samples, newest first) as
--   the last key.
-- ARGV: period (ms, > 0), samples kept (> 0).
-- Returns: 1 a sample was written; 0 this period has one already.
-- A sample: 'slot at enqueued fetched acked retried deferred dead ready delayed
--   in_flight dead_size', whole numbers separated by spaces: slot the period's start (ms,
--   Redis clock), at the time of the read (ms), then the six counters, then the sizes.

local HIST = KEYS[#KEYS]
-- 0. before the first write: the arguments and the key it writes
local period = arg_whole(1, 'the period (ms)', 1, 3600000)
local kept = arg_whole(2, 'the samples kept', 1, 100000)
expect(HIST, 'list')

-- 1. one sample per period: the newest one's slot says whether this period has one
local now = now_ms()
local slot = now - now % period
local head = redis.call('LINDEX', HIST, 0)
local last = head and tonumber(string.match(head, '^(%d+) '))
if last and last >= slot then return 0 end

-- 2. the read: counters (garbage reads as 0), then the sizes as stats.lua counts them
local names = { 'enqueued', 'fetched', 'acked', 'retried', 'deferred', 'dead' }
local got = hash_fields(K.counters, names)
local parts = { slot, now }
for i = 1, #names do
  local v = got[i] and string.match(got[i], '^%d+$') and got[i] or '0'
  parts[#parts + 1] = v
end
local ready = redis.call('LLEN', K.suspects)
for p = 1, 3 do ready = ready + redis.call('LLEN', K.ready[p]) end
local delayed = 0
for p = 1, 3 do delayed = delayed + redis.call('ZCARD', K.delayed[p]) end
parts[#parts + 1] = ready
parts[#parts + 1] = delayed
parts[#parts + 1] = redis.call('ZCARD', K.lease) + batched_jobs()
parts[#parts + 1] = redis.call('ZCARD', K.dead)

-- 3. the write: push, keep the newest `kept` (LTRIM drops at most one: O(1)), and let a
-- history nobody writes any more expire after twice its span
redis.call('LPUSH', HIST, table.concat(parts, ' '))
redis.call('LTRIM', HIST, 0, kept - 1)
redis.call('PEXPIRE', HIST, period * kept * 2)
return 1
