#include "src/store/redis/scripts.h"

namespace trainq::redis {

namespace {

// Shared by every script. Keys are built here from the prefix (KEYS[1]): one Redis, not a
// Redis Cluster, holds a trainq cluster's store.
constexpr char kPrelude[] = R"lua(
local P = KEYS[1]
local function jk(id) return P .. 'job:' .. id end
local function ak(id, n) return P .. 'att:' .. id .. ':' .. n end
local function sk(state) return P .. 'state:' .. state end
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function event(text) redis.call('PUBLISH', P .. 'events', text) end
local function move(id, from, to)
  redis.call('ZREM', sk(from), id)
  redis.call('ZADD', sk(to), id, id)
  redis.call('HSET', jk(id), 'state', to)
end
-- The nodes an attempt hash `a` runs on: a gang's parts, or its one node.
local function nodes_of(a)
  local csv = redis.call('HGET', a, 'part_nodes')
  if csv and csv ~= '' then
    local t = {}
    for s in string.gmatch(csv, '[^,]+') do t[#t + 1] = s end
    return t
  end
  return {redis.call('HGET', a, 'node')}
end
local function set_of(csv)
  local t = {}
  for s in string.gmatch(csv, '[^,]+') do t[s] = true end
  return t
end
-- The compare-and-set: nil when job `id` is in one of `states` (a set) with attempt
-- `attempt` (nil: any), else the refusal saying what it is instead of `expected`.
local function cas(id, states, attempt, expected)
  local cur = redis.call('HMGET', jk(id), 'state', 'attempt')
  if not cur[1] then return {'notfound', 'no job ' .. id} end
  if states[cur[1]] and (attempt == nil or cur[2] == attempt) then return nil end
  return {'conflict', 'job ' .. id .. ' is ' .. cur[1] .. ' with attempt ' .. cur[2] ..
          ', not ' .. expected}
end
-- The leader fence: nil when `fence` ("NAME EPOCH", or '' for none) holds the lease.
local function fenced(fence)
  if fence == '' then return nil end
  local holder = redis.call('GET', P .. 'leader')
  if holder == fence then return nil end
  return {'conflict', 'not the leader: the lease is held by ' ..
          (holder and ('"' .. holder .. '"') or 'nobody') .. ', not "' .. fence .. '"'}
end
)lua";

constexpr char kReadPrelude[] = R"lua(
local function field(h, name)
  for k = 1, #h, 2 do if h[k] == name then return h[k + 1] end end
  return nil
end
local function read_job(id, with_attempts, with_env)
  local h = redis.call('HGETALL', jk(id))
  if #h == 0 then return false end
  if with_env == '0' then
    for k = 1, #h, 2 do if h[k] == 'env' then h[k + 1] = '' end end
  else
    local ref = field(h, 'env_ref')  -- an environment its submit shares (env:REF)
    if ref then
      h[#h + 1] = 'env'
      h[#h + 1] = redis.call('GET', P .. 'env:' .. ref) or ''
    end
  end
  local atts = {}
  if with_attempts == '1' then
    for n = 1, tonumber(field(h, 'attempt') or '0') do
      atts[#atts + 1] = redis.call('HGETALL', ak(id, n))
    end
  end
  return {h, atts}
end
)lua";

// ARGV: nchecks, (dep id, state it had)..., nenvs, env texts..., count, then per job:
// nfields, (field, value)... A job's env_ref k names the k-th env text of this call: each is
// stored once (env:N, with a count of the jobs that use it in env_refs).
constexpr char kSubmit[] = R"lua(
local i = 1
local nchecks = tonumber(ARGV[i]); i = i + 1
for k = 1, nchecks do
  if redis.call('HGET', jk(ARGV[i]), 'state') ~= ARGV[i + 1] then return {'retry'} end
  i = i + 2
end
local envs = {}
local nenvs = tonumber(ARGV[i]); i = i + 1
for k = 1, nenvs do
  envs[k] = redis.call('INCR', P .. 'next_env')
  redis.call('SET', P .. 'env:' .. envs[k], ARGV[i]); i = i + 1
end
local count = tonumber(ARGV[i]); i = i + 1
local last = redis.call('INCRBY', P .. 'next_id', count)
local ids = {}
local groups = {}  -- a new group's tag (negative) -> its first id
for k = 1, count do
  local id = last - count + k
  local key = jk(id)
  local nf = tonumber(ARGV[i]); i = i + 1
  redis.call('HSET', key, 'id', id)
  for f = 1, nf do
    redis.call('HSET', key, ARGV[i], ARGV[i + 1])
    i = i + 2
  end
  -- A new group is named by the first job stored with its tag.
  local group = tonumber(redis.call('HGET', key, 'group') or '0')
  if group < 0 then
    groups[group] = groups[group] or id
    redis.call('HSET', key, 'group', groups[group])
  end
  local h = redis.call('HMGET', key, 'state', 'user', 'submit_key', 'env_ref', 'stored_bytes')
  if h[4] then
    local ref = envs[tonumber(h[4])]
    redis.call('HSET', key, 'env_ref', ref)
    redis.call('HINCRBY', P .. 'env_refs', ref, 1)
  end
  redis.call('HINCRBY', P .. 'bytes', h[2], tonumber(h[5] or '0'))
  redis.call('ZADD', P .. 'jobs', id, id)
  redis.call('ZADD', sk(h[1]), id, id)
  if h[3] and h[3] ~= '' then
    redis.call('RPUSH', P .. 'submit:' .. #h[2] .. ':' .. h[2] .. h[3], id)
  end
  ids[#ids + 1] = id
end
-- The ids let the leader read just the new jobs; a huge batch says only that there are some.
if #ids <= 1000 then event('submit ' .. table.concat(ids, ' ')) else event('submit') end
return {'ok', ids}
)lua";

// ARGV: with_attempts, with_env, ids...
constexpr char kReadJobs[] = R"lua(
local out = {}
for k = 3, #ARGV do out[#out + 1] = read_job(ARGV[k], ARGV[1], ARGV[2]) end
return {'ok', out}
)lua";

// ARGV: after_id, limit, user, with_attempts, with_env, states... (none: every state)
constexpr char kList[] = R"lua(
local limit, user, group = tonumber(ARGV[2]), ARGV[3], ARGV[6]
local sets = {}
for k = 7, #ARGV do sets[#sets + 1] = sk(ARGV[k]) end
if #sets == 0 then sets = {P .. 'jobs'} end
local ids = {}
for _, s in ipairs(sets) do
  local r
  if limit > 0 and user == '' and group == '0' then
    r = redis.call('ZRANGEBYSCORE', s, '(' .. ARGV[1], '+inf', 'LIMIT', 0, limit)
  else
    r = redis.call('ZRANGEBYSCORE', s, '(' .. ARGV[1], '+inf')
  end
  for _, id in ipairs(r) do ids[#ids + 1] = tonumber(id) end
end
table.sort(ids)
local out = {}
for _, id in ipairs(ids) do
  if limit > 0 and #out >= limit then break end
  if (user == '' or redis.call('HGET', jk(id), 'user') == user) and
     (group == '0' or redis.call('HGET', jk(id), 'group') == group) then
    out[#out + 1] = read_job(id, ARGV[4], ARGV[5])
  end
end
return {'ok', out}
)lua";

// ARGV: fence, id, expected attempt, from states, expected text, node, gpu_indices,
// gpu_uuids, reserved_bytes, cpus, run_dir, log_path, started_at, master_port, part_nodes
// (a gang's, comma-separated; '' for one node), parts (JSON), master_addr
constexpr char kStart[] = R"lua(
local err = fenced(ARGV[1])
if err then return err end
local id = ARGV[2]
err = cas(id, set_of(ARGV[4]), ARGV[3], ARGV[5])
if err then return err end
local n = tonumber(ARGV[3]) + 1
move(id, redis.call('HGET', jk(id), 'state'), 'starting')
redis.call('HSET', jk(id), 'attempt', n, 'reason', '')
redis.call('DEL', ak(id, n))
redis.call('HSET', ak(id, n), 'n', n, 'state', 'starting', 'node', ARGV[6],
           'gpu_indices', ARGV[7], 'gpu_uuids', ARGV[8], 'reserved_bytes', ARGV[9],
           'cpus', ARGV[10], 'run_dir', ARGV[11], 'log_path', ARGV[12],
           'started_at', ARGV[13], 'master_port', ARGV[14], 'pid', 0,
           'pid_start_ticks', 0, 'oom', 0, 'peak_mem_bytes', 0, 'end_reason', '',
           'part_nodes', ARGV[15], 'parts', ARGV[16], 'master_addr', ARGV[17])
for _, node in ipairs(nodes_of(ak(id, n))) do
  redis.call('ZADD', P .. 'active:' .. node, id, id)
  event('placed ' .. node)
end
return {'ok'}
)lua";

// ARGV: fence, id, attempt, the part nodes it has (comma-separated), the part nodes and
// parts (JSON) it gets, the added part's node. An elastic gang grows by a part that joins it.
constexpr char kAddPart[] = R"lua(
local err = fenced(ARGV[1])
if err then return err end
local id, n = ARGV[2], ARGV[3]
err = cas(id, set_of('starting,running'), n, 'starting or running with attempt ' .. n)
if err then return err end
local a = ak(id, n)
-- A part that has ended (its gang is finishing), a cancel or a stop under way: no new part.
if redis.call('EXISTS', a .. ':done') == 1 or redis.call('HEXISTS', a, 'cancel') == 1 or
   redis.call('HEXISTS', a, 'stop') == 1 then
  return {'conflict', 'job ' .. id .. ' attempt ' .. n .. ' is ending or being stopped'}
end
local had = redis.call('HGET', a, 'part_nodes') or ''
if had ~= ARGV[4] then
  return {'conflict', 'job ' .. id .. ' attempt ' .. n .. ' runs on "' .. had .. '", not "' ..
          ARGV[4] .. '"'}
end
redis.call('HSET', a, 'part_nodes', ARGV[5], 'parts', ARGV[6])
redis.call('ZADD', P .. 'active:' .. ARGV[7], id, id)
event('placed ' .. ARGV[7])
return {'ok'}
)lua";

// ARGV: id, attempt, from states, expected text, pid, pid_start_ticks
constexpr char kRun[] = R"lua(
local id, n = ARGV[1], ARGV[2]
local err = cas(id, set_of(ARGV[3]), n, ARGV[4])
if err then return err end
if redis.call('EXISTS', ak(id, n)) == 0 then
  return {'internal', 'job ' .. id .. ' lacks its attempt'}
end
move(id, redis.call('HGET', jk(id), 'state'), 'running')
redis.call('HSET', ak(id, n), 'state', 'running', 'pid', ARGV[5], 'pid_start_ticks', ARGV[6])
return {'ok'}
)lua";

// ARGV: id, attempt, from states, expected text, job state, job reason, not_before,
// ended_at, attempt state, exit_code ('' none), signal ('' none), oom, end reason, part
// (-1: not a gang), parts, a node to add to the job's nodes_excluded (encoded as a list of
// one; '' none), log bytes. A gang's part that succeeded is only noted until all have.
constexpr char kFinish[] = R"lua(
local id, n = ARGV[1], ARGV[2]
local a = ak(id, n)
-- The attempt of a node judged lost that reports its end while the job still waits out
-- lost_node_wait for it (MarkNodeLost): the node was only frozen, and its end is the real one.
local cur = redis.call('HMGET', jk(id), 'state', 'attempt', 'not_before', 'node_failures')
local late = cur[1] == 'queued' and cur[2] == n and redis.call('HGET', a, 'lost') == '1' and
             tonumber(cur[3] or '0') > now_ms() and tonumber(ARGV[15]) <= 1
if late then
  redis.call('HDEL', a, 'lost')
  redis.call('HSET', jk(id), 'node_failures', math.max(0, tonumber(cur[4] or '1') - 1))
else
  local err = cas(id, set_of(ARGV[3]), n, ARGV[4])
  if err then return err end
end
if redis.call('EXISTS', a) == 0 then
  return {'internal', 'job ' .. id .. ' lacks its attempt'}
end
-- What this node's log of the attempt came to: counted for the user (Footprint).
if tonumber(ARGV[17]) > 0 then
  redis.call('HINCRBY', a, 'log_bytes', ARGV[17])
  redis.call('HINCRBY', P .. 'bytes', redis.call('HGET', jk(id), 'user'), ARGV[17])
end
local parts = tonumber(ARGV[15])
-- A gang's part counts the parts stored now: an elastic gang may have grown since it started.
if tonumber(ARGV[14]) >= 0 then parts = #nodes_of(a) end
if parts > 1 and ARGV[9] == 'succeeded' then
  redis.call('SADD', a .. ':done', ARGV[14])
  if redis.call('SCARD', a .. ':done') < parts then return {'ok'} end
end
redis.call('DEL', a .. ':done')
if ARGV[16] ~= '' then  -- length-prefixed lists concatenate
  redis.call('HSET', jk(id), 'nodes_excluded', (redis.call('HGET', jk(id), 'nodes_excluded') or '') .. ARGV[16])
end
move(id, redis.call('HGET', jk(id), 'state'), ARGV[5])
redis.call('HSET', jk(id), 'reason', ARGV[6], 'not_before', ARGV[7])
if ARGV[5] == 'queued' then redis.call('HSET', jk(id), 'queued_at', ARGV[8]) end
redis.call('HSET', a, 'state', ARGV[9], 'ended_at', ARGV[8], 'oom', ARGV[12],
           'end_reason', ARGV[13])
if ARGV[10] ~= '' then redis.call('HSET', a, 'exit_code', ARGV[10]) end
if ARGV[11] ~= '' then redis.call('HSET', a, 'signal', ARGV[11]) end
for _, node in ipairs(nodes_of(a)) do redis.call('ZREM', P .. 'active:' .. node, id) end
event('end ' .. id)
return {'ok'}
)lua";

// ARGV: id, attempt, bytes. Compared as decimal text: Lua numbers lose 64-bit values.
constexpr char kPeak[] = R"lua(
local a = ak(ARGV[1], ARGV[2])
local cur = redis.call('HGET', a, 'peak_mem_bytes')
if not cur then
  return {'notfound', 'job ' .. ARGV[1] .. ' has no attempt ' .. ARGV[2]}
end
local new = ARGV[3]
if #new > #cur or (#new == #cur and new > cur) then
  redis.call('HSET', a, 'peak_mem_bytes', new)
end
return {'ok'}
)lua";

