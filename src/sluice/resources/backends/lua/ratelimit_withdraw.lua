-- Drop a token's waiter entries. ARGV: B, token, then (name, key) per claim.
local token = ARGV[2]
for i = 3, #ARGV, 2 do
  local name, key = ARGV[i], ARGV[i + 1]
  redis.call('ZREM', k('line', name, key), token)
  redis.call('ZREM', k('wexp', name, key), token)
  redis.call('HDEL', k('wait', name, key), token)
end
return 0
