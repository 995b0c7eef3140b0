package memory

import "github.com/redis/go-redis/v9"

// The Lua scripts of the Redis store. Every script touches one hash slot
// (a conversation's shard, one namespace, or the bound over all traces),
// so each runs on Redis Cluster too, except commit in direct mode, which
// the store uses only off Cluster (it also deletes the traces it evicts,
// keys it does not declare).
//
// The due index of a shard is a sorted set: a pending conversation scores
// (pending since, in ms) - pendingOffset, which is negative; a conversation
// with a deadline and no pending mark scores the deadline in ms (once
// loaded under a lock, no earlier than the lock's expiry).

// luaCommon is prepended to the scripts that need it.
const luaCommon = `
local function push(key, args, from, count)
  local last = from + count - 1
  while from <= last do
    local upto = math.min(from + 999, last)
    redis.call('RPUSH', key, unpack(args, from, upto))
    from = upto + 1
  end
end
local function is_pending(due, id)
  local cur = redis.call('ZSCORE', due, id)
  return cur and tonumber(cur) < 0
end
local function mark_pending(due, id, score)
  if not is_pending(due, id) then redis.call('ZADD', due, score, id) end
end
-- used ranks a session key first in its namespace's recent set: its
-- score is one more than the highest, so the order is that of the appends.
local function used(recent, key)
  local top = redis.call('ZREVRANGE', recent, 0, 0, 'WITHSCORES')
  local score = 1
  if top[2] then score = tonumber(top[2]) + 1 end
  redis.call('ZADD', recent, score, key)
end
`

// luaRecord is prepended to the scripts that record a message: record
// takes the keys due, conv, msgs, ts mark and event mark (nil when none)
// and ARGV (A) id, team, channel, thread_ts, ts, message, pending score,
// dedup ttl ms, conversation ttl ms. Returns 1 when recorded, 0 for a
// duplicate.
const luaRecord = `
local function record(due, conv, msgs, tsmark, evmark, A)
  mark_pending(due, A[1], A[7])
  if redis.call('EXISTS', tsmark) == 1 then return 0 end
  if evmark and redis.call('EXISTS', evmark) == 1 then return 0 end
  if redis.call('HEXISTS', msgs, A[5]) == 1 then return 0 end
  redis.call('SET', tsmark, '1', 'PX', A[8])
  if evmark then redis.call('SET', evmark, '1', 'PX', A[8]) end
  if redis.call('EXISTS', conv) == 0 then
    redis.call('HSET', conv, 'team', A[2], 'channel', A[3], 'thread_ts', A[4])
  end
  redis.call('HSET', msgs, A[5], A[6])
  redis.call('PEXPIRE', conv, A[9])
  redis.call('PEXPIRE', msgs, A[9])
  return 1
end
`

// recordScript: KEYS due, conv, msgs, ts mark[, event mark]; ARGV as
// record's. Returns 1 when recorded, 0 for a duplicate.
var recordScript = redis.NewScript(luaCommon + luaRecord + `
return record(KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], ARGV)
`)

// recordLookedScript: KEYS due, conv, msgs, ts mark, channel agents,
// pairings by user[, event mark]; ARGV 1-9 as record's, then the user
// whose pairing to read ("" none), whether to read the channel's agents
// and the conversation's existence ("1"), and whether the channel must
// have agents, the user be unpaired, the conversation exist ("1"). Returns
// {met, recorded, agents, human agent ("" none), exists}. Its keys span
// hash slots: it runs off Cluster only.
var recordLookedScript = redis.NewScript(luaCommon + luaRecord + `
local agents = {}
if ARGV[11] == '1' then agents = redis.call('LRANGE', KEYS[5], 0, -1) end
local human = ''
if ARGV[10] ~= '' then human = redis.call('HGET', KEYS[6], ARGV[10]) or '' end
local exists = 0
if ARGV[12] == '1' then exists = redis.call('EXISTS', KEYS[2]) end
local met = 1
if ARGV[13] == '1' and #agents == 0 then met = 0 end
if ARGV[14] == '1' and human ~= '' then met = 0 end
if ARGV[15] == '1' and exists == 0 then met = 0 end
local recorded = 0
if met == 1 then recorded = record(KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[7], ARGV) end
return {met, recorded, agents, human, exists}
`)

// updateScript: KEYS conv, msgs; ARGV ts, raw, text, conversation ttl ms.
// Returns 0 when the message is unknown.
var updateScript = redis.NewScript(`
local v = redis.call('HGET', KEYS[2], ARGV[1])
if not v then return 0 end
local m = cjson.decode(v)
if ARGV[2] == '' then m.raw = nil else m.raw = ARGV[2] end
m.text = ARGV[3]
redis.call('HSET', KEYS[2], ARGV[1], cjson.encode(m))
redis.call('PEXPIRE', KEYS[1], ARGV[4])
redis.call('PEXPIRE', KEYS[2], ARGV[4])
return 1
`)

