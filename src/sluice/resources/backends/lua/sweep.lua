-- Reclaim every lapsed lease and drop every lapsed waiter entry, in all namespaces.
--
-- ARGV[1] base key   ARGV[2] now   ARGV[3] origin
-- Returns JSON [{namespace, in_use, waiters, ready}] for each namespace where something
-- lapsed, and wakes the other processes with the same.

local now_s, now = ARGV[2], tonumber(ARGV[2])
local touched, order = {}, {}
local function touch(entry)
  local ns, token = string.match(entry, '^(.-)\n(.*)$')
  if not touched[ns] then
    touched[ns] = true
    order[#order + 1] = ns
  end
  return ns, token
end

for _, entry in ipairs(redis.call('ZRANGEBYSCORE', BASE .. ':lapse', '-inf', now_s)) do
  local ns, token = touch(entry)
  if not drop_holder(ns, token) then redis.call('ZREM', BASE .. ':lapse', entry) end
end
for _, entry in ipairs(redis.call('ZRANGEBYSCORE', BASE .. ':wlapse', '-inf', now_s)) do
  local ns, token = touch(entry)
  drop_waiter(ns, token)
end

local usage, wake = {}, {}
for _, ns in ipairs(order) do
  forget_if_empty(ns)
  usage[#usage + 1] = usage_with_ready(ns, now)
  wake[#wake + 1] = {ns, usage[#usage].ready}
end
publish(ARGV[3], wake)
return cjson.encode(usage)
