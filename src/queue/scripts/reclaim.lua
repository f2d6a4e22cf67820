-- reclaim: brings back jobs whose lease expired (their consumer crashed or stalled). Only
-- a job that ran alone, as a suspect, is charged an attempt for it.
--
-- KEYS: the queue's keys (lib.lua); touches lease, lease_tokens, started, suspects, jobs,
--   ready[1..3], deferrals, dead, errors, counters, wake; reads settings (the dead-letter
--   cap).
-- ARGV[1]: the most leases to reclaim in this call
-- ARGV[2]: deferral budget: the most deferrals of one job (0 = no limit)
-- ARGV[3]: deferral budget: the longest time since a job's first deferral, ms (0 = none)
-- ARGV[4] (optional): the lease length consumers fetch with, ms. Given, each expired lease
--   whose job was running (it has a start mark) is a run its consumer never ended: it goes
--   into the job's history (lib.lua's run_history, within the queue's history_runs) as
--   outcome 'expired' (or 'dead' when this reclaim dead-letters it), worker = the mark's
--   consumer, start = the lease's token less ARGV[4] (when its fetch leased it, for a
--   consumer that fetches with this lease length), end = its deadline. One read and one
--   write of the job's record each: O(1) per job.
-- KEYS also end with the job records (lib.lua's records): history, done and results.
-- Returns: { returned, suspects, dead_lettered, trimmed, trimmed_total, next_expiry }
--   Every call, expired leases or not, trims the dead-letter queue a bounded step toward
--   the queue's cap, so an excess left by a lowered cap drains over calls, and the
--   completed jobs kept (lib.lua's trim_done) by their age and count: all of them, a step
--   a call, once the queue keeps none. trimmed: the
--   entries this call trimmed; trimmed_total: the queue's 'trimmed' counter after it (the
--   consumer logs trim streaks from its changes, whoever trimmed). next_expiry: ms from now
--   until the earliest lease left expires (0 if one is due already), -1 when no lease is
--   held: an idle consumer sleeps until then, since only a fetch (which a wake message
--   announces) adds a lease.
--   What happens to each expired lease depends on its start mark (K.started):
--   - none: the job never ran (it sat in a buffer, or a fetch reply was lost). Back to the
--     front of its ready list (it has waited already), attempt untouched; it counts as a
--     deferral (cause unstarted_reclaim), and is dead-lettered once that cause's budget is
--     spent. (returned)
--   - a consumer's tag: it was running when that consumer died. It may have killed it, or
--     be an innocent job running beside the one that did: to the suspects list, uncharged.
--     fetch hands suspects out one per call, and a consumer runs them one at a time.
--     (suspects)
--   - a tag .. ':s': it was running alone, as a suspect, when its consumer died: it is
--     charged an attempt, and dead-lettered once they are spent (else back to the
--     suspects list). So a job that kills every consumer that runs it ends in the
--     dead-letter queue, and the jobs that ran beside it are never charged for it.
--   (Grouping the started jobs by consumer would change nothing: beside a suspect or not,
--   a job that was not the suspect goes to the suspects list uncharged.)
--   An envelope weir did not write goes back to normal ready as it is (returned).

-- 0. before the first write: the arguments, and every key this call may write (a failure
--    after a write would keep it: leases ended and jobs not put back). Not the hot path:
--    a consumer calls this about once a second.
local n = arg_whole(1, 'the most leases to reclaim', 1)
local max_n, max_ms = arg_whole(2, 'max deferrals', 0), arg_whole(3, 'max deferral age (ms)', 0)
local lease_ms = nil
if #ARGV >= 4 then lease_ms = arg_whole(4, 'a lease length (ms)', 0) end
local now = now_ms()
records()
local fields = hash_named(K.settings, { 'keep_completed_ms', 'keep_completed_count', 'history_runs' })
local keep = keep_setting(fields.keep_completed_ms, fields.keep_completed_count) or { count = 0 }
local hist_runs = lease_ms and history_runs(fields.history_runs) or 0
expect(K.results, 'hash')
expect(K.lease, 'zset')
expect_each({ K.lease_tokens, K.started }, 'hash')
expect_each(K.ready, 'list')
expect(K.suspects, 'list')
trim_ready()
counters_ready({ 'reclaimed', 'deferred', 'dead', 'trimmed' })
expect(K.batches, 'zset')
-- expired batches (lib.lua's batch leases), at most BATCHES_SPLIT a call, oldest first,
-- with their items: split below, before the leases are read, so their jobs are expired
-- leases of their own and follow every rule below
local BATCHES_SPLIT = 16
local expired = redis.call('ZRANGEBYSCORE', K.batches, '-inf', '(' .. now, 'WITHSCORES', 'LIMIT', 0, BATCHES_SPLIT)
local expired_items = {}
for j = 1, #expired, 2 do expired_items[#expired_items + 1] = batch_items(expired[j]) end

-- The reply, after the dead-letter trim every call makes.
local function done(returned, suspects, buried)
  local trimmed = trim_dead()
  if redis.call('EXISTS', K.done) == 1 then trim_done(keep, now) end
  local total = tonumber(redis.call('HGET', K.counters, 'trimmed')) or 0
  if total ~= math.floor(total) then total = 0 end
  local next_expiry = -1
  for _, key in ipairs({ K.lease, K.batches }) do
    local first = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
    if #first == 2 then
      local d = math.max(0, math.floor(tonumber(first[2]) - now))
      if next_expiry < 0 or d < next_expiry then next_expiry = d end
    end
  end
  return { returned, suspects, buried, trimmed, total, next_expiry }
end

-- 1. leases past their deadline (the expired batches' jobs among them), their start
--    marks, and the end of the leases (lease items: ids, or inline jobs, adopted here:
--    each outcome below is kept by id)
for j = 1, #expired, 2 do split_batch(expired[j], expired[j + 1], expired_items[(j + 1) / 2]) end
local found = redis.call('ZRANGEBYSCORE', K.lease, '-inf', '(' .. now, 'WITHSCORES', 'LIMIT', 0, n)
if #found == 0 then return done(0, 0, 0) end
local items, deadlines = {}, {}
for j = 1, #found, 2 do
  items[#items + 1] = found[j]
  deadlines[#deadlines + 1] = tonumber(found[j + 1])
end
local marks, tokens = {}, {}
if redis.call('EXISTS', K.started) == 1 then marks = hmget_chunked(K.started, items) end
if hist_runs > 0 and redis.call('EXISTS', K.lease_tokens) == 1 then tokens = hmget_chunked(K.lease_tokens, items) end
end_leases(items)
local ids = {}
for i = 1, #items do ids[i] = adopt(items[i]) end

-- A run that lease i's consumer (`mark`, its start mark) never ended: into the job's
-- history, when this call records them (ARGV[4]). The lease's token is its first
-- deadline (its score until extended, then kept in lease_tokens).
local function lost_run(i, id, mark, outcome, message)
  if hist_runs == 0 then return end
  local token = tonumber(tokens[i]) or deadlines[i]
  local worker = string.gsub(mark, ':s$', '')
  run_history(id, hist_runs, math.max(0, math.floor(token - lease_ms)), math.floor(deadlines[i]),
    worker, outcome, message)
end

-- 2. each job by its mark; a lease whose job was purged is dropped
local returned, deferred, suspects, buried = 0, 0, 0, 0
local envs = hmget_chunked(K.jobs, ids)
for i = 1, #ids do
  local id, env, mark = ids[i], envs[i], marks[i]
  if env and mark then
    -- (read first, written here: the job's record, one HGET and one HSET)
    local attempt, max = header(env)
    if attempt and string.sub(mark, -2) == ':s' and attempt + 1 >= max then
      lost_run(i, id, mark, 'dead', 'lease expired while it ran as a suspect: its consumer stopped')
    elseif string.sub(mark, -2) == ':s' then
      lost_run(i, id, mark, 'expired', 'lease expired while it ran as a suspect: its consumer stopped (charged)')
    else
      lost_run(i, id, mark, 'expired', 'lease expired while it ran: its consumer stopped (not charged: it may have run beside the job that stopped it)')
    end
  end
  if env then
    local attempt, max, p = header(env)
    if not attempt then
      redis.call('LPUSH', K.ready[2], id)
      returned = returned + 1
    elseif not mark then
      if defer(id, p, -1, max_n, max_ms, 'lease expired before its run started', now, 'unstarted_reclaim') then
        returned = returned + 1
        deferred = deferred + 1
      else
        buried = buried + 1
      end
    elseif string.sub(mark, -2) == ':s' then
      redis.call('HSET', K.jobs, id, with_attempt(env, attempt + 1))
      if attempt + 1 >= max then
        bury(id, 'lease expired while it ran as a suspect after ' .. (attempt + 1) .. ' attempts', now)
        buried = buried + 1
      else
        redis.call('HSET', K.errors, id, 'lease expired while it ran as a suspect')
        redis.call('RPUSH', K.suspects, id)
        suspects = suspects + 1
      end
    else
      redis.call('RPUSH', K.suspects, id)
      suspects = suspects + 1
    end
  end
end

-- 3. counters, wake, cap
count('reclaimed', returned + suspects + buried)
count('deferred', deferred)
count('dead', buried)
if returned + suspects > 0 then wake('reclaim') end
return done(returned, suspects, buried)