// ARGV: id, attempt, then the four usage fields' deltas as decimal text (HINCRBY: 64-bit).
constexpr char kUsage[] = R"lua(
local a = ak(ARGV[1], ARGV[2])
if redis.call('EXISTS', a) == 0 then
  return {'notfound', 'job ' .. ARGV[1] .. ' has no attempt ' .. ARGV[2]}
end
redis.call('HINCRBY', a, 'held_gpu_ms', ARGV[3])
redis.call('HINCRBY', a, 'util_known_ms', ARGV[4])
redis.call('HINCRBY', a, 'busy_gpu_ms', ARGV[5])
redis.call('HINCRBY', a, 'mem_byte_s', ARGV[6])
return {'ok'}
)lua";

// ARGV: id, from states, expected text, reason
constexpr char kCancelWaiting[] = R"lua(
local id = ARGV[1]
local err = cas(id, set_of(ARGV[2]), nil, ARGV[3])
if err then return err end
move(id, redis.call('HGET', jk(id), 'state'), 'cancelled')
redis.call('HSET', jk(id), 'reason', ARGV[4])
event('end ' .. id)
return {'ok'}
)lua";

// ARGV: id, from states, expected text, reason, now
constexpr char kRequeue[] = R"lua(
local id = ARGV[1]
local err = cas(id, set_of(ARGV[2]), nil, ARGV[3])
if err then return err end
move(id, redis.call('HGET', jk(id), 'state'), 'queued')
redis.call('HSET', jk(id), 'reason', ARGV[4], 'not_before', 0, 'queued_at', ARGV[5])
event('requeue ' .. id)
return {'ok'}
)lua";

