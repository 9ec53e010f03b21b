-- Writing helpers shared by the scripts that change holders or waiters.

local function count_units(ns, project, domain, units)
  local usage = key('usage', ns)
  for _, field in ipairs({'all', project_field(project), domain_field(project, domain)}) do
    if redis.call('HINCRBY', usage, field, units) <= 0 then
      redis.call('HDEL', usage, field)
    end
  end
end

-- Returns true if the token held units in ns.
local function drop_holder(ns, token)
  local raw = redis.call('HGET', key('holders', ns), token)
  if not raw then return false end
  local h = cjson.decode(raw)
  redis.call('HDEL', key('holders', ns), token)
  redis.call('ZREM', key('leases', ns), token)
  redis.call('ZREM', BASE .. ':lapse', member(ns, token))
  count_units(ns, h.p, h.d, -h.u)
  return true
end

local function drop_waiter(ns, token)
  redis.call('ZREM', BASE .. ':wlapse', member(ns, token))
  return redis.call('HDEL', key('waiters', ns), token) == 1
end

-- Every lapsed lease of ns; true if any.
local function reclaim_holders(ns, now)
  local lapsed = redis.call('ZRANGEBYSCORE', key('leases', ns), '-inf', now)
  for _, token in ipairs(lapsed) do drop_holder(ns, token) end
  return #lapsed > 0
end

local function set_lease(ns, token, expiry)
  redis.call('ZADD', key('leases', ns), expiry, token)
  redis.call('ZADD', BASE .. ':lapse', expiry, member(ns, token))
end

-- Extends a live lease; true if the token holds a live lease in ns.
local function extend_lease(ns, token, now, expiry)
  local score = redis.call('ZSCORE', key('leases', ns), token)
  if not score or tonumber(score) <= now then return false end
  set_lease(ns, token, expiry)
  return true
end

-- A namespace left with nothing held, nobody waiting and no quota but a claim's default.
local function forget_if_empty(ns)
  if redis.call('HLEN', key('holders', ns)) > 0 or redis.call('HLEN', key('waiters', ns)) > 0 then
    return
  end
  local sources = redis.call('HKEYS', key('quota', ns))
  for _, source in ipairs(sources) do
    if source ~= 'default' then return end
  end
  redis.call('DEL', key('quota', ns), key('usage', ns))
  redis.call('SREM', BASE .. ':namespaces', ns)
end
