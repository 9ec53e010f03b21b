-- Read quotas, holders (with lease expiry) and live waiters, consistently.
--
-- ARGV[1] base key   ARGV[2] namespace, or "" for all   ARGV[3] now
-- Returns JSON [{ns, quotas = {source = quota}, holders = [{t, p, d, e, n, u, g, x}],
-- waiters = [{t, p, d, e, n, u, pr, pc, dc, s, x, b}]}]; the caller ranks the waiters.

local now = tonumber(ARGV[3])
local names = {ARGV[2]}
if ARGV[2] == '' then names = redis.call('SMEMBERS', BASE .. ':namespaces') end

local function hash(k)
  local out, flat = {}, redis.call('HGETALL', k)
  for i = 1, #flat, 2 do out[flat[i]] = flat[i + 1] end
  return out
end

local result = {}
for _, ns in ipairs(names) do
  local entry = {ns = ns, quotas = hash(key('quota', ns)), holders = {}, waiters = {}}
  for token, raw in pairs(hash(key('holders', ns))) do
    local h = cjson.decode(raw)
    h.t, h.x = token, redis.call('ZSCORE', key('leases', ns), token)
    entry.holders[#entry.holders + 1] = h
  end
  for token, raw in pairs(hash(key('waiters', ns))) do
    local w = cjson.decode(raw)
    w.t = token
    if tonumber(w.x) > now then entry.waiters[#entry.waiters + 1] = w end
  end
  if next(entry.quotas) or #entry.holders > 0 or #entry.waiters > 0 then
    result[#result + 1] = entry
  end
end
return cjson.encode(result)
