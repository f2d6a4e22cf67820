-- Shared prelude, prepended to every weir script (see scripts.rs).
--
-- Every script receives the same KEYS, in the order keys.rs builds them, all under the
-- queue's {hash tag} so a script touches one cluster slot:
--   KEYS[1..3]  LIST  ready ids, priority high, normal, low (pushed right, popped left)
--   KEYS[4..6]  ZSET  delayed id -> due time ms, priority high, normal, low
--   KEYS[7]     HASH  id -> envelope (JSON)
--   KEYS[8]     ZSET  id -> lease deadline ms (the in-flight set)
--   KEYS[9]     ZSET  id -> dead-lettered-at ms (the dead-letter queue, capped)
--   KEYS[10]    HASH  id -> last error / dead-letter reason
--   KEYS[11]    STRING  present while the queue is paused
--   KEYS[12]    HASH  counters (enqueued, fetched, acked, retried, dead, reclaimed, trimmed)
--   KEYS[13]    pub/sub channel that wakes idle consumers (not a key; same hash tag)
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
}

-- Redis server time in ms: workers' clocks never matter.
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
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
  local out = {}
  local n = #ids
  local i = 1
  while i <= n do
    local j = math.min(i + CHUNK - 1, n)
    local got = redis.call('HMGET', key, unpack(ids, i, j))
    for k = 1, #got do out[i + k - 1] = got[k] end
    i = j + 1
  end
  return out
end

-- Every envelope weir writes opens with this fixed header (envelope.rs keeps the field
-- order), so scripts read and bump the attempt count without a cjson round trip, which
-- would rewrite the payload's numbers. Returns attempt, max_attempts, priority (1-based
-- index into K.ready), or nil for an envelope weir did not write.
local HEADER = '^{"attempt":(%d+),"max_attempts":(%d+),"priority":(%d),'

local function header(env)
  local a, m, p = string.match(env, HEADER)
  if not a then return nil end
  p = tonumber(p) + 1
  if p > 3 then p = 3 end
  return tonumber(a), tonumber(m), p
end

local function with_attempt(env, attempt)
  return (string.gsub(env, '^{"attempt":%d+,', '{"attempt":' .. attempt .. ',', 1))
end

-- Moves one job (already out of ready/delayed/lease) to the dead-letter queue.
local function bury(id, reason, now)
  redis.call('ZADD', K.dead, now, id)
  redis.call('HSET', K.errors, id, reason)
end

-- Keeps the dead-letter queue at `cap` entries, oldest out first; counts what it trims.
local function trim_dead(cap)
  local excess = redis.call('ZCARD', K.dead) - cap
  if excess <= 0 then return 0 end
  local gone = redis.call('ZPOPMIN', K.dead, excess)
  local ids = {}
  for i = 1, #gone, 2 do ids[#ids + 1] = gone[i] end
  call_chunked('HDEL', K.jobs, ids)
  call_chunked('HDEL', K.errors, ids)
  redis.call('HINCRBY', K.counters, 'trimmed', #ids)
  return #ids
end

local function count(field, n)
  if n > 0 then redis.call('HINCRBY', K.counters, field, n) end
end

-- The script proper follows.
