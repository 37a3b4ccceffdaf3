package redis

// advanceScript sets each of KEYS (workers' checkpoints) to ARGV[1]
// where it is absent or before it: a DDL's point, which no checkpoint
// passes back over.
const advanceScript = `
local function split(v)
  local c = string.find(v, ':', 1, true)
  return string.sub(v, 1, c - 1), tonumber(string.sub(v, c + 1))
end
local bs, bi = split(ARGV[1])
for _, k in ipairs(KEYS) do
  local s = redis.call('GET', k)
  local set = not s
  if s then
    local as, ai = split(s)
    if #as ~= #bs then set = #as < #bs elseif as ~= bs then set = as < bs else set = ai < bi end
  end
  if set then redis.call('SET', k, ARGV[1]) end
end
return 0
`

// BackfillScript writes a row a cache reader read from the database
// after a miss, only where that cannot overwrite what the sink wrote:
// when the key has no value and its version key ({key}:seq) is not a
// tombstone (a deleted row, whose delete a stale read could undo). A live
// version without a value is a value Redis evicted: writing is then
// fine. KEYS: the key, its version key. ARGV: the format (json or hash),
// then the JSON object, or field, value pairs (a NULL column has none).
// It returns 1 when it wrote the row, 0 when not.
//
//	EVAL "$(cat backfill.lua)" 2 orders:42 orders:42:seq json '{"id":"42","note":"a"}'
const BackfillScript = `if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
local v = redis.call('GET', KEYS[2])
if v and string.sub(v, 1, 1) == 'd' then return 0 end
if ARGV[1] == 'hash' then
  if #ARGV < 3 then return 0 end
  redis.call('HSET', KEYS[1], unpack(ARGV, 2))
else
  redis.call('SET', KEYS[1], ARGV[2])
end
return 1
`
