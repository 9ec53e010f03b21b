-- Forget names whose keys all lapsed (the keys themselves expire on their own). ARGV: B, now.
local now = clock(ARGV[2])
local dropped = 0
for _, name in ipairs(redis.call('SMEMBERS', BASE .. ':active')) do
  local keyset = BASE .. ':keyset:' .. name
  dropped = dropped + redis.call('ZREMRANGEBYSCORE', keyset, '-inf', num(now))
  if redis.call('ZCARD', keyset) == 0 then redis.call('SREM', BASE .. ':active', name) end
end
return dropped
