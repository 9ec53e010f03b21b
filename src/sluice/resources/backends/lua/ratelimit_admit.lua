-- One admission, all claims or none (gcra.judge). ARGV: B, now ('' for TIME), token,
-- execution, node, remember, recheck, grace, then (name, key, units) per claim.
-- Returns {'granted'|'repeated', now} or {'refused', now, next_at, name, key, position, rate}
-- or {'unknown', name} or {'too_big', name, units, burst, rate}, nothing written then.

local now = clock(ARGV[2])
local token, execution, node = ARGV[3], ARGV[4], ARGV[5]
local remember, recheck, grace = tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8])
local claims = {}
for i = 9, #ARGV, 3 do
  claims[#claims + 1] = {name = ARGV[i], key = ARGV[i + 1], units = tonumber(ARGV[i + 2])}
end

for _, c in ipairs(claims) do
  c.rule = rules_of(c.name)[1]
  if not c.rule then return {'unknown', c.name} end
  if c.units > c.rule.burst then
    return {'too_big', c.name, tostring(c.units), tostring(c.rule.burst), c.rule.rate}
  end
end

local function drop_lapsed(c)
  local wexp, line, waits = k('wexp', c.name, c.key), k('line', c.name, c.key), k('wait', c.name, c.key)
  local gone = redis.call('ZRANGEBYSCORE', wexp, '-inf', num(now))
  for _, member in ipairs(gone) do
    redis.call('ZREM', line, member)
    redis.call('HDEL', waits, member)
  end
  if #gone > 0 then redis.call('ZREMRANGEBYSCORE', wexp, '-inf', num(now)) end
  redis.call('ZREMRANGEBYSCORE', k('granted', c.name, c.key), '-inf', num(now))
end

local any_new, since = false, nil
for _, c in ipairs(claims) do
  drop_lapsed(c)
  c.held = redis.call('ZSCORE', k('granted', c.name, c.key), token) ~= false
  if not c.held then
    any_new = true
    local mine = redis.call('ZSCORE', k('line', c.name, c.key), token)
    c.waiting = mine ~= false
    if mine then
      mine = tonumber(mine)
      if not since or mine < since then since = mine end
    end
  end
end
if not any_new then return {'repeated', num(now)} end
since = since or now

-- Live waiters ranked before (since, token), and their units.
local function ahead_of(c)
  local rows = redis.call('ZRANGEBYSCORE', k('line', c.name, c.key), '-inf', num(since), 'WITHSCORES')
  local count, units = 0, 0
  for i = 1, #rows, 2 do
    local member, score = rows[i], tonumber(rows[i + 1])
    if member ~= token and (score < since or bytes_less(member, token)) then
      count = count + 1
      local entry = redis.call('HGET', k('wait', c.name, c.key), member)
      if entry then units = units + tonumber(cjson.decode(entry).u) end
    end
  end
  return count, units
end

local all_now, next_at, worst, worst_ahead = true, nil, 1, -1
for i, c in ipairs(claims) do
  if not c.held then
    local rule = c.rule
    local ahead, ahead_units = ahead_of(c)
    c.start = start_of(rule, tat_of(c.name, c.key), now)
    local units = ahead_units + c.units
    local slot
    if c.start + units * rule.interval - now <= rule.burst * rule.interval + EPSILON then
      if ahead == 0 then
        slot = now
      else
        slot = now + math.min(math.max(ahead_units, 1) * rule.interval, LATE_WAITER_RETRY)
      end
    else
      slot = c.start + (units - rule.burst) * rule.interval
    end
    all_now = all_now and slot <= now and ahead == 0
    if not next_at or slot > next_at or (slot == next_at and ahead > worst_ahead) then
      next_at, worst, worst_ahead = slot, i, ahead
    end
  end
end

-- TTLs: each per-key entry lives just past the moment its own content lapses (the tat once
-- it is behind the clock, a line once its last waiter's place lapsed, a ticket set once its
-- last remembered grant is forgotten); the limit's key index keeps each key's latest moment.
local function ms_until(at)
  return math.ceil((at - now) * 1000) + 1000
end

local function index_key(c, until_at)
  local keyset = BASE .. ':keyset:' .. c.name
  if redis.call('ZADD', keyset, 'GT', num(until_at), c.key) == 1 then
    redis.call('SADD', BASE .. ':active', c.name)
  end
  local ms = ms_until(until_at)
  if redis.call('PTTL', keyset) < ms then redis.call('PEXPIRE', keyset, ms) end
end

if all_now then
  for _, c in ipairs(claims) do
    if not c.held then
      local tat = c.start + c.units * c.rule.interval
      redis.call('SET', k('tat', c.name, c.key), num(tat), 'PX', ms_until(tat))
      if c.waiting then
        redis.call('ZREM', k('line', c.name, c.key), token)
        redis.call('ZREM', k('wexp', c.name, c.key), token)
        redis.call('HDEL', k('wait', c.name, c.key), token)
      end
      local until_at = tat
      if remember > 0 then
        local granted = k('granted', c.name, c.key)
        redis.call('ZADD', granted, num(now + remember), token)
        redis.call('PEXPIRE', granted, ms_until(now + remember))
        until_at = math.max(tat, now + remember)
      end
      index_key(c, until_at)
    end
  end
  return {'granted', num(now)}
end

local expiry = math.min(next_at, now + recheck) + grace
for _, c in ipairs(claims) do
  if not c.held then
    local line, wexp, waits = k('line', c.name, c.key), k('wexp', c.name, c.key), k('wait', c.name, c.key)
    redis.call('ZADD', line, num(since), token)
    redis.call('ZADD', wexp, num(expiry), token)
    redis.call('HSET', waits, token,
               cjson.encode({u = c.units, x = num(expiry), e = execution, n = node}))
    local last = tonumber(redis.call('ZRANGE', wexp, -1, -1, 'WITHSCORES')[2])
    local ms = ms_until(last)
    for _, entry in ipairs({line, wexp, waits}) do redis.call('PEXPIRE', entry, ms) end
    index_key(c, last)
  end
end
local blocking = claims[worst]
return {'refused', num(now), num(next_at), blocking.name, blocking.key,
        tostring(worst_ahead + 1), blocking.rule.rate}
