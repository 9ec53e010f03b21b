-- Extend a token's live leases and waiter entries to now + lease; a lapsed lease is not
-- revived, even before it is reclaimed.
--
-- ARGV[1] base key   ARGV[2] token   ARGV[3] namespaces JSON [ns]   ARGV[4] now
-- ARGV[5] now + lease
-- Returns JSON [ns]: where the token holds a live lease.

local token, namespaces = ARGV[2], cjson.decode(ARGV[3])
local now = tonumber(ARGV[4])
local expiry_s = ARGV[5]
local held = {}
for _, ns in ipairs(namespaces) do
  if extend_lease(ns, token, now, expiry_s) then held[#held + 1] = ns end
  local raw = redis.call('HGET', key('waiters', ns), token)
  if raw then
    local w = cjson.decode(raw)
    if tonumber(w.x) > now then
      w.x = expiry_s
      redis.call('HSET', key('waiters', ns), token, cjson.encode(w))
      redis.call('ZADD', BASE .. ':wlapse', expiry_s, member(ns, token))
    end
  end
end
return cjson.encode(held)
