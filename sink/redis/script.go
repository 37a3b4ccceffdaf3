package redis

// applyScript applies a run of one worker's row changes and sets the
// worker's checkpoint, atomically (a script runs alone in Redis), each
// change only if its key's version is older than the change's.
//
// KEYS[1] is the worker's checkpoint key; then each change's keys in
// pairs, a key and its version key ({key}:seq): one pair, or for a
// key-changing UPDATE ("m") the old key's and then the new key's. So
// the version keys are KEYS[3], KEYS[5], ...: one MGET reads them all.
//
// ARGV: 1 "f" (the first call of an Apply: the checkpoint must be absent
// or before ARGV[2]) or "c" (a later one: the checkpoint must be ARGV[2],
// the previous call's last point, so that a call never applies after one
// that failed); 2 that point; 3 the run's last point, the new checkpoint;
// 4 the tombstone TTL in milliseconds; 5 the format, json or hash. Then
// each change: its op (i INSERT, u UPDATE, d DELETE, m UPDATE that moves
// the key), its version "seq:idx", and for i, u and m the after-image:
// json, one argument; hash, the number of fields n and n field, value
// pairs (a NULL column has no field).
//
// A version is "seq:idx", a tombstone's "d" and its version; seqs are
// compared by length and then as strings, so any uint64 compares exactly
// (Lua's numbers are doubles). The versions are read with one MGET, and
// those the run writes kept in a table, so a key's second change in a
// run sees its first. The json values and the live versions written go
// to one MSET, in order (the last of a key wins), sent before each
// delete (so that the delete comes after the writes before it) and at
// the end; a delete is a DEL and its tombstone's SET ... PX; a hash is
// written in place, DEL then HSET. So a run of json INSERTs and UPDATEs
// is four calls (GET, MGET, MSET, SET of the checkpoint), whatever its
// length. Counted: an INSERT whose key has a live version (an upsert),
// an UPDATE whose key has none (missing: never written, or deleted), a
// DELETE whose DEL finds no value (missing). It returns {applied,
// upserts, missing}.
const applyScript = `
local function split(v)
  if string.sub(v, 1, 1) == 'd' then v = string.sub(v, 2) end
  local c = string.find(v, ':', 1, true)
  return string.sub(v, 1, c - 1), tonumber(string.sub(v, c + 1))
end
local function before(a, b)
  local as, ai = split(a)
  local bs, bi = split(b)
  if #as ~= #bs then return #as < #bs end
  if as ~= bs then return as < bs end
  return ai < bi
end
local ck = redis.call('GET', KEYS[1])
if ARGV[1] == 'f' then
  if ck and not before(ck, ARGV[2]) then
    return redis.error_reply('BRAIDBEHIND the worker checkpoint is at ' .. ck .. ', past ' .. ARGV[2])
  end
elseif ck ~= ARGV[2] then
  return redis.error_reply('BRAIDCHAIN the worker checkpoint is at ' .. tostring(ck) .. ', not at ' .. ARGV[2] .. ': an earlier call failed')
end
local nkeys, nargs = #KEYS, #ARGV
local vks, nv = {}, 0
for i = 3, nkeys, 2 do
  nv = nv + 1
  vks[nv] = KEYS[i]
end
local got = {}
if nv > 0 then got = redis.call('MGET', unpack(vks)) end
local cur = {}
local mset, nm = {}, 0
local ttl, hash = ARGV[4], ARGV[5] == 'hash'
local ki, ai = 2, 6
local applied, upserts, missing = 0, 0, 0
local function stored(p)
  local s = cur[KEYS[p + 1]]
  if s == nil then s = got[p / 2] end
  return s
end
local function flush()
  if nm > 0 then
    redis.call('MSET', unpack(mset, 1, nm))
    nm = 0
  end
end
local function write(p, ver, a)
  local k, vk = KEYS[p], KEYS[p + 1]
  if hash then
    local n = tonumber(ARGV[a])
    redis.call('DEL', k)
    if n > 0 then redis.call('HSET', k, unpack(ARGV, a + 1, a + 2 * n)) end
    a = a + 1 + 2 * n
    mset[nm + 1], mset[nm + 2] = vk, ver
    nm = nm + 2
  else
    mset[nm + 1], mset[nm + 2], mset[nm + 3], mset[nm + 4] = k, ARGV[a], vk, ver
    nm = nm + 4
    a = a + 1
  end
  cur[vk] = ver
  return a
end
local function tombstone(p, ver)
  flush()
  local vk = KEYS[p + 1]
  local gone = redis.call('DEL', KEYS[p]) == 1
  cur[vk] = 'd' .. ver
  redis.call('SET', vk, cur[vk], 'PX', ttl)
  return gone
end
local function skip(a)
  if hash then return a + 1 + 2 * tonumber(ARGV[a]) end
  return a + 1
end
while ai <= nargs do
  local op, ver = ARGV[ai], ARGV[ai + 1]
  ai = ai + 2
  if op == 'm' then
    local did = false
    local s = stored(ki)
    if not s or before(s, ver) then
      if not tombstone(ki, ver) then missing = missing + 1 end
      did = true
    end
    s = stored(ki + 2)
    if not s or before(s, ver) then
      ai = write(ki + 2, ver, ai)
      did = true
    else
      ai = skip(ai)
    end
    if did then applied = applied + 1 end
    ki = ki + 4
  else
    local s = stored(ki)
    if s and not before(s, ver) then
      if op ~= 'd' then ai = skip(ai) end
    elseif op == 'd' then
      if not tombstone(ki, ver) then missing = missing + 1 end
      applied = applied + 1
    else
      local live = s and string.sub(s, 1, 1) ~= 'd'
      if op == 'i' and live then upserts = upserts + 1 end
      if op == 'u' and not live then missing = missing + 1 end
      ai = write(ki, ver, ai)
      applied = applied + 1
    end
    ki = ki + 2
  end
end
flush()
redis.call('SET', KEYS[1], ARGV[3])
return {applied, upserts, missing}
`

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
