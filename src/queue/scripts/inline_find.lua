-- inline_find: one page of the search for inline jobs (lib.lua's items) by id in the
-- lists where jobs wait, for the operator's calls by id (`weir job show`, `job delete`,
-- `job run-now` and the UI). The lists (lib.lua's waiting: the suspects, then the ready
-- lists high, normal, low) are read each from its tail towards its head, at most BUDGET
-- items a call, so no call holds Redis for long whatever the backlog. The caller
-- (inspect.rs) calls again from where the last call stopped, then hands what it found to
-- the call that acts (job_show, job_run_now, jobs_delete), which looks again.
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
--   its list, its item.
-- Cost: at most BUDGET items read (LRANGE) and matched a call.

local BUDGET = 10000
local wanted, left = {}, 0
for i = 3, #ARGV do
  if wanted[ARGV[i]] == nil then
    wanted[ARGV[i]] = true
    left = left + 1
  end
end
local out = { 0, 0 }
local n, pos, budget = tonumber(ARGV[1]), tonumber(ARGV[2]), BUDGET
while left > 0 and waiting(n) do
  local len = redis.call('LLEN', waiting(n))
  if pos >= len then
    n, pos = n + 1, 0
  elseif budget == 0 then
    out[1], out[2] = n, pos
    break
  else
    local take = math.min(SCAN, budget, len - pos)
    local got = redis.call('LRANGE', waiting(n), -(pos + take), -(pos + 1))
    for i = #got, 1, -1 do
      local item = got[i]
      if is_inline(item) then
        local id = item_id(item)
        if id and wanted[id] then
          wanted[id] = false
          left = left - 1
          out[#out + 1] = id
          out[#out + 1] = n
          out[#out + 1] = item
        end
      end
    end
    pos, budget = pos + take, budget - take
  end
end
return out
