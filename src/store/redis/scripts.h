// The Lua scripts of the Redis store (docs/cluster.md, "The Redis store"): every write is
// one script, so each compare-and-set on a job's (state, attempt) and the writes and the
// event that follow it happen at once. Each script takes the key prefix as KEYS[1] and
// returns an array whose first element is "ok" or a refusal ("conflict", "notfound",
// "invalid", "retry") followed by its message.
#pragma once

#include "src/store/redis/redis_conn.h"

namespace trainq::redis {

const LuaScript& SubmitScript();
const LuaScript& ReadJobsScript();
const LuaScript& ListScript();
const LuaScript& StartScript();
const LuaScript& AddPartScript();
const LuaScript& RunScript();
const LuaScript& FinishScript();
const LuaScript& PeakScript();
const LuaScript& UsageScript();
const LuaScript& CancelWaitingScript();
const LuaScript& RequeueScript();
const LuaScript& MoveWaitingScript();
const LuaScript& UpdateJobScript();
const LuaScript& SetReasonsScript();
const LuaScript& AddTokenScript();
const LuaScript& RevokeTokenScript();
const LuaScript& HeartbeatScript();
const LuaScript& SetDrainedScript();
const LuaScript& RemoveNodeScript();
const LuaScript& AcquireLeaderScript();
const LuaScript& ResignLeaderScript();
const LuaScript& MarkNodeLostScript();
const LuaScript& RequestCancelScript();
const LuaScript& ForgetScript();
const LuaScript& FootprintScript();

// Every script, for loading them all when the store opens.
std::vector<const LuaScript*> AllScripts();

}  // namespace trainq::redis
