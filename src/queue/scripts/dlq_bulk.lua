-- dlq_bulk: requeues or deletes the dead-lettered jobs that match a filter, one bounded
-- window per call (the caller loops), for `weir dlq requeue --kind/--older-than`, `weir
-- dlq purge` and the UI.
--
-- KEYS: the queue's keys (lib.lua); touches dead, jobs, errors, deferrals, ready[1..3],
--   counters, wake; then the job records (lib.lua's records): a deleted job's history
--   goes with it, a requeued one keeps it.
-- ARGV[1]: 'requeue' (to the back of ready, fresh attempt count) or 'delete'
-- ARGV[2]: rank to start at, oldest first (0 = the oldest; the caller passes back `next`)
-- ARGV[3]: the most entries to look at in this call (>= 1)
-- ARGV[4]: only jobs dead-lettered at least this many ms ago (0 = any age)
-- ARGV[5]: only jobs of this kind ('' = every kind)
-- Returns: { acted, next, done }
--   next: the rank to start the next call at (entries acted on left the set, the others
--   stay); done: 1 when no entry past this window can match (the set ends, or the next
--   entry is younger than the cutoff).

-- 0. before the first write: the arguments, and every key it may write
local action, rank, window = ARGV[1], arg_whole(2, 'the rank', 0), arg_whole(3, 'the window', 1)
local min_age, kind = arg_whole(4, 'the minimum age (ms)', 0), ARGV[5] or ''
records()
expect(K.dead, 'zset')
expect_each(K.ready, 'list')
expect_each({ K.jobs, K.errors, K.deferrals }, 'hash')
counters_ready({ 'deleted' })
local cutoff = nil
if min_age > 0 then cutoff = now_ms() - min_age end

-- 1. the window, by rank (O(log n) to reach it, whatever the rank), up to the cutoff
local scored = redis.call('ZRANGE', K.dead, rank, rank + window - 1, 'WITHSCORES')
local got, done = {}, 0
if #scored < 2 * window then done = 1 end
for i = 1, #scored, 2 do
  if cutoff and tonumber(scored[i + 1]) > cutoff then
    done = 1
    break
  end
  got[#got + 1] = scored[i]
end

-- 2. the entries of the kind asked for leave the set
local envs = {}
if #got > 0 then envs = hmget_chunked(K.jobs, got) end
local ids, kept_envs = {}, {}
for i = 1, #got do
  local env = envs[i]
  if kind == '' or (env and env_kind(env) == kind) then
    ids[#ids + 1] = got[i]
    kept_envs[#ids] = env
  end
end
if #ids > 0 then call_chunked('ZREM', K.dead, ids) end

-- 3. requeued (an entry without an envelope has nothing to requeue: it just goes), or
--    deleted
local acted = 0
if action == 'requeue' then
  for i = 1, #ids do
    if kept_envs[i] then
      revive(ids[i], kept_envs[i], false, true)
      acted = acted + 1
    end
  end
  if acted > 0 then wake('requeue') end
elseif #ids > 0 then
  call_chunked('HDEL', K.jobs, ids)
  forget(ids)
  acted = #ids
  count('deleted', acted)
end
return { acted, rank + #got - #ids, done }