// deleteScript: KEYS conv, msgs; ARGV ts, conversation ttl ms.
var deleteScript = redis.NewScript(`
if redis.call('HDEL', KEYS[2], ARGV[1]) == 1 then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  redis.call('PEXPIRE', KEYS[2], ARGV[2])
end
return 1
`)

// markPendingScript: KEYS due; ARGV id, pending score.
var markPendingScript = redis.NewScript(luaCommon + `
mark_pending(KEYS[1], ARGV[1], ARGV[2])
return 1
`)

// dueScript: KEYS due; ARGV now ms, limit (<= 0: all), the shard's
// conversation key prefix. Returns id, score pairs, lowest score first. A
// deadline whose conversation expired is dropped from the index.
var dueScript = redis.NewScript(`
local limit = tonumber(ARGV[2])
local count = limit > 0 and limit or -1
local out, kept = {}, 0
while true do
  local batch = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'WITHSCORES', 'LIMIT', kept, count)
  if #batch == 0 then return out end
  local dropped = false
  for i = 1, #batch, 2 do
    local id, score = batch[i], batch[i + 1]
    local key = ARGV[3] .. id:gsub('[%%:{}]', function(c) return string.format('%%%02X', c:byte()) end)
    if tonumber(score) < 0 or redis.call('EXISTS', key) == 1 then
      out[#out + 1] = id
      out[#out + 1] = score
      kept = kept + 1
      if kept == limit then return out end
    else
      redis.call('ZREM', KEYS[1], id)
      dropped = true
    end
  end
  if not dropped or count < 0 then return out end
end
`)

// renewScript: KEYS lock; ARGV token, ttl ms. Returns 0 when not held.
var renewScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
`)

// loadScript: KEYS lock, due, conv, msgs, outbox; ARGV token, id, now ms,
// lock ttl ms to take the lock (empty when it is held already). Returns 0 when
// the lock is not held (or, taking it, held by someone else), else
// {conversation fields, messages, outbox}. The lock's expiry is the lease:
// a conversation that was pending or due stays due from then on, so work
// a holder takes and never commits is found by the others.
var loadScript = redis.NewScript(luaCommon + `
local now, lease = tonumber(ARGV[3]), 0
if ARGV[4] ~= '' then
  if not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[4]) then return 0 end
  lease = now + tonumber(ARGV[4])
else
  if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
  lease = now + redis.call('PTTL', KEYS[1])
end
local score = redis.call('ZSCORE', KEYS[2], ARGV[2])
if score then
  score = tonumber(score)
  if redis.call('EXISTS', KEYS[3]) == 0 then
    if score < 0 then redis.call('ZREM', KEYS[2], ARGV[2]) end
  elseif score < lease then
    redis.call('ZADD', KEYS[2], string.format('%d', lease), ARGV[2])
  end
end
return {redis.call('HGETALL', KEYS[3]), redis.call('HVALS', KEYS[4]), redis.call('LRANGE', KEYS[5], 0, -1)}
`)

// commitScript: KEYS lock, due, conv, msgs, outbox, posts, then a session
// list, its namespace index and recent set per direct session append;
// ARGV token, id, team, channel, thread_ts, state, deadline ms (empty for
// none), conversation ttl ms, release (empty to keep the lock), message
// count, (ts, message)…, outbox entry (empty for none), session bound, session
// count, (key, entry count, entries…)…, pending posts, trace count and, when
// there are traces, trace retention ms, trace bound in bytes, the bound over
// all traces in bytes (empty when the caller keeps it: on Cluster), now ms,
// entries… (with the keys trace list, trace bytes and thread reference, then
// the keys of luaTraceBound when the bound over all traces is given), then
// the usage counts as count_usage takes them (with the key of the day's
// counters last, when there are some). Returns 0
// when the lock is not held, else 2 when the conversation is pending, 1
// when not.
var commitScript = redis.NewScript(luaCommon + luaUsage + luaTraceBound + `
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
local id, ttl, release = ARGV[2], ARGV[8], ARGV[9] ~= ''
local pending = is_pending(KEYS[2], id)
-- The deadline is kept in the record too, for replicas of earlier
-- versions (whose Load restores it) during a rolling upgrade.
if ARGV[7] == '' then
  redis.call('HSET', KEYS[3], 'team', ARGV[3], 'channel', ARGV[4], 'thread_ts', ARGV[5], 'state', ARGV[6])
  redis.call('HDEL', KEYS[3], 'deadline')
  if not pending then redis.call('ZREM', KEYS[2], id) end
else
  redis.call('HSET', KEYS[3], 'team', ARGV[3], 'channel', ARGV[4], 'thread_ts', ARGV[5], 'state', ARGV[6], 'deadline', ARGV[7])
  if not pending then redis.call('ZADD', KEYS[2], ARGV[7], id) end