// ARGV: id, from, to, reason, now
constexpr char kMoveWaiting[] = R"lua(
local id, from, to = ARGV[1], ARGV[2], ARGV[3]
local err = cas(id, {[from] = true}, nil, from)
if err then return err end
move(id, from, to)
redis.call('HSET', jk(id), 'reason', ARGV[4])
if to == 'queued' then
  redis.call('HSET', jk(id), 'queued_at', ARGV[5])
  event('requeue ' .. id)
elseif to == 'cancelled' then
  event('end ' .. id)
end
return {'ok'}
)lua";

// ARGV: id, running ('1': a starting or running job), not_before, reason, then
// (field, value)... as ChangeableFields lists them for that state; an empty value removes the
// field (it then reads back as its default).
constexpr char kUpdateJob[] = R"lua(
local id, running = ARGV[1], ARGV[2] == '1'
local states = running and {starting = true, running = true} or {queued = true, blocked = true}
local err = cas(id, states, nil, running and 'starting or running' or 'queued or blocked')
if err then return err end
for k = 5, #ARGV, 2 do
  local f, v = ARGV[k], ARGV[k + 1]
  if v == '' then
    redis.call('HDEL', jk(id), f)
  else
    redis.call('HSET', jk(id), f, v)
  end
end
if not running then
  redis.call('HSET', jk(id), 'not_before', ARGV[3], 'reason', ARGV[4])
  event('requeue ' .. id)
