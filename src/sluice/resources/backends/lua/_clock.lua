-- The store's clock, first thing in every script that judges time: where the caller sent no
-- time (ARGV[now] = ''), the server's TIME is written into ARGV[now], and an expiry argument,
-- sent as a lease in seconds, becomes TIME + lease. A caller's time (a test clock) is used as
-- it is, its expiry already absolute. So no engine's clock ever judges a lease here.
-- (Redis 7 replicates a script's effects, so reading TIME before writing is allowed.)
local function store_clock(now_i, expiry_i)
  if ARGV[now_i] ~= '' then return end
  local t = redis.call('TIME')
  local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
  ARGV[now_i] = string.format('%.6f', now)
  if expiry_i then ARGV[expiry_i] = string.format('%.6f', now + tonumber(ARGV[expiry_i])) end
end
