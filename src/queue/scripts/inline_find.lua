-- inline_find: one page of the search for inline jobs (lib.lua's items) by id in the
-- lists where jobs wait, for the operator's calls by id (`weir job show`, `job delete`,
-- `job run-now` and the UI). The lists (lib.lua's waiting: the suspects, then the ready
-- lists high, normal, low) are read each from its tail towards its head, at most BUDGET
-- items a call, so no call holds Redis for long whatever the backlog. The caller
-- (inline_find.rs) calls again from where the last call stopped, then hands what it found
-- to the call that acts (job_show, job_run_now, jobs_delete; lib.lua's find_inline).
--
-- Positions count from a list's tail. Jobs are pushed at the tail and fetched from the
-- head, so between two calls a job that still waits moves away from the tail, towards
-- the part not read yet: it is not skipped. A job fetched in the meantime is in the lease
-- or a batch, where the acting call looks too.
--
-- KEYS: the queue's keys (lib.lua); reads suspects and ready[1..3].
-- ARGV[1]: the list to start in (1 the suspects, 2..4 ready[1..3])
-- ARGV[2]: the position in it to start at, counted from its tail (0: its last item)
-- ARGV[3..]: the ids looked for
-- Returns: { list, position } where the next call starts (list 0: the search is over:
--   every list read, or every id found), then, for each id found: the id, the number of
--   its list, its item, and its index in the list counted from the head.
-- Cost: at most BUDGET items read (LRANGE) and matched a call, about 1 µs each for a
-- 230-byte envelope (most of it LRANGE's copy into Lua), so a call takes a few ms; and
-- about BYTES read at most: inline envelopes run to 16 KiB (INLINE_MAX_BYTES), and 5,000
-- of those would be 80 MB copied in one call. The first page is FIRST items; each next
-- one as many as the bytes left hold at the mean size so far (at most SCAN, at least 1),
-- so a call ends within one item of BYTES, with few LRANGEs (each seeks its position
-- anew) when items are small.

local BUDGET, BYTES, FIRST = 5000, 1048576, 16
local wanted, left = {}, 0
-- For a few ids, each id's field as the header writes it: a plain find per item (C)
-- rules out most items without reading their header (lib.lua's item_id, a pattern
-- match, three times the find's cost); a hit is then checked by its header, since a
-- payload may hold the same text.
local needles = {}
for i = 3, #ARGV do
  if wanted[ARGV[i]] == nil then
    wanted[ARGV[i]] = true
    left = left + 1
    needles[#needles + 1] = '"id":"' .. ARGV[i] .. '"'
  end
end
if #needles > 4 then needles = nil end

-- The id `item` holds, if it is an inline job of a wanted id not found yet.
local function match(item)
  if not is_inline(item) then return nil end
  if needles then
    local any = false
    for k = 1, #needles do
      if string.find(item, needles[k], 1, true) then any = true break end
    end
    if not any then return nil end
  end
  local id = item_id(item)
  if id and wanted[id] then return id end
  return nil
end
local out = { 0, 0 }
local n, pos, budget, bytes = tonumber(ARGV[1]), tonumber(ARGV[2]), BUDGET, BYTES
local page = FIRST
while left > 0 and waiting(n) do
  local len = redis.call('LLEN', waiting(n))
  if pos >= len then
    n, pos = n + 1, 0
  elseif budget == 0 or bytes <= 0 then
    out[1], out[2] = n, pos
    break
  else
    local take = math.min(page, budget, len - pos)
    local got = redis.call('LRANGE', waiting(n), -(pos + take), -(pos + 1))
    for i = #got, 1, -1 do
      local item = got[i]
      bytes = bytes - #item
      local id = match(item)
      if id then
        wanted[id] = false
        left = left - 1
        out[#out + 1] = id
        out[#out + 1] = n
        out[#out + 1] = item
        -- (got[#got] is the item pos from the tail, len - 1 - pos from the head)
        out[#out + 1] = len - 1 - pos - (#got - i)
      end
    end
    pos, budget = pos + take, budget - take
    local mean = (BYTES - bytes) / (BUDGET - budget)
    page = math.max(1, math.min(SCAN, math.floor(bytes / mean)))
  end
end
return out
