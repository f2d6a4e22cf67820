-- split: turns batches this caller holds into leases of their jobs (lib.lua's batch
-- leases), before anything that acts on some of a batch's jobs and not all of them: a
-- start mark, an outcome other than the batch's ack, an extend, a release.
--
-- KEYS: the queue's keys (lib.lua); touches lease and the batches; reads jobs.
-- ARGV: pairs of batch name, token (the deadline its fetch returned)
-- Returns: the names not split because this caller no longer holds them at that token
--   (split already, by an expiry, by per-key limits applying or by a delete, or acked).
--   A batch split by anything but an expiry leaves its jobs leased at the same token, so
--   the caller still holds them one by one.

-- 0. before the first write: the arguments, the keys written, and every batch read
if #ARGV % 2 ~= 0 then refuse('split: batch names and tokens must come in pairs') end
for i = 2, #ARGV, 2 do arg_whole(i, 'a lease token', 0) end
expect(K.lease, 'zset')
expect(K.batches, 'zset')
expect(K.jobs, 'hash')
local held, order, out = {}, {}, {}
for i = 1, #ARGV, 2 do
  local name = ARGV[i]
  local score = redis.call('ZSCORE', K.batches, name)
  if held[name] then
    -- (named twice: split once)
  elseif score and tonumber(score) == tonumber(ARGV[i + 1]) then
    held[name] = { score, batch_items(name) }
    order[#order + 1] = name
  else
    out[#out + 1] = name
  end
end

-- 1. the splits
for j = 1, #order do
  local b = held[order[j]]
  split_batch(order[j], b[1], b[2])
end
return out
