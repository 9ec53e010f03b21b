-- Give back a token's units and waiter entries; an unknown token is a no-op.
--
-- ARGV[1] base key   ARGV[2] token   ARGV[3] namespaces JSON [ns]   ARGV[4] origin
-- ARGV[5] now
-- Returns JSON [{namespace, in_use, waiters, ready}] for each namespace where something
-- changed (ready: the waiters that would now be granted), and wakes the other processes
-- with the same.

local token, namespaces, now = ARGV[2], cjson.decode(ARGV[3]), tonumber(ARGV[5])
local usage, wake = {}, {}
for _, ns in ipairs(namespaces) do
  local freed = drop_holder(ns, token)
  if drop_waiter(ns, token) or freed then
    forget_if_empty(ns)
    usage[#usage + 1] = usage_with_ready(ns, now)
    wake[#wake + 1] = {ns, usage[#usage].ready}
  end
end
publish(ARGV[4], wake)
return cjson.encode(usage)
