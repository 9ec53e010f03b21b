-- Re-key a token's live grants to a new token (the same holder in a later ownership epoch),
-- keeping its units, with the new token's lease ending at now + lease. A lapsed lease is not
-- moved, nor one where the new token already holds. Waiter entries are left alone.
--
-- ARGV[1] base key   ARGV[2] old token   ARGV[3] new token   ARGV[4] now   ARGV[5] now + lease
-- ARGV[6] namespaces JSON [ns]
-- Returns JSON [ns]: where the new token now holds the old one's grant.

local old, new = ARGV[2], ARGV[3]
local now, expiry_s = tonumber(ARGV[4]), ARGV[5]
local moved = {}
for _, ns in ipairs(cjson.decode(ARGV[6])) do
  local holders, leases = key('holders', ns), key('leases', ns)
  local grant = redis.call('HGET', holders, old)
  local lease = redis.call('ZSCORE', leases, old)
  if grant and lease and tonumber(lease) > now and redis.call('HEXISTS', holders, new) == 0 then
    redis.call('HSET', holders, new, grant)
    redis.call('HDEL', holders, old)
    redis.call('ZREM', leases, old)
    redis.call('ZADD', leases, expiry_s, new)
    redis.call('ZREM', BASE .. ':lapse', member(ns, old))
    redis.call('ZADD', BASE .. ':lapse', expiry_s, member(ns, new))
    moved[#moved + 1] = ns
  end
end
return cjson.encode(moved)