end
return {'ok'}
)lua";

// ARGV: fence, (id, reason)...
constexpr char kSetReasons[] = R"lua(
local err = fenced(ARGV[1])
if err then return err end
for k = 2, #ARGV, 2 do
  local state = redis.call('HGET', jk(ARGV[k]), 'state')
  if state == 'queued' or state == 'blocked' then
    redis.call('HSET', jk(ARGV[k]), 'reason', ARGV[k + 1])
  end
end
return {'ok'}
)lua";

// ARGV: name, hash, role, user, created_at, expires_at, revoked_at, created_by, signature
constexpr char kAddToken[] = R"lua(
local name, hash = ARGV[1], ARGV[2]
if redis.call('HEXISTS', P .. 'token_names', name) == 1 then
  return {'conflict', "a token named '" .. name .. "' exists; revoke it first ('trainq token revoke " ..
          name .. "') or choose another name"}
end
if redis.call('EXISTS', P .. 'token:' .. hash) == 1 then
  return {'conflict', 'a token with this hash exists'}
end
redis.call('HSET', P .. 'token:' .. hash, 'name', name, 'hash', hash, 'role', ARGV[3],
           'user', ARGV[4], 'created_at', ARGV[5], 'expires_at', ARGV[6],
           'revoked_at', ARGV[7], 'created_by', ARGV[8], 'signature', ARGV[9])
