-- Prelude of every resource script: the first lines of its general path (see `_script` in
-- redis.py); nothing here writes.
--
-- Key layout, all under one hash tag so a script touches a single cluster slot:
--   B = "<prefix>:{resources}" (ARGV[1] of every script)
--   B:namespaces       SET   every namespace with a quota, a holder or a waiter
--   B:lapse            ZSET  "<ns>\n<token>" -> lease expiry of every holder (for the sweeper)
--   B:wlapse           ZSET  "<ns>\n<token>" -> expiry of every waiter entry
--   B:wake             pub/sub channel; payload JSON {o = origin, w = [[ns, ready?]]}
--   B:wake:<origin>    pub/sub channel nobody publishes on: its subscriber is the instance
--                      of that origin (see _publish.lua)
--   B:quota:<ns>       HASH  operator | config | plugin | default -> quota
--   B:holders:<ns>     HASH  token -> JSON {p, d, e, n, u, g}  (project, domain, execution,
--                            node, units, granted at)
--   B:leases:<ns>      ZSET  token -> lease expiry
--   B:usage:<ns>       HASH  "all" -> units in use; "p:<project>" -> a project's;
--                            "d:<#project>:<project>:<domain>" -> a project/domain's
--   B:waiters:<ns>     HASH  token -> JSON {p, d, e, n, u, pr, pc, dc, s, x, b} (priority,
--                            caps, first refusal time, expiry, blocking scope)
-- Times are seconds since the epoch, passed by the caller as strings (or read from TIME, see
-- _clock.lua) and stored as given,
-- so no precision is lost in JSON.

local BASE = ARGV[1]

local function key(kind, ns)
  return BASE .. ':' .. kind .. ':' .. ns
end

local function member(ns, token)
  return ns .. '\n' .. token
end

local function project_field(project)
  return 'p:' .. project
end

local function domain_field(project, domain)
  return 'd:' .. #project .. ':' .. project .. ':' .. domain
end

-- Byte order, as Python compares str (Lua's `<` on strings follows the server's locale).
local function bytes_less(a, b)
  for i = 1, math.min(#a, #b) do
    local x, y = a:byte(i), b:byte(i)
    if x ~= y then return x < y end
  end
  return #a < #b
end

local function in_use(ns)
  return tonumber(redis.call('HGET', key('usage', ns), 'all') or '0')
end

local function usage_entry(ns)
  return {namespace = ns, in_use = in_use(ns), waiters = redis.call('HLEN', key('waiters', ns))}
end

-- Stored quota sources, highest precedence first, then the claim's default.
local function resolve_quota(ns, claim_default)
  local q = redis.call('HMGET', key('quota', ns), 'operator', 'config', 'plugin', 'default')
  for i = 1, 3 do
    if q[i] then return tonumber(q[i]) end
  end
  if claim_default then return claim_default end
  if q[4] then return tonumber(q[4]) end
  return nil
end
