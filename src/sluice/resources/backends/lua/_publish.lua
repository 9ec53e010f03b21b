-- First lines of every script (the Python side puts them before the script's fast path):
-- the wake-ups of the other backend instances (processes).
--
-- wake: [{ns, ready}], ready (the waiters that would now be granted) left out if unknown.
-- The payload is JSON {o = origin, w = wake} with "o" first, so that an instance tells its
-- own wake-ups, which it ignores, by their first bytes. Every instance subscribes to B:wake
-- and, in the same SUBSCRIBE, to B:wake:<its origin>: when B:wake has no subscriber beyond
-- those of the origin's own channel, only the instance itself would hear the wake-up, and it
-- is not sent (the subscriber counts are this server's, the one every instance talks to).
local function publish(origin, wake)
  if #wake == 0 then return end
  local channel = ARGV[1] .. ':wake'
  local heard = redis.call('PUBSUB', 'NUMSUB', channel, channel .. ':' .. origin)
  if heard[2] > heard[4] then
    redis.call('PUBLISH', channel,
               '{"o":' .. cjson.encode(origin) .. ',"w":' .. cjson.encode(wake) .. '}')
  end
end