if ARGV[7] == '0' then redis.call('HSET', P .. 'token_names', name, hash) end
redis.call('RPUSH', P .. 'tokens', hash)
return {'ok'}
)lua";

// ARGV: name, now
constexpr char kRevokeToken[] = R"lua(
local hash = redis.call('HGET', P .. 'token_names', ARGV[1])
if not hash then
  return {'notfound', "no token named '" .. ARGV[1] ..
          "' (or it is already revoked); 'trainq token ls' lists them"}
end
redis.call('HSET', P .. 'token:' .. hash, 'revoked_at', ARGV[2])
redis.call('HDEL', P .. 'token_names', ARGV[1])
return {'ok'}
)lua";

// ARGV: name, address, api_url, runs_dir, master_port_first, master_port_last, info,
// version
constexpr char kHeartbeat[] = R"lua(
local name = ARGV[1]
local nk = P .. 'node:' .. name
local t = now_ms()
local old = redis.call('HMGET', nk, 'info', 'lost', 'joined_at')
local new = not old[3]
local joined = new or old[2] == '1'
redis.call('HSET', nk, 'name', name, 'address', ARGV[2], 'api_url', ARGV[3],
           'runs_dir', ARGV[4], 'master_port_first', ARGV[5], 'master_port_last', ARGV[6],
           'info', ARGV[7], 'version', ARGV[8], 'heartbeat_at', t)
