-- start_suspect: marks a suspect's run as started, just before it starts, so that if its
-- consumer dies during the run, reclaim charges this job and only it (see reclaim.lua).
-- The rare path: one call per suspect run; other jobs' starts travel with settle.
--
-- KEYS: the queue's keys (lib.lua); touches lease, lease_tokens, started.
-- ARGV[1]: the lease item (lib.lua: a job id, or an inline job's envelope)
-- ARGV[2]: lease token (the deadline fetch returned)
-- ARGV[3]: the consumer's tag
-- Returns: 1 if marked; 0 if the caller no longer holds the lease (the job must not run).

local id, token = ARGV[1], ARGV[2]
expect(K.started, 'hash')
if not lease_held(id, redis.call('ZSCORE', K.lease, id), token) then return 0 end
redis.call('HSET', K.started, id, ARGV[3] .. ':s')
return 1
