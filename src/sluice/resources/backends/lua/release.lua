-- Give back a token's units and waiter entries; an unknown token is a no-op.
--
-- ARGV[1] base key   ARGV[2] token   ARGV[3] origin   ARGV[4] now   ARGV[5..] namespaces
-- Returns, where nobody waits in any of the namespaces (the fast path below): a flat
-- [namespace, in_use, ...] for each one where units were freed, ready unknown (nobody waits,
-- so anyone may ask). Otherwise JSON [{namespace, in_use, waiters, ready}] for each namespace
-- where something changed (ready: the waiters that would now be granted). Both wake the other
-- processes with the same.

-- Fast path: with no waiter entry in any of the namespaces there is no waiter of the token to
-- drop and nobody to rank (ready is unknown: anyone may ask), so no prelude function is
-- needed: the writes of drop_holder, count_units and forget_if_empty (_writes.lua; keep them
-- in step), then the wake-up.
local function released_with_nobody_waiting()
  local base, token = ARGV[1], ARGV[2]
  for a = 5, #ARGV do
    if redis.call('HLEN', base .. ':waiters:' .. ARGV[a]) > 0 then return nil end
  end
  local freed, wake = {}, {}
  for a = 5, #ARGV do
    local ns = ARGV[a]
    local holders = base .. ':holders:' .. ns
    local raw = redis.call('HGET', holders, token)
    if raw then
      local h = cjson.decode(raw)
      redis.call('HDEL', holders, token)
      redis.call('ZREM', base .. ':leases:' .. ns, token)
      redis.call('ZREM', base .. ':lapse', ns .. '\n' .. token)
      -- count_units(ns, h.p, h.d, -h.u): the three counters read, then one write of those
      -- left above zero and one delete of the others (the script is atomic)
      local usage = base .. ':usage:' .. ns
      local fields = {'all', 'p:' .. h.p, 'd:' .. #h.p .. ':' .. h.p .. ':' .. h.d}
      local counts = redis.call('HMGET', usage, fields[1], fields[2], fields[3])
      local left, zeroed = {}, {}
      for i, field in ipairs(fields) do
        local count = tonumber(counts[i] or '0') - h.u
        counts[i] = count
        if count > 0 then
          left[#left + 1] = field
          left[#left + 1] = count
        else
          zeroed[#zeroed + 1] = field
        end
      end
      if #left > 0 then redis.call('HSET', usage, unpack(left)) end
      if #zeroed > 0 then redis.call('HDEL', usage, unpack(zeroed)) end
      local in_use = counts[1] > 0 and counts[1] or 0
      if redis.call('HLEN', holders) == 0 then  -- forget_if_empty (nobody waits here)
        local quota, kept = base .. ':quota:' .. ns, false
        for _, source in ipairs(redis.call('HKEYS', quota)) do
          if source ~= 'default' then kept = true end
        end
        if not kept then
          redis.call('DEL', quota, usage)
          redis.call('SREM', base .. ':namespaces', ns)
        end
      end
      freed[#freed + 1] = ns
      freed[#freed + 1] = in_use
      wake[#wake + 1] = {ns}
    end
  end
  publish(ARGV[3], wake)
  return freed
end

local freed = released_with_nobody_waiting()
if freed then return freed end

-- GENERAL PATH (the Python side makes the rest a function, the prelude at its top)

local token, now = ARGV[2], tonumber(ARGV[4])
local usage, wake = {}, {}
for a = 5, #ARGV do
  local ns = ARGV[a]
  local freed = drop_holder(ns, token)
  if drop_waiter(ns, token) or freed then
    forget_if_empty(ns)
    usage[#usage + 1] = usage_with_ready(ns, now)
    wake[#wake + 1] = {ns, usage[#usage].ready}
  end
end
publish(ARGV[3], wake)
return cjson.encode(usage)