if joined then redis.call('HSET', nk, 'lost', 0, 'joined_at', t) end
if new then redis.call('HSET', nk, 'drained', 0) end
redis.call('SADD', P .. 'nodes', name)
if joined or old[1] ~= ARGV[7] then event('node ' .. name) end
return {'ok', t}
)lua";

// ARGV: name, drained (0 or 1)
constexpr char kSetDrained[] = R"lua(
local nk = P .. 'node:' .. ARGV[1]
if redis.call('EXISTS', nk) == 0 then return {'notfound', 'no node ' .. ARGV[1]} end
redis.call('HSET', nk, 'drained', ARGV[2])
event('node ' .. ARGV[1])
return {'ok'}
)lua";

// ARGV: name
constexpr char kRemoveNode[] = R"lua(
local name = ARGV[1]
local nk = P .. 'node:' .. name
if redis.call('EXISTS', nk) == 0 then return {'notfound', 'no node ' .. name} end
if redis.call('HGET', nk, 'lost') ~= '1' then
  return {'conflict', 'node ' .. name .. ' is up; only a lost node can be removed: stop its ' ..
          'daemon, and remove it once trainq nodes says lost'}
end
if redis.call('ZCARD', P .. 'active:' .. name) > 0 then
  return {'conflict', 'node ' .. name .. ' still has jobs running there; cancel them, or ' ..
          'wait for them to be queued again'}
end
redis.call('DEL', nk)
redis.call('SREM', P .. 'nodes', name)
event('node ' .. name)
return {'ok'}
)lua";

// ARGV: node, lease_ms. Returns {'ok', holder, epoch, mine (0/1), now}.
constexpr char kAcquireLeader[] = R"lua(
local key = P .. 'leader'
local t = now_ms()
local holder = redis.call('GET', key)
if holder then
  local name, epoch = string.match(holder, '^(.*) (%d+)$')
  if name == ARGV[1] then
    redis.call('SET', key, holder, 'XX', 'PX', ARGV[2])
    return {'ok', name, epoch, 1, t}
  end
  return {'ok', name or holder, epoch or '0', 0, t}
end
local epoch = redis.call('INCR', P .. 'epoch')
redis.call('SET', key, ARGV[1] .. ' ' .. epoch, 'NX', 'PX', ARGV[2])
event('leader ' .. ARGV[1])
return {'ok', ARGV[1], tostring(epoch), 1, t}
)lua";

// ARGV: node, epoch
constexpr char kResignLeader[] = R"lua(
if redis.call('GET', P .. 'leader') == ARGV[1] .. ' ' .. ARGV[2] then
  redis.call('DEL', P .. 'leader')
  event('leader ')
end
return {'ok'}
)lua";

