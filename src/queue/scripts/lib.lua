-- Shared prelude, prepended to every weir script (see scripts.rs).
--
-- Every script receives the same KEYS, in the order keys.rs builds them, all under the
-- queue's {hash tag} so a script touches one cluster slot:
--   KEYS[1..3]  LIST  ready items, priority high, normal, low (pushed right, popped left)
--   KEYS[4..6]  ZSET  delayed id -> due time ms, priority high, normal, low
--   KEYS[7]     HASH  id -> envelope (JSON)
--   KEYS[8]     ZSET  item -> lease deadline ms (the in-flight set)
--   KEYS[9]     ZSET  id -> dead-lettered-at ms (the dead-letter queue, capped)
--   KEYS[10]    HASH  id -> last error / dead-letter reason
--   KEYS[11]    STRING  present while the queue is paused
--   KEYS[12]    HASH  counters (enqueued, fetched, acked, retried, deferred, dead, reclaimed,
--                     trimmed)
--   KEYS[13]    pub/sub channel that wakes idle consumers (not a key; same hash tag)
--   KEYS[14]    HASH  id -> consumer tag, or tag .. ':s' for a suspect: runs that started
--                     while leased (marked by the consumer in its batched settle calls)
--   KEYS[15]    LIST  suspects: ids reclaimed after their run had started
--   KEYS[16]    HASH  id -> 'count first_ms cause=count:first_ms ...': deferrals (not-charged
--                     returns) of a job, in all and per cause (see deferral_record)
--   KEYS[17]    HASH  id -> fetch token, only for leases that were extended
--   KEYS[18]    HASH  queue settings (dead_cap, and the runtime limits consumers poll)
--   KEYS[19]    prefix (not a key): KEYS[19] .. unique key is a STRING holding the id of the
--                     job that took that key, expiring (PX) at the end of its window
-- Items: the ready lists, the suspects list and the lease hold items, each either a job
-- id, whose envelope is in K.jobs, or an inline job: the envelope itself (it opens with
-- '{', which no id holds), stored nowhere else. The bulk load of generated ids that are
-- ready now (enqueue.rs's enqueue_plain) writes inline jobs, so a job that runs once and
-- succeeds costs Redis one list push, one pop, one lease add and one lease remove. A job
-- that needs a record by its id (a retry, a deferral, a dead letter, a reclaim, a hold by
-- its key's limits) is adopted first: its envelope goes to K.jobs and its id replaces it.
-- Per-lease records (K.lease_tokens, K.started) are keyed by the item.
local K = {
  ready = { KEYS[1], KEYS[2], KEYS[3] },
  delayed = { KEYS[4], KEYS[5], KEYS[6] },
  jobs = KEYS[7],
  lease = KEYS[8],
  dead = KEYS[9],
  errors = KEYS[10],
  paused = KEYS[11],
  counters = KEYS[12],
  wake = KEYS[13],
  started = KEYS[14],
  suspects = KEYS[15],
  deferrals = KEYS[16],
  lease_tokens = KEYS[17],
  settings = KEYS[18],
  unique = KEYS[19],
}
-- How many of KEYS are the queue's own (keys.rs's KEY_COUNT); a script's extra keys follow.
local NQ = 19

-- The job records kept beside the queue's keys (keys.rs's QueueKeys::records): the scripts
-- that write, read or delete jobs take them as their last two KEYS and call records()
-- first; in the others they are nil and never touched.
--   K.history  HASH  id -> the job's last runs, newest last, as a JSON array of
--                    {"start","end","worker","outcome","message"} (run_history)
--   K.done     ZSET  id -> completed-at ms: completed jobs kept on request (their envelope
--                    stays in K.jobs), trimmed by age and count (trim_done)
--   K.results  HASH  id -> a kept completed job's result (its handler's return value as
--                    text, cut to RESULT_MAX bytes), written by settle, dropped with the
--                    job (drop_results). Its type is checked where it is written or read
--                    (expect), not here: fetch takes the records too, and never touches it.
local function records()
  K.history, K.done, K.results = KEYS[#KEYS - 2], KEYS[#KEYS - 1], KEYS[#KEYS]
  -- before any write: the HDELs and ZADDs on them come late in a script
  local t = redis.call('TYPE', K.history).ok
  if t ~= 'hash' and t ~= 'none' then
    error({ err = 'WRONGTYPE weir: ' .. K.history .. ' holds a ' .. t .. ', not the hash weir keeps there (written by hand?); nothing was changed' })
  end
  t = redis.call('TYPE', K.done).ok
  if t ~= 'zset' and t ~= 'none' then
    error({ err = 'WRONGTYPE weir: ' .. K.done .. ' holds a ' .. t .. ', not the zset weir keeps there (written by hand?); nothing was changed' })
  end
end

-- Redis server time in ms: workers' clocks never matter.
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- Wakes the queue's idle consumers, saying why: on sharded pub/sub where they listen
-- there (on a Redis Cluster consumers SSUBSCRIBE, and the message stays on the queue's
-- shard instead of going to every node), on plain pub/sub otherwise.
local function wake(why)
  if redis.call('PUBSUB', 'SHARDNUMSUB', K.wake)[2] > 0 then
    redis.call('SPUBLISH', K.wake, why)
  else
    redis.call('PUBLISH', K.wake, why)
  end
end

-- Guards, for the top of a script: Redis keeps a script's writes up to an error, so a
-- script must meet anything that can fail (a key of the wrong type, a bad argument)
-- before its first write, and answer it with an error that says nothing was changed.
local function refuse(msg)
  error({ err = 'ERR weir: ' .. msg .. '; nothing was changed' })
end

-- Refuses `key` if it holds a type other than `want` (a queue key written by hand, not
-- by weir). Returns whether it exists. One TYPE call (about 0.6 us in Lua): scripts on
-- the hot path check only the keys whose first touch would otherwise come after a write.
local function expect(key, want)
  local t = redis.call('TYPE', key).ok
  if t == want then return true end
  if t == 'none' then return false end
  error({ err = 'WRONGTYPE weir: ' .. key .. ' holds a ' .. t .. ', not the ' .. want ..
    ' weir keeps there (written by hand?); nothing was changed' })
end

local function expect_each(keys, want)
  for i = 1, #keys do expect(keys[i], want) end
end

-- Whether any of the three keys `keys` (the ready lists, the delayed sets) exists, in one
-- EXISTS: Redis deletes a list or a set once it is empty, so none exists when all three
-- are empty. One call instead of three: a call into Redis costs a script a few µs
-- whatever it finds (a fetch of an empty queue: 41-47 µs of Redis with a ZRANGEBYSCORE
-- of each delayed set, twice, against 31-45 with this; redis-benchmark, commandstats).
local function any_key(keys)
  return redis.call('EXISTS', keys[1], keys[2], keys[3]) > 0
end

-- A whole number in [lo, hi] from a script argument, or nil (garbage, a fraction, out of
-- range: numbers past 2^53 lose their digits, and Redis refuses some past 2^63).
local MAX_WHOLE = 9007199254740991
local function whole_in(v, lo, hi)
  local x = tonumber(v)
  if x and x == math.floor(x) and x >= lo and x <= (hi or MAX_WHOLE) then return x end
  return nil
end

-- ARGV[i] as whole_in reads it, or a refusal naming `what`.
local function arg_whole(i, what, lo, hi)
  local x = whole_in(ARGV[i], lo, hi)
  if not x then refuse(what .. ' (argument ' .. i .. ') must be a whole number from ' .. lo ..
    ' to ' .. (hi or MAX_WHOLE) .. ', not ' .. string.format('%q', string.sub(tostring(ARGV[i]), 1, 40))) end
  return x
end

-- One read of a settings or counters hash: HMGET, with a wrong type refused clearly.
local function hash_fields(key, fields)
  local got = redis.pcall('HMGET', key, unpack(fields))
  if got.err then expect(key, 'hash') end
  return got
end

-- hash_fields as a table by field name (a missing field is false), so callers read
-- settings by name, not by position.
local function hash_named(key, fields)
  local got = hash_fields(key, fields)
  local t = {}
  for i = 1, #fields do t[fields[i]] = got[i] end
  return t
end

-- Counters this call will bump (count), read before the first write: a counters key of
-- the wrong type is refused, and a field holding what HINCRBY cannot add to (garbage, or
-- a number near the integer limit) restarts from this call's count instead of failing
-- the call after its writes.
local RESTART = {}
local function counters_ready(fields)
  local got = hash_fields(K.counters, fields)
  for i = 1, #fields do
    local v = got[i]
    if v and not (#v <= 15 and string.match(v, '^%-?%d+$')) then RESTART[fields[i]] = true end
  end
end

-- Bumps a counter (checked by counters_ready first).
local function count(field, n)
  if n <= 0 then return end
  if RESTART[field] then
    redis.call('HSET', K.counters, field, n)
    RESTART[field] = nil
  else
    redis.call('HINCRBY', K.counters, field, n)
  end
end

-- Lua's unpack fails near 8,000 values: variadic calls go in chunks of CHUNK (even, so
-- score/member pairs never split).
local CHUNK = 4000

local function call_chunked(cmd, key, items)
  local n = #items
  local i = 1
  while i <= n do
    local j = math.min(i + CHUNK - 1, n)
    redis.call(cmd, key, unpack(items, i, j))
    i = j + 1
  end
end

local function hmget_chunked(key, ids)
  local n = #ids
  if n <= CHUNK then return redis.call('HMGET', key, unpack(ids, 1, n)) end
  local out = {}
  local i = 1
  while i <= n do
    local j = math.min(i + CHUNK - 1, n)
    local got = redis.call('HMGET', key, unpack(ids, i, j))
    for k = 1, #got do out[i + k - 1] = got[k] end
    i = j + 1
  end
  return out
end

-- Whether a ready, suspects or lease item is an inline job (the envelope itself).
local function is_inline(item)
  return string.byte(item, 1) == 123
end

-- The id an inline job's envelope holds (the header's fifth field, or a compact
-- envelope's first: see compact below), or nil.
local ITEM_ID = '^{"attempt":%d+,"max_attempts":%d+,"priority":%d,"enqueued_at":%d+,"id":"([^"]*)"'
local COMPACT_ID = '^{"id":"([^"]*)"'
local function item_id(item)
  if not is_inline(item) then return item end
  return string.match(item, ITEM_ID) or string.match(item, COMPACT_ID)
end

-- Adopts an inline job (out of its list or lease already): its envelope to K.jobs under
-- its id, which is returned; an id is returned as it is. An envelope without a readable
-- id (not written by weir) is stored under 'unnamed-' and its SHA-1, so it can still be
-- dead-lettered and looked at.
local function adopt(item)
  if not is_inline(item) then return item end
  local id = item_id(item) or ('unnamed-' .. redis.sha1hex(item))
  redis.call('HSET', K.jobs, id, item)
  return id
end

-- Batch leases (docs/batch-leases.md): a fetch may lease its jobs as one batch instead of
-- an entry each in K.lease. K.batches (ZSET) holds each live batch's name -> its deadline,
-- which is also its token (a batch is never extended: it is split first); the batch's
-- items (ids or inline envelopes, in fetch order) are in the LIST batch_key(name). A
-- split turns a batch back into per-item leases at the batch's deadline, after which
-- every per-item rule applies: start marks, extends, outcomes, reclaim.
K.batches = K.lease .. ':batches'
local function batch_key(name)
  return K.lease .. ':batch:' .. name
end

-- The most jobs in one batch (fetch caps it), so a split reads a batch in one LRANGE and
-- writes it in one ZADD.
local BATCH_MAX = CHUNK / 2

-- The items of batch `name`, read before any write (a batch key of another type, written
-- by hand, fails here rather than after a write): its LRANGE, at most BATCH_MAX.
local function batch_items(name)
  local got = redis.pcall('LRANGE', batch_key(name), 0, BATCH_MAX - 1)
  if got.err then expect(batch_key(name), 'list') end
  return got
end

-- Splits batch `name` (deadline `score`, items `items` as batch_items read them): each
-- item becomes a lease entry at the batch's deadline, and the batch goes. An id whose
-- envelope is gone (deleted while leased) gets no lease, as a fetch drops it.
local function split_batch(name, score, items)
  local z = {}
  for i = 1, #items do
    local item = items[i]
    if is_inline(item) or redis.call('HEXISTS', K.jobs, item) == 1 then
      z[#z + 1] = score
      z[#z + 1] = item
    end
  end
  if #z > 0 then call_chunked('ZADD', K.lease, z) end
  redis.call('ZREM', K.batches, name)
  redis.call('DEL', batch_key(name))
end

-- Splits every live batch (at most `max`, oldest deadline first; all when nil): for the
-- calls that need every lease as an entry of K.lease (per-key limits' first count). All
-- read first. Returns how many were split.
local function split_all(max)
  local names = redis.call('ZRANGE', K.batches, 0, (max or CHUNK) - 1, 'WITHSCORES')
  local read = {}
  for i = 1, #names, 2 do read[#read + 1] = batch_items(names[i]) end
  for i = 1, #names, 2 do split_batch(names[i], names[i + 1], read[(i + 1) / 2]) end
  return #names / 2
end

-- The live batches holding any of the jobs `wanted` (id -> anything but false), by an id
-- item or an inline job's id: a scan of every batch, for the operator's calls by id
-- (job_show, jobs_delete, job_run_now). Returns id -> { item, the batch's deadline, its
-- name }, and name -> { deadline, items } of the batches found (for split_batch).
local function find_in_batches(wanted)
  local found, holding = {}, {}
  local batches = redis.call('ZRANGE', K.batches, 0, -1, 'WITHSCORES')
  for i = 1, #batches, 2 do
    local name, score = batches[i], batches[i + 1]
    local items = batch_items(name)
    for j = 1, #items do
      local item = items[j]
      local id = item
      if is_inline(item) then id = item_id(item) end
      if id and wanted[id] and not found[id] then
        found[id] = { item, tonumber(score), name }
        holding[name] = { score, items }
      end
    end
  end
  return found, holding
end

-- How many jobs live batches hold (LLEN of each, the first CHUNK batches by deadline):
-- counted with K.lease's entries wherever leases are counted.
local function batched_jobs()
  local names = redis.call('ZRANGE', K.batches, 0, CHUNK - 1)
  local n = 0
  for i = 1, #names do n = n + redis.call('LLEN', batch_key(names[i])) end
  return n
end

-- The lists where jobs wait, numbered as inline_find.lua and the operator's calls number
-- them: 1 the suspects, 2..4 the ready lists (high, normal, low); nil for anything else
-- (a missing number too, so a bad hint is ignored, never an error after a write).
local function waiting(n)
  if n == 1 then return K.suspects end
  if type(n) ~= 'number' then return nil end
  return K.ready[n - 1]
end

-- Finds inline jobs by id, for the operator's calls by id (job_show, jobs_delete,
-- job_run_now): a scan of the lease and the batches, which hold the jobs in flight (as
-- many as the fleet runs and prefetches, not the backlog), SCAN entries a call, that stops
-- once every id is found. The lists where jobs wait are not read here: their length is
-- the backlog. A paged search (inline_find.lua, bounded work a call) reads them first,
-- and `hints` (id -> { list number (waiting), item, its index from the head then }) says
-- where it saw each job: a job in flight now is found in flight, any other is taken as
-- the search saw it, waiting in that list (a caller that removes it checks that it did:
-- jobs_delete's LREM). `wanted`: id -> anything but false. Returns id -> { item, the key
-- holding it, lease deadline (leased only), the name of the batch leasing it (K.lease is
-- the key then: split the batch before touching its lease), the hint's index (waiting
-- only) }.
local SCAN = 1000

-- The hint ARGV[at..at + 2] give for job `id` (a list's number, an item and its index
-- from the head), as find_inline's hints; nil without them.
local function hint(id, at)
  if not ARGV[at + 2] then return nil end
  return { [id] = { tonumber(ARGV[at]), ARGV[at + 1], tonumber(ARGV[at + 2]) } }
end

local function find_inline(wanted, hints)
  local found, left = {}, 0
  for _ in pairs(wanted) do left = left + 1 end
  if left == 0 then return found end
  local function hit(item, key, score, batch, index)
    if not is_inline(item) then return false end
    local id = item_id(item)
    if id and wanted[id] and not found[id] then
      found[id] = { item, key, score, batch, index }
      left = left - 1
    end
    return left == 0
  end
  local n = redis.call('ZCARD', K.lease)
  for at = 0, n - 1, SCAN do
    local got = redis.call('ZRANGE', K.lease, at, at + SCAN - 1, 'WITHSCORES')
    for i = 1, #got, 2 do
      if hit(got[i], K.lease, tonumber(got[i + 1])) then return found end
    end
  end
  for id, f in pairs(find_in_batches(wanted)) do
    if is_inline(f[1]) and hit(f[1], K.lease, f[2], f[3]) then return found end
  end
  for id, h in pairs(hints or {}) do
    local key, item = waiting(h[1]), h[2]
    if key and wanted[id] and item_id(item) == id and hit(item, key, nil, nil, h[3]) then
      return found
    end
  end
  return found
end

-- An envelope weir writes comes in one of two forms. The full form opens with this fixed
-- header (envelope.rs keeps the field order), so scripts read and bump the attempt count
-- without a cjson round trip, which would rewrite the payload's numbers. The compact form,
-- which producers write for a fresh plain job, is the full form without its four leading
-- numbers: it opens with '{"id":"', and its header is implied: attempt 0, max_attempts
-- COMPACT_MAX_ATTEMPTS, normal priority, enqueued at the time its id holds (compact_at).
-- A job charged an attempt is written back in the full form (with_attempt).
local HEADER = '^{"attempt":(%d+),"max_attempts":(%d+),"priority":(%d),'
local COMPACT = '^{"id":"'

-- The max_attempts of a compact envelope: Rust's DEFAULT_MAX_ATTEMPTS (queue::producer)
-- is the same.
local COMPACT_MAX_ATTEMPTS = 5

local function is_compact(env)
  return string.find(env, COMPACT) ~= nil
end

-- A time id: 8 base-36 digits (its enqueue time, ms since the Unix epoch, zero-padded),
-- '.', 16 hex digits, '-', a counter in hex, then maybe a partition's '.p<n>'.
local TIME_ID = '^{"id":"(' .. string.rep('[0-9a-z]', 8) .. ')%.' .. string.rep('[0-9a-f]', 16) .. '%-[0-9a-f]+'

-- The enqueue time (ms) a compact envelope's id holds, or nil when its id is not a time id.
local function compact_at(env)
  local _, e, t = string.find(env, TIME_ID)
  if not e then return nil end
  if string.find(env, '^"', e + 1) or string.find(env, '^%.p%d+"', e + 1) then return tonumber(t, 36) end
  return nil
end

-- Returns attempt, max_attempts, priority (1-based index into K.ready), or nil for an
-- envelope weir did not write.
local function header(env)
  local a, m, p = string.match(env, HEADER)
  if not a then
    if is_compact(env) then return 0, COMPACT_MAX_ATTEMPTS, 2 end
    return nil
  end
  p = tonumber(p) + 1
  if p > 3 then p = 3 end
  return tonumber(a), tonumber(m), p
end

-- `env` with its attempt count set to `attempt`. A compact envelope has no field for it:
-- at 0 it stays as it is, past 0 it is written in the full form, with its implied header
-- (an enqueue time its id does not hold is 0). An envelope in neither form is returned as
-- it is.
local function with_attempt(env, attempt)
  if is_compact(env) then
    if attempt == 0 then return env end
    return string.format('{"attempt":%d,"max_attempts":%d,"priority":1,"enqueued_at":%d,',
      attempt, COMPACT_MAX_ATTEMPTS, compact_at(env) or 0) .. string.sub(env, 2)
  end
  return (string.gsub(env, '^{"attempt":%d+,', '{"attempt":' .. attempt .. ',', 1))
end

-- The kind of an envelope weir wrote (the field after the header and the id, or after the
-- id of a compact envelope), or nil.
local KIND = '^{"attempt":%d+,"max_attempts":%d+,"priority":%d,"enqueued_at":%d+,"id":"[^"]*","kind":"([^"]*)"'
local COMPACT_KIND = '^{"id":"[^"]*","kind":"([^"]*)"'
local function env_kind(env)
  return string.match(env, KIND) or string.match(env, COMPACT_KIND)
end

-- Puts a job (already out of the dead-letter queue or delayed) on its ready list, at the
-- front or the back. `fresh`: a new attempt count, its last error and deferral record
-- gone (a requeue from the dead-letter queue). An envelope weir did not write goes to
-- normal as it is.
local function revive(id, env, front, fresh)
  local attempt, _, p = header(env)
  if not attempt then
    p = 2
  elseif fresh then
    redis.call('HSET', K.jobs, id, with_attempt(env, 0))
  end
  if fresh then
    redis.call('HDEL', K.errors, id)
    redis.call('HDEL', K.deferrals, id)
  end
  if front then redis.call('LPUSH', K.ready[p], id) else redis.call('RPUSH', K.ready[p], id) end
end

-- Moves one job (already out of ready/delayed/lease) to the dead-letter queue; its
-- deferral record goes (a job requeued from there starts with a fresh budget).
-- The unique key an envelope carries (its "unique_key" field), or nil; `from` (default 1)
-- is where to start looking. The fields before "payload" are numbers and plain tokens
-- (keys.rs's alphabet), and "payload" is the last field, so the first ',"payload":' ends
-- the header and nothing in a payload can match. Plain finds only: a pattern scan of the
-- header cost several microseconds per job.
local function unique_key(env, from)
  local stop = string.find(env, ',"payload":', from or 1, true)
  if not stop then return nil end
  local s, f = string.find(env, ',"unique_key":"', from or 1, true)
  if not s or s > stop then return nil end
  local q = string.find(env, '"', f + 1, true)
  if not q or q > stop then return nil end
  return string.sub(env, f + 1, q - 1)
end

-- The job key an envelope carries (its "key" field: per-key limits), or nil. Read as
-- unique_key reads its field: plain finds within the header.
local function job_key(env)
  local stop = string.find(env, ',"payload":', 1, true)
  if not stop then return nil end
  local s, f = string.find(env, ',"key":"', 1, true)
  if not s or s > stop then return nil end
  local q = string.find(env, '"', f + 1, true)
  if not q or q > stop then return nil end
  return string.sub(env, f + 1, q - 1)
end

-- Frees the unique key job `id` holds, if it still holds it (the window may have ended
-- and another job taken the key since).
local function free_unique(id)
  local env = redis.call('HGET', K.jobs, id)
  local key = env and unique_key(env)
  -- (pcall: a key of another type, written by hand, is no window of weir's: left alone)
  if key and redis.pcall('GET', K.unique .. key) == id then redis.call('DEL', K.unique .. key) end
end

-- Moves one job (already out of ready/delayed/lease; its envelope still stored) to the
-- dead-letter queue; its deferral record goes (a job requeued from there starts with a
-- fresh budget), and so does the unique key it holds: a job that failed for good does
-- not block a new one for the rest of its window.
local function bury(id, reason, now)
  free_unique(id)
  redis.call('ZADD', K.dead, now, id)
  redis.call('HSET', K.errors, id, reason)
  redis.call('HDEL', K.deferrals, id)
end

-- The queue's dead-letter cap: a queue setting (`weir limits set --dead-cap`), the same
-- for every consumer of the queue (settings.rs has the default too). A value that is not
-- a positive number is ignored rather than allowed to empty the dead-letter queue.
local DEFAULT_DEAD_CAP = 10000
local function dead_cap()
  local cap = tonumber(hash_fields(K.settings, { 'dead_cap' })[1])
  if cap and cap >= 1 then return math.min(math.floor(cap), MAX_WHOLE) end
  return DEFAULT_DEAD_CAP
end

-- What trim_dead touches, checked before a script's first write when it may bury: the
-- settings, the dead-letter queue and the records trimmed with it.
local function trim_ready()
  dead_cap()
  expect(K.dead, 'zset')
  expect_each({ K.jobs, K.errors, K.deferrals }, 'hash')
end

-- Most dead-letter entries one call trims: a cap lowered under a big dead-letter queue
-- drains over several calls (the reclaimer trims on each of its calls, every second)
-- instead of blocking Redis for one long call.
local TRIM_MAX = 1000

-- Trims the dead-letter queue toward the queue's cap, oldest out first, at most TRIM_MAX
-- entries per call; counts what it trims ('trimmed'). Returns the number trimmed.
local function trim_dead()
  local excess = redis.call('ZCARD', K.dead) - dead_cap()
  if excess <= 0 then return 0 end
  local gone = redis.call('ZPOPMIN', K.dead, math.min(excess, TRIM_MAX))
  local ids = {}
  for i = 1, #gone, 2 do ids[#ids + 1] = gone[i] end
  call_chunked('HDEL', K.jobs, ids)
  call_chunked('HDEL', K.errors, ids)
  if redis.call('EXISTS', K.deferrals) == 1 then call_chunked('HDEL', K.deferrals, ids) end
  if K.history and redis.call('EXISTS', K.history) == 1 then call_chunked('HDEL', K.history, ids) end
  count('trimmed', #ids)
  return #ids
end

-- Whether the caller's lease `token` (the deadline its fetch returned; a string, as sent)
-- still holds `id`, given the lease's current `score` (false when none). A lease that was
-- extended keeps its fetch token in K.lease_tokens, so a token never changes during a
-- lease and a lost extend reply cannot strand the holder. Scores are integral ms, so
-- Redis formats them as plain digits: the string compare avoids a number parse per job.
local function lease_held(id, score, token)
  if not score then return false end
  if score == token or tonumber(score) == tonumber(token) then return true end
  return redis.call('HGET', K.lease_tokens, id) == token
end

-- held_in, reading each id's score (ZMSCORE): for leases that were extended (their token
-- is in K.lease_tokens) or lost.
local function held_by_score(token, first, last)
  local held, missed, seen = {}, {}, {}
  local c = first
  while c <= last do
    local e = math.min(c + CHUNK - 1, last)
    local scores = redis.call('ZMSCORE', K.lease, unpack(ARGV, c, e))
    for j = 1, #scores do
      local id = ARGV[c + j - 1]
      if not seen[id] and lease_held(id, scores[j], token) then
        held[#held + 1] = id
      else
        missed[#missed + 1] = id
      end
      seen[id] = true
    end
    c = e + 1
  end
  return held, missed
end

-- Which of the ids ARGV[first..last] the caller holds with `token`: the held ones and the
-- others, each list in ARGV order (an id listed twice is held once, then counted among the
-- others). A lease keeps its fetch token as its score until it is extended, so one read of
-- the members at that score settles a whole group: reading scores id by id (ZMSCORE)
-- formats a double per id, which costs Redis more than all the rest of an ack. Groups with
-- an extended or lost lease, and groups among many leases of the same score (others'
-- fetches in the same millisecond), are read id by id.
local function held_in(token, first, last)
  local held, missed = {}, {}
  local at_token = redis.call('ZCOUNT', K.lease, token, token)
  if at_token > 4 * (last - first + 1) + 64 then return held_by_score(token, first, last) end
  local at = {}
  if at_token > 0 then
    local members = redis.call('ZRANGEBYSCORE', K.lease, token, token)
    for j = 1, #members do at[members[j]] = true end
  end
  for c = first, last do
    local id = ARGV[c]
    local a = at[id]
    if a then
      at[id] = false
      held[#held + 1] = id
    elseif a == nil then
      return held_by_score(token, first, last)
    else
      missed[#missed + 1] = id
    end
  end
  return held, missed
end

-- Ends the leases of `ids` (they are settled, reclaimed or released): the lease entries
-- and whatever marks the lease carried. The marks are rare, so each hash is touched only
-- when it exists.
local function end_leases(ids)
  if #ids == 0 then return end
  call_chunked('ZREM', K.lease, ids)
  if redis.call('EXISTS', K.lease_tokens) == 1 then call_chunked('HDEL', K.lease_tokens, ids) end
  if redis.call('EXISTS', K.started) == 1 then call_chunked('HDEL', K.started, ids) end
end

-- Forgets the per-job records a finished job leaves (last error, deferrals, and its run
-- history unless `keep_history`: a completed job kept on request keeps it).
local function forget(ids, keep_history)
  if #ids == 0 then return end
  if redis.call('EXISTS', K.errors) == 1 then call_chunked('HDEL', K.errors, ids) end
  if redis.call('EXISTS', K.deferrals) == 1 then call_chunked('HDEL', K.deferrals, ids) end
  if not keep_history and K.history and redis.call('EXISTS', K.history) == 1 then
    call_chunked('HDEL', K.history, ids)
  end
end

-- A kept completed job's result (K.results) is its handler's return value as text (JSON
-- from Rust, Python and exec workers, a body snippet from the HTTP handler), cut to
-- RESULT_MAX bytes at a character's start: the consumer cuts it first, the script again.
local RESULT_MAX = 4096

-- Drops the results of `ids` (completed jobs kept that go). Only kept jobs have one, so
-- the path of an ack never calls it.
local function drop_results(ids)
  if #ids > 0 and K.results and redis.call('EXISTS', K.results) == 1 then
    call_chunked('HDEL', K.results, ids)
  end
end

-- Run history (K.history): each job keeps its last HISTORY_RUNS runs (the queue's
-- `history_runs` setting, 0 to HISTORY_MAX_RUNS), each message cut to HISTORY_TEXT bytes
-- and the worker's name to 128, so a job's record stays under HISTORY_MAX_RUNS * ~800
-- bytes; an append reads and rewrites one record: O(1) per run.
local HISTORY_RUNS = 5
local HISTORY_MAX_RUNS = 50
local HISTORY_TEXT = 512

-- The runs kept per job, from the setting's value (nil: the default).
local function history_runs(v)
  return whole_in(v, 0, HISTORY_MAX_RUNS) or HISTORY_RUNS
end

-- `s` cut to at most `n` bytes, at a UTF-8 character's start.
local function cut(s, n)
  s = tostring(s or '')
  if #s <= n then return s end
  local e = n
  while e > 0 do
    local b = string.byte(s, e + 1)
    if not b or b < 128 or b >= 192 then break end
    e = e - 1
  end
  return string.sub(s, 1, e)
end

-- One run as JSON text, as run_history writes it.
local function run_json(start, finish, worker, outcome, message)
  return string.format('{"start":%d,"end":%d,"worker":%s,"outcome":"%s","message":%s}',
    start, finish, cjson.encode(cut(worker, 128)), outcome, cjson.encode(cut(message, HISTORY_TEXT)))
end

-- Appends a run to job `id`'s history, keeping its last `keep` runs. A record that does
-- not decode (written by hand) starts over.
local function run_history(id, keep, start, finish, worker, outcome, message)
  if keep <= 0 then return end
  local old = redis.call('HGET', K.history, id)
  local runs = {}
  if old then
    local ok, v = pcall(cjson.decode, old)
    if ok and type(v) == 'table' then runs = v end
  end
  runs[#runs + 1] = { start = start, ['end'] = finish, worker = cut(worker, 128),
    outcome = outcome, message = cut(message, HISTORY_TEXT) }
  local from = math.max(1, #runs - keep + 1)
  local kept = {}
  for j = from, #runs do kept[#kept + 1] = runs[j] end
  redis.call('HSET', K.history, id, cjson.encode(kept))
end

-- Completed jobs kept on request: the queue's settings `keep_completed_ms` (how long)
-- and `keep_completed_count` (how many); either turns it on, and the count defaults to
-- KEEP_COUNT, so what is kept is always bounded. Returns { ms, count } or nil (off).
local KEEP_COUNT = 10000
local function keep_setting(ms, n)
  ms, n = whole_in(ms, 1), whole_in(n, 1)
  if not ms and not n then return nil end
  return { ms = ms, count = n or KEEP_COUNT }
end

-- Trims the completed jobs kept (K.done) to `keep`: past its count, oldest first, then
-- older than its age; at most TRIM_MAX a call, so a lowered setting drains over calls
-- (settle trims after each batch it keeps, the reclaimer every second). Each one's
-- envelope, last error and history go with it. Returns the number trimmed.
local function trim_done(keep, now)
  local ids = {}
  local excess = redis.call('ZCARD', K.done) - keep.count
  if excess > 0 then
    local gone = redis.call('ZPOPMIN', K.done, math.min(excess, TRIM_MAX))
    for i = 1, #gone, 2 do ids[#ids + 1] = gone[i] end
  end
  if keep.ms and #ids < TRIM_MAX then
    local old = redis.call('ZRANGEBYSCORE', K.done, '-inf', now - keep.ms, 'LIMIT', 0, TRIM_MAX - #ids)
    if #old > 0 then call_chunked('ZREM', K.done, old) end
    for i = 1, #old do ids[#ids + 1] = old[i] end
  end
  if #ids == 0 then return 0 end
  call_chunked('HDEL', K.jobs, ids)
  forget(ids)
  drop_results(ids)
  return #ids
end

-- A deferral record (K.deferrals): 'count first_ms' for all causes together (what `weir
-- job show` reads), then 'cause=count:first_ms' per cause, so that each cause spends its
-- own budget: a job the downstream pushed back for an hour is not dead-lettered at once
-- by a consumer that lacks its kind. A record without the per-cause part (written before
-- causes were kept apart) counts for the cause of the job's next deferral. Numbers that
-- do not parse count as none.
local function deferral_record(rec)
  local r = { n = 0, by = {}, order = {} }
  if not rec then return r end
  local a, b = string.match(rec, '^(%d+) (%d+)')
  r.n, r.first = tonumber(a) or 0, tonumber(b)
  for c, n, f in string.gmatch(rec, ' ([%w_]+)=(%d+):(%d+)') do
    if not r.by[c] then r.order[#r.order + 1] = c end
    r.by[c] = { tonumber(n), tonumber(f) }
  end
  return r
end

local function deferral_text(r)
  local out = { r.n .. ' ' .. r.first }
  for _, c in ipairs(r.order) do
    out[#out + 1] = c .. '=' .. r.by[c][1] .. ':' .. r.by[c][2]
  end
  return table.concat(out, ' ')
end

-- Puts job `id` (out of its lease already) back without charging an attempt: to
-- delayed[p] due in `delay` ms, or to the front of ready[p] when `delay` is negative.
-- The deferral record counts it under `cause` (a word: the consumer's DeferReason label);
-- past that cause's budget (`max_n` deferrals for it, or `max_ms` since its first; 0 = no
-- limit) the job is dead-lettered instead. Returns true if deferred, false if buried.
local function defer(id, p, delay, max_n, max_ms, reason, now, cause)
  if not string.match(cause or '', '^[%w_]+$') then cause = 'other' end
  local r = deferral_record(redis.call('HGET', K.deferrals, id))
  local mine = r.by[cause]
  if not mine then
    if #r.order == 0 and r.first then mine = { r.n, r.first } else mine = { 0, now } end
    r.order[#r.order + 1] = cause
  end
  local n, first = mine[1] + 1, mine[2]
  if (max_n > 0 and n > max_n) or (max_ms > 0 and now - first > max_ms) then
    bury(id, 'deferral budget spent (' .. (n - 1) .. ' deferrals over ' ..
      math.floor((now - first) / 1000) .. ' s): ' .. reason, now)
    return false
  end
  r.by[cause] = { n, first }
  r.n, r.first = r.n + 1, math.min(r.first or now, first)
  redis.call('HSET', K.deferrals, id, deferral_text(r))
  redis.call('HSET', K.errors, id, reason)
  if delay < 0 then
    redis.call('LPUSH', K.ready[p], id)
  else
    redis.call('ZADD', K.delayed[p], now + delay, id)
  end
  return true
end

-- The script proper follows.
