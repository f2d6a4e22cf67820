-- settle: applies a batch of outcomes (ack, retry, defer, dead-letter) and start marks in
-- one call.
--
-- KEYS: the queue's keys (lib.lua); touches jobs, lease, lease_tokens, started,
--   delayed[1..3], dead, errors, deferrals, counters, wake; reads settings (the
--   dead-letter cap, whether a global or per-key concurrency is set).
-- ARGV[1]: G, the number of ack groups that follow
-- then G ack groups, one per lease token (jobs fetched together share it) and kind:
--   token (the lease deadline fetch returned: a lease's token never changes), flags (+1:
--   these jobs have start marks, removed with the acks; +2: they are inline jobs, named
--   by their envelopes; 4, alone: a batch, below), k, then k lease items (lib.lua: job
--   ids, or envelopes)
--   A batch ack (flags 4: lib.lua's batch leases) acks every job of one batch: its k
--   items are the batch's name, then the ids among its items (the jobs stored by id,
--   whose records go with the ack; its inline jobs are named by nothing). Held at the
--   token, the batch and its list go, and its length counts as acked. Not held (expired,
--   split, already acked), it is reported in missed_batches; under kept completed jobs
--   it is split (its jobs get lease entries of their own at the same token) and reported
--   too, so the caller acks its jobs one by one.
-- then the other outcomes and the start marks, one group each (an `id` is the lease's
-- item: a job id or an inline job's envelope; an inline job is adopted first):
--   'R', id, token, priority (0-2), delay (ms), error
--        retry: attempt + 1 and back to delayed, or dead-letter once attempts are spent
--   'r', id, token, priority (0-2), delay (ms), error, max
--        the same, but attempts are spent at `max` runs (a retry rule's count) rather
--        than at the envelope's max_attempts
--   'F', id, token, priority (0-2), delay (ms), max deferrals, max age (ms), cause, reason
--        defer: back to delayed with the attempt untouched (backpressure, a kind or size
--        this consumer cannot take); the job's deferral record counts it under its cause
--        (a word: backpressure, unknown_kind, oversize), and once that cause's count is
--        over max deferrals or its first is older than max age (0 = no limit) the job is
--        dead-lettered with a reason that says so
--   'D', id, token, reason                  dead-letter now
--   'S', tag, token, k, then k job ids      start marks: these jobs' runs started at the
--        consumer tagged `tag` (HSET started id tag, for the ids still held), so a crash
--        of that consumer is not taken for "never ran" (see reclaim.lua); a retry or a
--        dead-letter removes its job's mark itself
--   'V', id, result                        the result of job `id`, acked in this call: kept
--        with it (K.results, cut to RESULT_MAX bytes) when the queue keeps completed
--        jobs, else dropped; an id whose ack was not applied keeps none. (A consumer sends
--        results only while the queue keeps completed jobs.)
--   'H', worker, lease (ms)                at most once, anywhere: record the runs this
--        call settles in their jobs' history (K.history, lib.lua's run_history): start =
--        the lease's token less `lease` (when the run's fetch leased it), end = now, the
--        worker's name, the outcome (retry, dead, defer; done for a completed job kept)
--        and the error or reason. Without it no history is written (acks of jobs not
--        kept never write one).
--   'C', tag, call, ttl (ms)               at most once, anywhere: this call's record, so
--        that a retry of it (its reply lost) changes nothing and gets the first try's
--        reply: a STRING at K.lease .. ':settled:' .. tag (the consumer's tag; the
--        queue's hash tag, as the batch keys) holding `call`, then, when the reply is not
--        empty, a space and the reply as JSON, expiring after `ttl`. A call whose number
--        matches the record returns the reply recorded, or the empty reply for a bare
--        number (ack_inline's MULTI records no reply), and writes nothing. A consumer
--        numbers its settle calls, one at a time, so one record per consumer suffices.
-- KEYS also end with the job records (lib.lua's records): history, done and results. Completed
-- jobs are kept when the queue's settings say so (keep_completed_ms / _count, lib.lua's
-- keep_setting): an acked job's envelope stays in jobs, its id goes to done, and done is
-- trimmed (trim_done); otherwise an ack deletes the job and its records.
-- Returns: { missed, spent, missed_inline, missed_batches }
--   missed: the ids not acted on because this caller no longer holds their lease
--     (expired and reclaimed, already settled, or listed twice), acks first, in ARGV
--     order; marks of ids no longer held are skipped and not reported;
--   spent: the ids of deferrals dead-lettered because their deferral budget was spent;
--   missed_inline: how many inline acks found no lease. An inline job's lease is its
--     envelope, leased by one fetch only (a reclaimed job is adopted, and comes back
--     named by its id; a released one is never acked by the consumer that released it),
--     so its ack needs no token check: one ZREM of the group, which says how many it
--     found, not which (an earlier try of a retried call settled them, or they expired);
--   missed_batches: the names of the batch acks not applied (see above).
-- Burying trims the dead-letter queue toward the queue's cap (lib.lua's trim_dead).

records()
local now = now_ms()
local missed, nm, missed_inline = {}, 0, 0
local retried, deferred, buried = 0, 0, 0
local spent = {}

local function miss(id)
  nm = nm + 1
  missed[nm] = id
end

-- 0. before the first write: the arguments' shape and numbers (a failure half way would
--    keep the writes before it), then the keys this call's outcomes write. Acks alone
--    (the hot path) write the lease, whose first ZREM fails before any write, the marks
--    they carry, the counters and, for stored jobs, the jobs' records; the rare outcomes
--    write more, and may bury (lib.lua's trim_ready).
local function shape()
  local has = { stored = false, marked = false, rare = false, history = nil, results = nil }
  local i = 2
  for _ = 1, arg_whole(1, 'the number of ack groups', 0) do
    arg_whole(i, 'a lease token', 0)
    local flags = arg_whole(i + 1, 'ack flags', 0, 4)
    local k = arg_whole(i + 2, 'an ack group size', 0, #ARGV - i - 2)
    if flags == 4 then
      if k < 1 then refuse('settle: a batch ack at argument ' .. i .. ' names no batch') end
      has.batches = true
    end
    if (flags < 2 or flags == 4) and k > 0 then has.stored = true end
    if flags % 2 == 1 then has.marked = true end
    i = i + 3 + k
  end
  local sizes = { R = 6, r = 7, F = 9, D = 4 }
  while i <= #ARGV do
    local op = ARGV[i]
    if sizes[op] then
      if i + sizes[op] - 1 > #ARGV then refuse('settle: outcome ' .. op .. ' at argument ' .. i .. ' is cut short') end
      if op ~= 'D' then
        arg_whole(i + 3, 'a priority', 0, 2)
        arg_whole(i + 4, 'a delay (ms)', 0)
      end
      if op == 'r' then arg_whole(i + 6, 'a max attempts', 1) end
      if op == 'F' then
        arg_whole(i + 5, 'max deferrals', 0)
        arg_whole(i + 6, 'max deferral age (ms)', 0)
      end
      has.rare = true
      i = i + sizes[op]
    elseif op == 'V' then
      if i + 2 > #ARGV then refuse('settle: outcome V at argument ' .. i .. ' is cut short') end
      has.results = has.results or {}
      has.results[ARGV[i + 1]] = ARGV[i + 2]
      i = i + 3
    elseif op == 'H' then
      if i + 2 > #ARGV then refuse('settle: outcome H at argument ' .. i .. ' is cut short') end
      has.history = { worker = ARGV[i + 1], lease = arg_whole(i + 2, 'a lease length (ms)', 0) }
      i = i + 3
    elseif op == 'C' then
      if i + 3 > #ARGV then refuse('settle: outcome C at argument ' .. i .. ' is cut short') end
      has.record = { key = K.lease .. ':settled:' .. ARGV[i + 1], call = ARGV[i + 2],
        ttl = arg_whole(i + 3, 'a record ttl (ms)', 1) }
      arg_whole(i + 2, 'a call number', 0)
      i = i + 4
    elseif op == 'S' then
      arg_whole(i + 2, 'a lease token', 0)
      i = i + 4 + arg_whole(i + 3, 'a start-mark group size', 0, #ARGV - i - 3)
      has.marked = true
    else
      refuse('settle: unknown outcome ' .. string.format('%q', string.sub(tostring(op), 1, 40)) ..
        ' at argument ' .. i)
    end
  end
  return has
end
local has = shape()
-- a retry of a call already applied: its first reply, nothing written
if has.record then
  local rec = redis.pcall('GET', has.record.key)
  if type(rec) == 'string' then
    local sp = string.find(rec, ' ', 1, true)
    if (sp and string.sub(rec, 1, sp - 1) or rec) == has.record.call then
      if not sp then return { {}, {}, 0, {} } end
      return cjson.decode(string.sub(rec, sp + 1))
    end
  end
end
-- (read now, used in step 5: under a global or per-key concurrency, ended leases wake;
-- and whether completed jobs are kept, and how many runs a history keeps)
local limits = hash_named(K.settings, { 'global_concurrency', 'key_concurrency', 'key_overrides',
  'keep_completed_ms', 'keep_completed_count', 'history_runs' })
local concurrency_limited = limits.global_concurrency or limits.key_concurrency or limits.key_overrides
local keep = keep_setting(limits.keep_completed_ms, limits.keep_completed_count)
local hist = has.history
local hist_runs = history_runs(limits.history_runs)
local has_tokens = expect(K.lease_tokens, 'hash')
if has.marked or has.rare then expect(K.started, 'hash') end
if has.stored or has.rare or keep then expect_each({ K.jobs, K.errors, K.deferrals }, 'hash') end
if keep then expect(K.results, 'hash') end
if has.rare then
  expect_each(K.delayed, 'zset')
  trim_ready()
end
if has.rare then
  counters_ready({ 'acked', 'retried', 'deferred', 'dead', 'trimmed' })
else
  counters_ready({ 'acked' })
end
-- the batch acks' batches, read before any write: held at their token, and their length
-- (their items, to split, when completed jobs are kept)
local batch_reads = {}
if has.batches then
  expect(K.batches, 'zset')
  local g = 2
  for _ = 1, tonumber(ARGV[1]) do
    local k = tonumber(ARGV[g + 2])
    if tonumber(ARGV[g + 1]) == 4 then
      local name = ARGV[g + 3]
      local score = redis.call('ZSCORE', K.batches, name)
      local b = { held = score and tonumber(score) == tonumber(ARGV[g]), score = score }
      if b.held and keep then
        b.items = batch_items(name)
      elseif b.held then
        b.len = redis.pcall('LLEN', batch_key(name))
        if type(b.len) ~= 'number' then expect(batch_key(name), 'list') end
      end
      batch_reads[g] = b
    end
    g = g + 3 + k
  end
end
local missed_batches, batches_gone = {}, {}

-- A run of job `id` under lease `token` ended with `outcome`: into its history, when this
-- call records history.
local function ran(id, token, outcome, message)
  if hist then
    run_history(id, hist_runs, math.max(0, tonumber(token) - hist.lease), now, hist.worker, outcome, message)
  end
end

-- Keeps the acked jobs `ids` of lease `token` (their envelopes in jobs; `items`, their
-- lease items, name them in ARGV) as completed, in bulk: their ids to done, their results
-- (the 'V' outcomes) to results, and a 'done' run to each one's history (written whole
-- for a job without one: `fresh`, an inline job, never has one).
local kept = 0
local function keep_done(ids, items, token, fresh)
  if #ids == 0 then return end
  local z = {}
  for j = 1, #ids do
    z[2 * j - 1], z[2 * j] = now, ids[j]
  end
  call_chunked('ZADD', K.done, z)
  kept = kept + #ids
  if has.results then
    local r = {}
    for j = 1, #ids do
      local v = has.results[items[j]]
      if v then
        r[#r + 1] = ids[j]
        r[#r + 1] = cut(v, RESULT_MAX)
      end
    end
    if #r > 0 then call_chunked('HSET', K.results, r) end
  end
  if not hist or hist_runs == 0 then return end
  local start = math.max(0, tonumber(token) - hist.lease)
  local whole = '[' .. run_json(start, now, hist.worker, 'done', '') .. ']'
  local olds = {}
  if not fresh then olds = hmget_chunked(K.history, ids) end
  local h = {}
  for j = 1, #ids do
    if olds[j] then
      run_history(ids[j], hist_runs, start, now, hist.worker, 'done', '')
    else
      h[#h + 1] = ids[j]
      h[#h + 1] = whole
    end
  end
  if #h > 0 then call_chunked('HSET', K.history, h) end
end

-- 1. acks, a group at a time: which ids are held (lib.lua's held_in), then those deleted in
--    bulk. The rare marks (extended leases, last errors, deferral records) are touched only
--    where they exist.
local na = 0
local i = 2
for _ = 1, tonumber(ARGV[1]) do
  local token, flags, k = ARGV[i], tonumber(ARGV[i + 1]), tonumber(ARGV[i + 2])
  local marked = flags % 2 == 1
  local first, last = i + 3, i + 2 + k
  if flags == 4 then
    local name, b = ARGV[first], batch_reads[i]
    if b.held and not batches_gone[name] and not keep then
      redis.call('ZREM', K.batches, name)
      redis.call('DEL', batch_key(name))
      if k > 1 then
        local ids = {}
        for c = first + 1, last do ids[#ids + 1] = ARGV[c] end
        call_chunked('HDEL', K.jobs, ids)
        forget(ids, false)
      end
      na = na + b.len
    else
      if b.held and not batches_gone[name] then split_batch(name, b.score, b.items) end
      missed_batches[#missed_batches + 1] = name
    end
    batches_gone[name] = true
  elseif flags >= 2 and keep then
    -- kept: the ZREM of each says which were held; those are adopted by their ids
    -- (lib.lua's adopt, in bulk)
    local ids, items, envs = {}, {}, {}
    for c = first, last do
      local item = ARGV[c]
      if redis.call('ZREM', K.lease, item) == 1 then
        if has_tokens then redis.call('HDEL', K.lease_tokens, item) end
        if marked then redis.call('HDEL', K.started, item) end
        local id = item_id(item) or ('unnamed-' .. redis.sha1hex(item))
        ids[#ids + 1] = id
        items[#items + 1] = item
        envs[#envs + 1] = id
        envs[#envs + 1] = item
      else
        missed_inline = missed_inline + 1
      end
    end
    if #envs > 0 then call_chunked('HSET', K.jobs, envs) end
    keep_done(ids, items, token, true)
    na = na + #ids
  elseif flags >= 2 then
    local c = first
    while c <= last do
      local e = math.min(c + CHUNK - 1, last)
      local removed = redis.call('ZREM', K.lease, unpack(ARGV, c, e))
      missed_inline = missed_inline + (e - c + 1 - removed)
      na = na + removed
      if has_tokens then redis.call('HDEL', K.lease_tokens, unpack(ARGV, c, e)) end
      if marked then redis.call('HDEL', K.started, unpack(ARGV, c, e)) end
      c = e + 1
    end
  else
    local acked, refused = held_in(token, first, last)
    if #acked > 0 then
      call_chunked('ZREM', K.lease, acked)
      if not keep then call_chunked('HDEL', K.jobs, acked) end
      if has_tokens then call_chunked('HDEL', K.lease_tokens, acked) end
      if marked then call_chunked('HDEL', K.started, acked) end
      forget(acked, keep)
      if keep then keep_done(acked, acked, token, false) end
      na = na + #acked
    end
    for j = 1, #refused do miss(refused[j]) end
  end
  i = last + 1
end

-- 2. start marks of the ids in ARGV[c .. c + k - 1] still held with `token`
local function mark(tag, token, c, k)
  local held = held_in(token, c, c + k - 1)
  local marks = {}
  for j = 1, #held do
    marks[2 * j - 1] = held[j]
    marks[2 * j] = tag
  end
  if #marks > 0 then call_chunked('HSET', K.started, marks) end
end

-- 3. failures and marks, one group at a time (the rare path)
while i <= #ARGV do
  local op = ARGV[i]
  if op == 'R' or op == 'r' or op == 'D' or op == 'F' then
    local item, token = ARGV[i + 1], ARGV[i + 2]
    -- (checked by shape)
    local rule_max = op == 'r' and tonumber(ARGV[i + 6]) or nil
    -- (an id settled earlier in this call has no lease left: not held)
    local held = lease_held(item, redis.call('ZSCORE', K.lease, item), token)
    local id = item
    if held then
      end_leases({ item })
      id = adopt(item)
    end
    if op == 'R' or op == 'r' then
      if held then
        local env = redis.call('HGET', K.jobs, id)
        local attempt, max = nil, nil
        if env then attempt, max = header(env) end
        if attempt and rule_max then max = rule_max end
        local err = ARGV[i + 5]
        if env and attempt and attempt + 1 < max then
          redis.call('HSET', K.jobs, id, with_attempt(env, attempt + 1))
          redis.call('HSET', K.errors, id, err)
          redis.call('ZADD', K.delayed[tonumber(ARGV[i + 3]) + 1], now + tonumber(ARGV[i + 4]), id)
          retried = retried + 1
          ran(id, token, 'retry', err)
        elseif env then
          if attempt then redis.call('HSET', K.jobs, id, with_attempt(env, attempt + 1)) end
          bury(id, err, now)
          buried = buried + 1
          ran(id, token, 'dead', err)
        end
      end
      i = i + (op == 'r' and 7 or 6)
    elseif op == 'F' then
      if held then
        local p, delay = tonumber(ARGV[i + 3]) + 1, tonumber(ARGV[i + 4])
        local max_n, max_ms = tonumber(ARGV[i + 5]), tonumber(ARGV[i + 6])
        if defer(id, p, delay, max_n, max_ms, ARGV[i + 8], now, ARGV[i + 7]) then
          deferred = deferred + 1
          ran(id, token, 'defer', ARGV[i + 8])
        else
          buried = buried + 1
          spent[#spent + 1] = item
          ran(id, token, 'dead', redis.call('HGET', K.errors, id))
        end
      end
      i = i + 9
    else
      if held then
        bury(id, ARGV[i + 3], now)
        buried = buried + 1
        ran(id, token, 'dead', ARGV[i + 3])
      end
      i = i + 4
    end
    if not held then miss(item) end
  elseif op == 'S' then
    local k = tonumber(ARGV[i + 3])
    mark(ARGV[i + 1], ARGV[i + 2], i + 4, k)
    i = i + 4 + k
  elseif op == 'C' then
    i = i + 4
  else
    -- 'H' and 'V' (read by shape)
    i = i + 3
  end
end

-- 4. counters and the dead-letter cap
count('acked', na)
count('retried', retried)
count('deferred', deferred)
count('dead', buried)
if buried > 0 then trim_dead() end
if kept > 0 then trim_done(keep, now) end

-- 5. a retry or a deferral is new delayed work: wake idle consumers so they learn when it
--    falls due (an idle fetcher otherwise sleeps until its periodic recheck, seconds away)
--    and, under a global or per-key concurrency, leases ended are permits back: consumers
--    waiting for one (or with jobs parked for one) look again
if retried + deferred > 0 then
  wake('retry')
elseif na + buried > 0 and concurrency_limited then
  wake('free')
end
local reply = { missed, spent, missed_inline, missed_batches }
if has.record then
  local rec = has.record.call
  if #missed + #spent + missed_inline + #missed_batches > 0 then rec = rec .. ' ' .. cjson.encode(reply) end
  redis.call('SET', has.record.key, rec, 'PX', has.record.ttl)
end
return reply