// ARGV: fence, node, lapsed_before, max_node_failures, wait_ms. Returns {'ok', {ended job ids}}.
constexpr char kMarkNodeLost[] = R"lua(
local err = fenced(ARGV[1])
if err then return err end
local name = ARGV[2]
local nk = P .. 'node:' .. name
local beat = redis.call('HGET', nk, 'heartbeat_at')
if not beat then return {'notfound', 'no node ' .. name} end
if tonumber(beat) >= tonumber(ARGV[3]) then return {'ok', {}} end
redis.call('HSET', nk, 'lost', 1)
local t = now_ms()
local max = tonumber(ARGV[4])
local wait = tonumber(ARGV[5])
local lost = 'node ' .. name .. ' lost'
local active = P .. 'active:' .. name
local ended = {}
for _, id in ipairs(redis.call('ZRANGE', active, 0, -1)) do
  local j = redis.call('HMGET', jk(id), 'state', 'attempt', 'node_failures')
  local a = ak(id, j[2] or '0')
  local here = false
  for _, node in ipairs(nodes_of(a)) do here = here or node == name end
  if (j[1] == 'starting' or j[1] == 'running') and here then
    local k = tonumber(j[3] or '0') + 1
    -- A gang's other parts lose the attempt too: their nodes stop them.
    for _, node in ipairs(nodes_of(a)) do
      if node ~= name then redis.call('ZREM', P .. 'active:' .. node, id) end
    end
    redis.call('DEL', a .. ':done')
    redis.call('HSET', a, 'state', 'failed', 'ended_at', t, 'end_reason', lost)
    if k <= max then
      move(id, j[1], 'queued')
      -- One node's attempt waits `wait` for the node's own report of its end (kFinish).
      local waits = wait > 0 and #nodes_of(a) == 1
      if waits then redis.call('HSET', a, 'lost', 1) end
      redis.call('HSET', jk(id), 'node_failures', k, 'queued_at', t,
                 'not_before', waits and (t + wait) or 0,
                 'reason', lost .. '; queued again (node failure ' .. k .. ' of ' .. max .. ')' ..
                 (waits and ('; runs elsewhere in ' .. math.floor(wait / 1000) ..
                             ' s unless ' .. name .. ' reports how it ended') or ''))
    else
      move(id, j[1], 'failed')
      redis.call('HSET', jk(id), 'node_failures', k, 'reason',
                 lost .. '; ' .. k .. ' node failures, max_node_failures = ' .. max)
    end
    ended[#ended + 1] = tonumber(id)
    event('end ' .. id)
  end
end
redis.call('DEL', active)
event('node ' .. name)
return {'ok', ended}
)lua";

// ARGV: (id, accounting row or '')... Forgets those that ended, keeping each one's row in the
// acct hash; returns {'ok', {ids forgotten}}.
constexpr char kForget[] = R"lua(
local done = {succeeded = true, failed = true, cancelled = true}
local gone = {}
for k = 1, #ARGV, 2 do
  local id = ARGV[k]
  local h = redis.call('HMGET', jk(id), 'state', 'user', 'attempt', 'stored_bytes', 'env_ref',
                       'submit_key')
  if h[1] and done[h[1]] then
    local bytes = tonumber(h[4] or '0')
    for n = 1, tonumber(h[3] or '0') do
      bytes = bytes + tonumber(redis.call('HGET', ak(id, n), 'log_bytes') or '0')
      redis.call('DEL', ak(id, n), ak(id, n) .. ':done')
    end
    if bytes > 0 then redis.call('HINCRBY', P .. 'bytes', h[2], -bytes) end
    if h[5] and redis.call('HINCRBY', P .. 'env_refs', h[5], -1) <= 0 then
      redis.call('HDEL', P .. 'env_refs', h[5])
      redis.call('DEL', P .. 'env:' .. h[5])
    end
    if h[6] and h[6] ~= '' then
      redis.call('LREM', P .. 'submit:' .. #h[2] .. ':' .. h[2] .. h[6], 0, id)
    end
    redis.call('ZREM', P .. 'jobs', id)
    redis.call('ZREM', sk(h[1]), id)
    redis.call('DEL', jk(id))
    if ARGV[k + 1] ~= '' then redis.call('HSET', P .. 'acct', id, ARGV[k + 1]) end
    gone[#gone + 1] = tonumber(id)
  end
end
return {'ok', gone}
)lua";

// ARGV: user. Returns {'ok', waiting jobs, stored bytes}: the waiting are counted over the
// queued and blocked sets, which the waiting-jobs cap keeps bounded.
constexpr char kFootprint[] = R"lua(
local user = ARGV[1]
local waiting = 0
for _, state in ipairs({'queued', 'blocked'}) do
  for _, id in ipairs(redis.call('ZRANGE', sk(state), 0, -1)) do
    if redis.call('HGET', jk(id), 'user') == user then waiting = waiting + 1 end
  end
end
return {'ok', waiting, tonumber(redis.call('HGET', P .. 'bytes', user) or '0')}
)lua";

// ARGV: id, attempt, stop, by
constexpr char kRequestCancel[] = R"lua(
local id, n = ARGV[1], ARGV[2]
local err = cas(id, {starting = true, running = true}, n,
                'starting or running with attempt ' .. n)
