-- The admission rule of sluice/resources/admission.py for the scripts (keep the two in step).

-- Rank of waiters: first refusal time, then higher priority, then token.
local function rank_less(a, b)
  if a.sn ~= b.sn then return a.sn < b.sn end
  if a.pr ~= b.pr then return a.pr > b.pr end
  return bytes_less(a.t, b.t)
end

local function load_usage(ns)
  local usage, flat = {}, redis.call('HGETALL', key('usage', ns))
  for i = 1, #flat, 2 do usage[flat[i]] = tonumber(flat[i + 1]) end
  usage.all = usage.all or 0
  return usage
end

-- Waiter entries of ns, decoded, with t (token), sn (first refusal time as a number) and
-- lapsed (whether it expired at `now`).
local function load_waiter_entries(ns, now)
  local entries, flat = {}, redis.call('HGETALL', key('waiters', ns))
  for i = 1, #flat, 2 do
    local w = cjson.decode(flat[i + 1])
    w.t, w.sn, w.lapsed = flat[i], tonumber(w.s), tonumber(w.x) <= now
    entries[#entries + 1] = w
  end
  return entries
end

-- In-use units plus what the waiters walked so far reserve.
local function new_room(quota, usage)
  return {quota = quota, usage = usage, reserved = 0, by = {}}
end

local function room_full(room)
  return room.usage.all + room.reserved >= room.quota
end

local function cap_blocks(room, a)
  local pf, df = project_field(a.p), domain_field(a.p, a.d)
  local used = room.usage[pf] or 0
  if a.pc and used + (room.by[pf] or 0) + a.u > a.pc then return 'project', used, a.pc end
  used = room.usage[df] or 0
  if a.dc and used + (room.by[df] or 0) + a.u > a.dc then return 'namespace', used, a.dc end
  return nil
end

-- A waiter's stored blocking scope says what refused it at its last ask: 'other' (another
-- namespace of its claim, not this one), a scope ending in ALSO_ELSEWHERE (this one and
-- another), or a plain scope (this one only); see read_scope in backends/_shared.py.
local function blocked_elsewhere(w)
  return w.b == 'other' or w.b:sub(-#ALSO_ELSEWHERE) == ALSO_ELSEWHERE
end

-- A waiter blocked only by room here sets its units aside whether or not they fit yet; one
-- blocked elsewhere too only if it could take them now (refused here too, and it fits);
-- an overdue one always (STARVATION_BOUND seconds after its first refusal, written in by
-- redis.py from admission.py); one over its caps or the quota never.
local function reserve(room, w, now)
  if w.u > room.quota or cap_blocks(room, w) then return end
  local fits = room.usage.all + room.reserved + w.u <= room.quota
  local could_take_it = fits and w.b ~= 'other'
  if blocked_elsewhere(w) and not could_take_it and now - w.sn < STARVATION_BOUND then
    return
  end
  room.reserved = room.reserved + w.u
  if fits then
    local pf, df = project_field(w.p), domain_field(w.p, w.d)
    room.by[pf] = (room.by[pf] or 0) + w.u
    room.by[df] = (room.by[df] or 0) + w.u
  end
end

-- nil when `a` fits, else {scope, in_use, limit}.
local function judge(room, a)
  if room.usage.all + room.reserved + a.u > room.quota then
    return {scope = 'global', in_use = room.usage.all, limit = room.quota}
  end
  local scope, used, limit = cap_blocks(room, a)
  if scope then return {scope = scope, in_use = used, limit = limit} end
  return nil
end

-- Tokens of the live waiters that would be granted now, in rank order; nil when nobody
-- waits (then anyone may ask).
local function next_in_line(ns, now)
  local live = {}
  for _, w in ipairs(load_waiter_entries(ns, now)) do
    if not w.lapsed then live[#live + 1] = w end
  end
  if #live == 0 then return nil end
  local quota = resolve_quota(ns, nil)
  if not quota then return {} end
  table.sort(live, rank_less)
  local room, ready = new_room(quota, load_usage(ns)), {}
  for _, w in ipairs(live) do
    if room_full(room) then break end
    if not judge(room, w) then ready[#ready + 1] = w.t end
    reserve(room, w, now)
  end
  return ready
end

local function usage_with_ready(ns, now)
  local entry = usage_entry(ns)
  entry.ready = next_in_line(ns, now)
  return entry
end
