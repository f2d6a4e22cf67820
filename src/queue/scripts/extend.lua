-- extend: the heartbeat; pushes back the lease deadline of jobs still held.
--
-- KEYS: the queue's keys (lib.lua); touches lease, lease_tokens.
-- ARGV[1]: visibility timeout (ms): new deadline = Redis TIME + this
-- ARGV[2..]: pairs of lease item (lib.lua: a job id, or an inline job's envelope), lease
--   token (the deadline fetch returned)
-- Returns: { new_deadline_ms, lost1, lost2, ... }: the items whose lease this caller no
--   longer holds.
--   The token stays the lease's for its whole life: an extended lease keeps it in
--   K.lease_tokens (the score is the current deadline). So a caller whose reply was lost
--   (the extend applied, the new deadline never heard of) still holds its leases, for the
--   next extend and for settle alike.

-- 0. before the first write: the arguments and the tokens' hash (the lease's first touch
--    is a read)
if #ARGV % 2 ~= 1 then refuse('extend: items and tokens must come in pairs') end
local deadline = now_ms() + arg_whole(1, 'the visibility timeout (ms)', 0)
expect(K.lease_tokens, 'hash')
local out = { deadline }
local extended, tokens = {}, {}
for i = 2, #ARGV, 2 do
  local id, token = ARGV[i], ARGV[i + 1]
  if lease_held(id, redis.call('ZSCORE', K.lease, id), token) then
    extended[#extended + 1] = deadline
    extended[#extended + 1] = id
    tokens[#tokens + 1] = id
    tokens[#tokens + 1] = token
  else
    out[#out + 1] = id
  end
end
if #extended > 0 then
  call_chunked('ZADD', K.lease, extended)
  call_chunked('HSET', K.lease_tokens, tokens)
end
return out
