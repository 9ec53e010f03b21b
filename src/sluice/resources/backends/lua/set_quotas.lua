-- Store or clear one source of quota for several namespaces; held tokens are never revoked.
--
-- ARGV[1] base key   ARGV[2] source (operator | config | plugin | default)
-- ARGV[3] JSON [[ns, quota or 0 to clear]]   ARGV[4] origin
-- Wakes the other processes for the namespaces whose quota changed (a higher quota may
-- make room).

local source, entries = ARGV[2], cjson.decode(ARGV[3])
local namespaces, wake = {}, {}
for _, entry in ipairs(entries) do
  local ns, quota = entry[1], entry[2]
  namespaces[#namespaces + 1] = ns
  local stored = tonumber(redis.call('HGET', key('quota', ns), source) or '0')
  if stored ~= quota then wake[#wake + 1] = {ns} end
  if quota > 0 then
    redis.call('HSET', key('quota', ns), source, quota)
    redis.call('SADD', BASE .. ':namespaces', ns)
  else
    redis.call('HDEL', key('quota', ns), source)
    forget_if_empty(ns)
  end
end
publish(ARGV[4], wake)
return cjson.encode(namespaces)
