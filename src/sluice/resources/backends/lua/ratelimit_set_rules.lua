-- Store (or clear, with "") one source's rule of each name, then bring every live key of the
-- name under its effective rule (gcra.clamped). ARGV: B, now ('' for TIME), source, then
-- (name, "rate\ninterval\nburst" or "") per name.
local now = clock(ARGV[2])
local source = ARGV[3]
for i = 4, #ARGV, 2 do
  local name, text = ARGV[i], ARGV[i + 1]
  local rules = BASE .. ':rules:' .. name
  if text == '' then
    redis.call('HDEL', rules, source)
    if redis.call('HLEN', rules) == 0 then redis.call('SREM', BASE .. ':names', name) end
  else
    redis.call('HSET', rules, source, text)
    redis.call('SADD', BASE .. ':names', name)
  end
  local rule = rules_of(name)[1]
  if rule then
    local ceiling = now + rule.burst * rule.interval
    for _, key in ipairs(redis.call('ZRANGEBYSCORE', BASE .. ':keyset:' .. name, '(' .. num(now), '+inf')) do
      if tat_of(name, key) > ceiling then
        redis.call('SET', k('tat', name, key), num(ceiling), 'KEEPTTL')
      end
    end
  end
end
return 0