end
local i = 10
local n = tonumber(ARGV[i])
i = i + 1
for _ = 1, n do
  redis.call('HSET', KEYS[4], ARGV[i], ARGV[i + 1])
  i = i + 2
end
redis.call('PEXPIRE', KEYS[3], ttl)
redis.call('PEXPIRE', KEYS[4], ttl)
if ARGV[i] ~= '' then
  redis.call('RPUSH', KEYS[5], ARGV[i])
  redis.call('PEXPIRE', KEYS[5], ttl)
end
local bound = tonumber(ARGV[i + 1])
local sessions = tonumber(ARGV[i + 2])
i = i + 3
local k = 7
for _ = 1, sessions do
  local key, count = ARGV[i], tonumber(ARGV[i + 1])
  push(KEYS[k], ARGV, i + 2, count)
  redis.call('LTRIM', KEYS[k], -bound, -1)
  redis.call('SADD', KEYS[k + 1], key)
  used(KEYS[k + 2], key)
  i = i + 2 + count
  k = k + 3
end
if tonumber(ARGV[i]) > 0 then
  redis.call('HSET', KEYS[6], id, ARGV[i])
else
  redis.call('HDEL', KEYS[6], id)
end
local traces = tonumber(ARGV[i + 1])
local u, uk = i + 2, k
if traces > 0 then
  local list, size, ref = KEYS[k], KEYS[k + 1], KEYS[k + 2]
  local tttl, bound, all, now = ARGV[i + 2], tonumber(ARGV[i + 3]), ARGV[i + 4], tonumber(ARGV[i + 5])
  local total = tonumber(redis.call('GET', size) or '0')
  if redis.call('EXISTS', list) == 0 then total = 0 end
  for j = 1, traces do
    local e = ARGV[i + 5 + j]
    redis.call('RPUSH', list, e)
    total = total + #e
  end
  while total > bound and redis.call('LLEN', list) > 1 do
    total = total - #redis.call('LPOP', list)
  end
  redis.call('PEXPIRE', list, tttl)
  redis.call('SET', size, total, 'PX', tttl)
  redis.call('SET', ref, id, 'PX', tttl)
  u, uk = i + 6 + traces, k + 3
  if all ~= '' then
    local idx, sizes, sum = KEYS[k + 3], KEYS[k + 4], KEYS[k + 5]
    local held = tb_total(idx, sizes, sum, now, tonumber(tttl))
    tb_add(idx, sizes, sum, held, list, total, now, tonumber(all), true)
    uk = k + 6
  end
end
count_usage(KEYS[uk], ARGV, u)
if release then redis.call('DEL', KEYS[1]) end
if pending then return 2 end
return 1
`)

// luaTraceBound keeps the bound over all traces (trace.max_bytes), in
// keys of one hash slot: idx, a sorted set (a conversation's trace list key
// → ms of its last trace), sizes, a hash (the same key → its bytes as
// counted) and sum, their total. tb_total returns the total after
// forgetting what passed its retention (it expired by itself); tb_add
// counts a conversation's new size and evicts whole conversations, the
// least recently traced first, never m, until the total is within bound.
// With drop set (one Redis, not Cluster: their keys are in other slots) it
// deletes the evicted conversations' trace list and size; it returns
// their list keys.
const luaTraceBound = `
local function tb_forget(idx, sizes, m)
  local n = tonumber(redis.call('HGET', sizes, m) or '0')
  redis.call('HDEL', sizes, m)
  redis.call('ZREM', idx, m)
  return n
end
local function tb_total(idx, sizes, sum, now, retention)
  local total = tonumber(redis.call('GET', sum) or '0')
  while true do
    local old = redis.call('ZRANGEBYSCORE', idx, '-inf', now - retention, 'LIMIT', 0, 100)
    if #old == 0 then break end
    for _, m in ipairs(old) do total = total - tb_forget(idx, sizes, m) end
  end
  return math.max(total, 0)