if err then return err end
local a = ak(id, n)
-- ARGV[3]: a warned stop (a preemption) rather than a cancel; else ARGV[4]: who cancels.
if ARGV[3] and ARGV[3] ~= '' then
  redis.call('HSET', a, 'stop', ARGV[3])
else
  local by = ARGV[4] or ''
  redis.call('HSET', a, 'cancel', by == '' and '1' or by)
end
-- Every part's node: a gang's parts stop together, each after the job's warning.
for _, node in ipairs(nodes_of(a)) do event('cancel ' .. node .. ' ' .. id) end
return {'ok'}
)lua";

LuaScript Make(std::string_view name, const char* body, bool reads = false) {
  return LuaScript{name, std::string(kPrelude) + (reads ? kReadPrelude : "") + body};
}

}  // namespace

#define TRAINQ_SCRIPT(fn, name, ...)                         \
  const LuaScript& fn() {                                    \
    static const LuaScript script = Make(name, __VA_ARGS__); \
    return script;                                           \
  }

TRAINQ_SCRIPT(SubmitScript, "submit", kSubmit)
TRAINQ_SCRIPT(ReadJobsScript, "read_jobs", kReadJobs, true)
TRAINQ_SCRIPT(ListScript, "list", kList, true)
TRAINQ_SCRIPT(StartScript, "start", kStart)
TRAINQ_SCRIPT(AddPartScript, "add_part", kAddPart)
TRAINQ_SCRIPT(RunScript, "run", kRun)
TRAINQ_SCRIPT(FinishScript, "finish", kFinish)
TRAINQ_SCRIPT(PeakScript, "peak", kPeak)
TRAINQ_SCRIPT(UsageScript, "usage", kUsage)
TRAINQ_SCRIPT(CancelWaitingScript, "cancel_waiting", kCancelWaiting)
TRAINQ_SCRIPT(RequeueScript, "requeue", kRequeue)
TRAINQ_SCRIPT(MoveWaitingScript, "move_waiting", kMoveWaiting)
TRAINQ_SCRIPT(UpdateJobScript, "update_job", kUpdateJob)
TRAINQ_SCRIPT(SetReasonsScript, "set_reasons", kSetReasons)
TRAINQ_SCRIPT(AddTokenScript, "add_token", kAddToken)
TRAINQ_SCRIPT(RevokeTokenScript, "revoke_token", kRevokeToken)
TRAINQ_SCRIPT(HeartbeatScript, "heartbeat", kHeartbeat)
TRAINQ_SCRIPT(SetDrainedScript, "set_drained", kSetDrained)
TRAINQ_SCRIPT(RemoveNodeScript, "remove_node", kRemoveNode)
TRAINQ_SCRIPT(AcquireLeaderScript, "acquire_leader", kAcquireLeader)
TRAINQ_SCRIPT(ResignLeaderScript, "resign_leader", kResignLeader)
TRAINQ_SCRIPT(MarkNodeLostScript, "mark_node_lost", kMarkNodeLost)
TRAINQ_SCRIPT(RequestCancelScript, "request_cancel", kRequestCancel)
TRAINQ_SCRIPT(ForgetScript, "forget", kForget)
TRAINQ_SCRIPT(FootprintScript, "footprint", kFootprint)

#undef TRAINQ_SCRIPT

std::vector<const LuaScript*> AllScripts() {
  return {
      &SubmitScript(),        &ReadJobsScript(),     &ListScript(),         &StartScript(),
      &RunScript(),           &FinishScript(),       &PeakScript(),         &CancelWaitingScript(),
      &RequeueScript(),       &MoveWaitingScript(),  &SetReasonsScript(),   &AddTokenScript(),
      &RevokeTokenScript(),   &HeartbeatScript(),    &SetDrainedScript(),   &RemoveNodeScript(),
      &AcquireLeaderScript(), &ResignLeaderScript(), &MarkNodeLostScript(), &RequestCancelScript(),
      &ForgetScript(),        &FootprintScript(),    &UsageScript(),        &AddPartScript()};
}

}  // namespace trainq::redis
