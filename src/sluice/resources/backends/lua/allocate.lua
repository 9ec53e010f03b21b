-- Claim several namespaces for one token, all or nothing: the admission rule of
-- sluice/resources/admission.py, step for step (keep the two in step).
--
-- ARGV[1] base key (see _common.lua)   ARGV[2] now   ARGV[3] now + lease   ARGV[4] token
-- (ARGV[2] '' and ARGV[3] the lease: the server's TIME is the time, see _clock.lua)
-- ARGV[5] origin of this backend instance, for wake-ups
-- ARGV[6..10] holder: project, domain, execution, node, priority
-- then five per claim: namespace, units, default quota, project cap, domain cap ('' if none)
-- Returns, granted at once (the fast path below): [in_use] after the grant, one per claim,
-- with nobody waiting there. Otherwise JSON: {unknown = ns} or {too_big = ns, units, quota}
-- with nothing written, or {status,
-- ns, scope, in_use, limit, position, waited_since, usage = [{namespace, in_use, waiters}],
-- reclaimed = [ns]}.

-- Fast path: the common uncontended claim, granted with a few reads and the writes of a
-- grant, before any prelude function exists (the general path below is a function, so they
-- are made only when it runs). It answers only where the general path would grant with
-- nothing else to do: every namespace has a quota, no waiter entry (so no reservation to
-- respect and no lapsed waiter to drop), no lapsed lease to reclaim, the token holds none of
-- them, and the claim fits the quota and its caps; then it writes what step 4 below writes
-- for a grant. Anything else goes to the general path, with nothing written.
local function granted_at_once()
  local base, now_s, expiry_s, token = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
  local project, domain = ARGV[6], ARGV[7]
  local pf, df = 'p:' .. project, 'd:' .. #project .. ':' .. project .. ':' .. domain
  local claims = {}
  for a = 11, #ARGV, 5 do
    local ns, units, default = ARGV[a], tonumber(ARGV[a + 1]), ARGV[a + 2]
    local pc, dc = tonumber(ARGV[a + 3]), tonumber(ARGV[a + 4])
    local q = redis.call('HMGET', base .. ':quota:' .. ns, 'operator', 'config', 'plugin',
                         'default')  -- resolve_quota
    local quota = tonumber(q[1] or q[2] or q[3] or (default ~= '' and default) or q[4])
    if not quota
        or redis.call('HLEN', base .. ':waiters:' .. ns) > 0
        or redis.call('ZCOUNT', base .. ':leases:' .. ns, '-inf', now_s) > 0
        or redis.call('HEXISTS', base .. ':holders:' .. ns, token) == 1 then
      return nil
    end
    local used = redis.call('HMGET', base .. ':usage:' .. ns, 'all', pf, df)
    local all, by_p, by_d = tonumber(used[1] or '0'), tonumber(used[2] or '0'),
                            tonumber(used[3] or '0')
    if all + units > quota or (pc and by_p + units > pc) or (dc and by_d + units > dc) then
      return nil
    end
    claims[#claims + 1] = {
      ns = ns, u = units, all = all + units, by_p = by_p + units, by_d = by_d + units,
      -- The default is written only when it changes; the namespace is already listed in
      -- B:namespaces when it has a stored quota source or units in use (every writer of
      -- those adds it), so SADD is needed only for a namespace seen for the first time.
      df = default ~= q[4] and default or '',
      known = (q[1] or q[2] or q[3] or q[4] or all > 0) and true or false}
  end
  local in_use = {}
  for i, c in ipairs(claims) do
    if c.df ~= '' then redis.call('HSET', base .. ':quota:' .. c.ns, 'default', c.df) end
    if not c.known then redis.call('SADD', base .. ':namespaces', c.ns) end
    redis.call('HSET', base .. ':holders:' .. c.ns, token, cjson.encode(
      {p = project, d = domain, e = ARGV[8], n = ARGV[9], u = c.u, g = now_s}))
    redis.call('ZADD', base .. ':leases:' .. c.ns, expiry_s, token)  -- set_lease
    redis.call('ZADD', base .. ':lapse', expiry_s, c.ns .. '\n' .. token)
    -- count_units: the three counters read above, each plus the units, in one write (the
    -- script is atomic, and each claim has a namespace, so a hash, of its own)
    redis.call('HSET', base .. ':usage:' .. c.ns, 'all', c.all, pf, c.by_p, df, c.by_d)
    in_use[i] = c.all
  end
  return in_use
end

local in_use = granted_at_once()
if in_use then return in_use end

-- GENERAL PATH (the Python side makes the rest a function, the prelude at its top)

local now_s, now, expiry_s, token = ARGV[2], tonumber(ARGV[2]), ARGV[3], ARGV[4]
local holder = {p = ARGV[6], d = ARGV[7], e = ARGV[8], n = ARGV[9], pr = tonumber(ARGV[10])}
local claims = {}
for a = 11, #ARGV, 5 do
  claims[#claims + 1] = {ns = ARGV[a], u = tonumber(ARGV[a + 1]), df = tonumber(ARGV[a + 2]),
                         pc = tonumber(ARGV[a + 3]), dc = tonumber(ARGV[a + 4])}
end

-- Live waiters of ns other than the asker (lapsed ones are dropped), and the asker's entry.
local function load_waiters(ns)
  local others, mine, dropped = {}, nil, false
  for _, w in ipairs(load_waiter_entries(ns, now)) do
    if w.lapsed then
      dropped = drop_waiter(ns, w.t) or dropped
    elseif w.t == token then
      mine = w
    else
      others[#others + 1] = w
    end
  end
  return others, mine, dropped
end

local function admit(state, ask)
  local ahead = {}
  for _, w in ipairs(state.waiters) do
    if rank_less(w, ask) then ahead[#ahead + 1] = w end
  end
  table.sort(ahead, rank_less)
  local room = new_room(state.quota, state.usage)
  for _, w in ipairs(ahead) do
    if room_full(room) then break end
    reserve(room, w, now)
  end
  local verdict = judge(room, ask)
  if verdict then verdict.position = #ahead + 1 end
  return verdict
end

-- 1. Every namespace must have a quota the claim can fit in; nothing is written before this.
local quotas = {}
for i, c in ipairs(claims) do
  quotas[i] = resolve_quota(c.ns, c.df)
  if not quotas[i] then return cjson.encode({unknown = c.ns}) end
  if c.u > quotas[i] then return cjson.encode({too_big = c.ns, units = c.u, quota = quotas[i]}) end
end

-- 2. Reclaim lapsed leases and waiters, read each namespace.
local states, reclaimed, since_s = {}, {}, nil
for i, c in ipairs(claims) do
  local lapsed = reclaim_holders(c.ns, now)
  local others, mine, dropped = load_waiters(c.ns)
  if lapsed or dropped then reclaimed[#reclaimed + 1] = c.ns end
  if mine and (not since_s or mine.sn < tonumber(since_s)) then since_s = mine.s end
  states[i] = {quota = quotas[i], usage = load_usage(c.ns), waiters = others,
               holding = redis.call('HEXISTS', key('holders', c.ns), token) == 1}
end
local waited_s = since_s
since_s = since_s or now_s

-- 3. Judge every claim not yet held; the first refusal in claim order is reported.
local refusal, verdicts = nil, {}
for i, c in ipairs(claims) do
  if not states[i].holding then
    local ask = {t = token, p = holder.p, d = holder.d, u = c.u, pc = c.pc, dc = c.dc,
                 pr = holder.pr, sn = tonumber(since_s)}
    verdicts[i] = admit(states[i], ask)
    if verdicts[i] and not refusal then refusal = {ns = c.ns, v = verdicts[i]} end
  end
end

-- 4. Apply: holders for all, or a waiter entry in every namespace not held.
for i, c in ipairs(claims) do
  if c.df then redis.call('HSET', key('quota', c.ns), 'default', c.df) end
  redis.call('SADD', BASE .. ':namespaces', c.ns)
  if states[i].holding then
    extend_lease(c.ns, token, now, expiry_s)
    if not refusal then drop_waiter(c.ns, token) end
  elseif not refusal then
    drop_waiter(c.ns, token)
    redis.call('HSET', key('holders', c.ns), token, cjson.encode(
      {p = holder.p, d = holder.d, e = holder.e, n = holder.n, u = c.u, g = now_s}))
    set_lease(c.ns, token, expiry_s)
    count_units(c.ns, holder.p, holder.d, c.u)
  else
    local scope = verdicts[i] and verdicts[i].scope or 'other'
    if scope ~= 'other' then  -- WaiterRecord.stored_scope: another namespace refused it too
      for j in pairs(verdicts) do
        if j ~= i then scope = scope .. ALSO_ELSEWHERE break end
      end
    end
    redis.call('HSET', key('waiters', c.ns), token, cjson.encode(
      {p = holder.p, d = holder.d, e = holder.e, n = holder.n, u = c.u, pr = holder.pr,
       pc = c.pc, dc = c.dc, s = since_s, x = expiry_s, b = scope}))
    redis.call('ZADD', BASE .. ':wlapse', expiry_s, member(c.ns, token))
  end
end
local wake = {}
for i, ns in ipairs(reclaimed) do wake[i] = {ns} end
publish(ARGV[5], wake)

local usage = {}
for i, c in ipairs(claims) do usage[i] = usage_entry(c.ns) end
local result = {usage = usage, reclaimed = reclaimed}
if refusal then
  result.status, result.ns, result.scope = 'refused', refusal.ns, refusal.v.scope
  result.in_use, result.limit, result.position = refusal.v.in_use, refusal.v.limit, refusal.v.position
else
  result.status, result.waited_since, result.now = 'granted', waited_s, now_s
end
return cjson.encode(result)