end
local function tb_add(idx, sizes, sum, total, m, size, now, bound, drop)
  total = total - tonumber(redis.call('HGET', sizes, m) or '0') + size
  redis.call('HSET', sizes, m, size)
  redis.call('ZADD', idx, now, m)
  local evicted = {}
  while total > bound do
    local first = redis.call('ZRANGE', idx, 0, 1)
    local victim = first[1]
    if victim == m then victim = first[2] end
    if not victim then break end
    total = total - tb_forget(idx, sizes, victim)
    evicted[#evicted + 1] = victim
    if drop then
      local base, e = string.match(victim, '^(.-}:)trace:(.*)$')
      if base then redis.call('DEL', victim, base .. 'tracebytes:' .. e) end
    end
  end
  redis.call('SET', sum, math.max(total, 0))
  return evicted
end
`

// traceBoundScript keeps the bound over all traces on Redis Cluster, in
// the same pipeline as the commit that adds the traces: KEYS those of
// luaTraceBound; ARGV the conversation's trace list key, the bytes the
// commit adds, the most the conversation can hold after it, now ms,
// trace retention ms, the bound. The conversation's size is estimated
// from above (what was counted plus what is added, within what it can
// hold). Returns the list keys of the conversations evicted, whose keys
// the caller deletes.
var traceBoundScript = redis.NewScript(luaTraceBound + `
local idx, sizes, sum, m = KEYS[1], KEYS[2], KEYS[3], ARGV[1]
local now, retention = tonumber(ARGV[4]), tonumber(ARGV[5])
local total = tb_total(idx, sizes, sum, now, retention)
local size = math.min(tonumber(redis.call('HGET', sizes, m) or '0') + tonumber(ARGV[2]), tonumber(ARGV[3]))
return tb_add(idx, sizes, sum, total, m, size, now, tonumber(ARGV[6]), false)
`)

// traceForgetScript: KEYS those of luaTraceBound; ARGV the trace list
// keys of conversations whose traces were deleted, which leave the count.
var traceForgetScript = redis.NewScript(luaTraceBound + `
local total = tonumber(redis.call('GET', KEYS[3]) or '0')
for _, m in ipairs(ARGV) do total = total - tb_forget(KEYS[1], KEYS[2], m) end
redis.call('SET', KEYS[3], math.max(total, 0))
return 0
`)

// luaUsage is prepended to the scripts that count usage: count_usage
// takes a day's counters key and, from ARGV[u], the number of increments,
// the number of names, then (when either is not 0) the key's ttl ms, the
// (field, increment) pairs and the (field, name) pairs.
const luaUsage = `
local function count_usage(key, A, u)
  local n, m = tonumber(A[u]), tonumber(A[u + 1])
  if n + m == 0 then return end
  local j = u + 3
  for _ = 1, n do
    redis.call('HINCRBY', key, A[j], A[j + 1])
    j = j + 2
  end
  for _ = 1, m do
    redis.call('HSET', key, A[j], A[j + 1])
    j = j + 2
  end
  redis.call('PEXPIRE', key, A[u + 2])
end
`

// usageScript: KEYS day's counters, applied mark; ARGV mark ttl ms, then
// count_usage's from ARGV[2]. A count already applied is skipped
// (returns 0).
var usageScript = redis.NewScript(luaUsage + `
if not redis.call('SET', KEYS[2], '1', 'NX', 'PX', ARGV[1]) then return 0 end
count_usage(KEYS[1], ARGV, 2)
return 1
`)

// releaseScript: KEYS lock, due; ARGV token, id. Returns 1 when the
// conversation is pending.
var releaseScript = redis.NewScript(luaCommon + `
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end
if is_pending(KEYS[2], ARGV[2]) then return 1 end
return 0
`)

// appendScript: KEYS list, index, recent set[, applied mark]; ARGV session
// key, bound, mark ttl ms, entries…. With a mark, an append already
// applied is skipped (returns 0).
var appendScript = redis.NewScript(luaCommon + `
if KEYS[4] and not redis.call('SET', KEYS[4], '1', 'NX', 'PX', ARGV[3]) then return 0 end
push(KEYS[1], ARGV, 4, #ARGV - 3)
redis.call('LTRIM', KEYS[1], -tonumber(ARGV[2]), -1)
redis.call('SADD', KEYS[2], ARGV[1])
used(KEYS[3], ARGV[1])
return 1
`)

// addAgentScript: KEYS channel list; ARGV ens. Returns 0 when present.
var addAgentScript = redis.NewScript(`
if redis.call('LPOS', KEYS[1], ARGV[1]) then return 0 end
redis.call('RPUSH', KEYS[1], ARGV[1])
return 1
`)

// pairScript: KEYS by-user, by-agent; ARGV user, ens. Returns the earlier
// agent of the user and user of the agent.
var pairScript = redis.NewScript(`
local prevAgent = redis.call('HGET', KEYS[1], ARGV[1]) or ''
local prevUser = redis.call('HGET', KEYS[2], ARGV[2]) or ''
if prevAgent ~= '' then redis.call('HDEL', KEYS[2], prevAgent) end
if prevUser ~= '' then redis.call('HDEL', KEYS[1], prevUser) end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('HSET', KEYS[2], ARGV[2], ARGV[1])
return {prevAgent, prevUser}
`)

var allScripts = []*redis.Script{
	recordScript, recordLookedScript, updateScript, deleteScript, markPendingScript, dueScript, renewScript,
	loadScript, commitScript, releaseScript, appendScript, addAgentScript, pairScript, usageScript,
	traceBoundScript, traceForgetScript,
}
