-- Rules, live keys and live waiters of one name (ARGV[3]) or of all, as JSON with every time a
-- "%.17g" string. ARGV: B, now ('' for TIME), name or "".
local now = clock(ARGV[2])
local names = {}
if ARGV[3] ~= '' then
  names = {ARGV[3]}
else
  local seen = {}
  for _, set in ipairs({'names', 'active'}) do
    for _, name in ipairs(redis.call('SMEMBERS', BASE .. ':' .. set)) do
      if not seen[name] then seen[name] = true; names[#names + 1] = name end
    end
  end
end

local function waiters_of(name, key)
  local rows = redis.call('ZRANGE', k('line', name, key), 0, -1, 'WITHSCORES')
  local waiters = {}
  for i = 1, #rows, 2 do
    local entry = redis.call('HGET', k('wait', name, key), rows[i])
    if entry then
      local w = cjson.decode(entry)
      if tonumber(w.x) > now then
        waiters[#waiters + 1] = {t = rows[i], s = rows[i + 1], u = w.u, x = w.x, e = w.e, n = w.n}
      end
    end
  end
  return waiters
end

local out = {}
for _, name in ipairs(names) do
  local rules = {}
  for _, rule in ipairs(rules_of(name)) do
    rules[#rules + 1] = {rule.source, rule.rate, num(rule.interval), rule.burst}
  end
  local keyset = BASE .. ':keyset:' .. name
  redis.call('ZREMRANGEBYSCORE', keyset, '-inf', num(now))
  local keys = {}
  for _, key in ipairs(redis.call('ZRANGE', keyset, 0, -1)) do
    local tat = tat_of(name, key)
    local waiters = waiters_of(name, key)
    if tat > now or #waiters > 0 then
      keys[#keys + 1] = {key = key, tat = num(tat), w = waiters}
    end
  end
  if #rules > 0 or #keys > 0 then
    out[#out + 1] = {name = name, rules = rules, keys = keys}
  end
end
return cjson.encode({now = num(now), limits = out})
