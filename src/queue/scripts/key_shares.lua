-- key_shares: writes one consumer's shares of the adaptive per-key limits
-- (limiter/per_key.rs); the fetch holds each key to the sum of its live shares.
--
-- KEYS: the queue's keys (lib.lua); KEYS[NQ + 1]: the prefix (not a key) of the per-key
--   limits' state (fetch.lua's key_limits): each key's shares are the HASH
--   prefix .. 'auto:' .. key, consumer tag -> '<share> <expires at, ms>', the hash itself
--   expiring with the share that lives longest
-- ARGV[1]: the consumer's tag; ARGV[2]: how long a share lives (ms); then pairs of a job
--   key and its share (0 withdraws the consumer's share)
-- Returns: the number of shares written or withdrawn.
local p = KEYS[NQ + 1]
-- 0. before the first write: the arguments, and every hash written
local tag, ttl = ARGV[1], arg_whole(2, 'the time to live (ms)', 1)
for i = 3, #ARGV - 1, 2 do expect(p .. 'auto:' .. ARGV[i], 'hash') end
local expires = string.format('%d', now_ms() + ttl)
local n = 0
for i = 3, #ARGV - 1, 2 do
  local h = p .. 'auto:' .. ARGV[i]
  local share = tonumber(ARGV[i + 1]) or 0
  if share >= 1 then
    redis.call('HSET', h, tag, string.format('%d ', share) .. expires)
    -- only ever lengthen the hash's life: a short-lived share must not take the others
    -- (NX: a new hash, with no expiry yet; GT: a later one)
    redis.call('PEXPIRE', h, ttl, 'NX')
    redis.call('PEXPIRE', h, ttl, 'GT')
  else
    redis.call('HDEL', h, tag)
  end
  n = n + 1
end
return n
