-- Prelude of every rate limit script (ratelimit_redis.py puts it first); nothing here writes.
--
-- Key layout, all under one hash tag so a script touches a single cluster slot:
--   B = "<prefix>:{ratelimits}" (ARGV[1] of every script)
--   B:rules:<name>    HASH  operator | config | plugin -> "rate\ninterval\nburst"
--   B:names           SET   every name with a rule
--   B:active          SET   every name with a live key
--   B:keyset:<name>   ZSET  key -> when everything of that key lapses (listing, rule changes)
--   and per key, K = "<#name>:<name>:<key>" (a name cannot run into its key):
--   B:tat:K           STRING  the GCRA theoretical arrival time
--   B:line:K          ZSET  waiting token -> first refusal time (Redis orders ties by token
--                           bytes: exactly the (since, token) rank of gcra.py)
--   B:wait:K          HASH  waiting token -> JSON {u, x, e, n} (units, expiry, execution, node)
--   B:wexp:K          ZSET  waiting token -> expiry
--   B:granted:K       ZSET  token -> when its remembered grant is forgotten
-- Every per-key entry expires (PEXPIRE) once its key is idle and nothing of it is live, so
-- idle keys cost nothing. Times are seconds since the epoch: the caller's test clock
-- (ARGV[2]) or the server's TIME; they cross as "%.17g" strings, losing no precision.

local BASE = ARGV[1]
local SOURCES = {'operator', 'config', 'plugin'}
local EPSILON = 1e-9          -- as gcra.EPSILON
local LATE_WAITER_RETRY = 1.0 -- as gcra.LATE_WAITER_RETRY

local function key_id(name, key)
  return #name .. ':' .. name .. ':' .. key
end

local function k(kind, name, key)
  return BASE .. ':' .. kind .. ':' .. key_id(name, key)
end

local function num(x)
  return string.format('%.17g', x)
end

local function clock(given)
  if given ~= '' then return tonumber(given) end
  local tm = redis.call('TIME')
  return tonumber(tm[1]) + tonumber(tm[2]) / 1000000
end

local function parse_rule(text, source)
  local rate, interval, burst = string.match(text, '^(.*)\n([^\n]*)\n([^\n]*)$')
  return {rate = rate, interval = tonumber(interval), burst = tonumber(burst), source = source}
end

-- Highest precedence first: {rule, ...} of every source that sets one.
local function rules_of(name)
  local found = redis.call('HMGET', BASE .. ':rules:' .. name, unpack(SOURCES))
  local rules = {}
  for i = 1, 3 do
    if found[i] then rules[#rules + 1] = parse_rule(found[i], SOURCES[i]) end
  end
  return rules
end

-- Byte order, as Python compares str (Lua's `<` on strings follows the server's locale).
local function bytes_less(a, b)
  for i = 1, math.min(#a, #b) do
    local x, y = a:byte(i), b:byte(i)
    if x ~= y then return x < y end
  end
  return #a < #b
end

-- Where the next admission starts from (gcra.base).
local function start_of(rule, tat, now)
  return math.min(math.max(tat, now), now + rule.burst * rule.interval)
end

local function tat_of(name, key)
  return tonumber(redis.call('GET', k('tat', name, key)) or '0')
end
