// What the Redis store checks of its server when it opens (docs/cluster.md, "Durability"):
// that a restart from the append-only file would replay every trainq write.
//
// Redis 7 writes each script's effects to the AOF inside MULTI/EXEC, and before the fix of
// redis/redis#14541 (valkey-io/valkey#3983 in Valkey) its loader replays them as the
// default user and re-checks that user's ACL at EXEC: with the default user switched off
// and stripped of commands, every trainq write is dropped at the next restart, silently but
// for one log line per write. The default user must therefore be allowed MULTI, EXEC and the
// write commands the scripts make, on the prefix's keys; `off` still keeps every client from
// logging in as it.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "src/store/redis/redis_conn.h"

namespace trainq::redis {

// Facts from INFO's "server" and "persistence" sections.
struct ServerFacts {
  std::string product = "Redis";  // "Valkey" where the server says so
  std::string version;            // "7.0.15"; "" when INFO gave none
  int major = 0;                  // 0 when unknown
  bool aof = false;               // appendonly yes
};
ServerFacts ParseServerInfo(std::string_view info);

// The commands a transaction of the scripts' effects may hold, as `ACL DRYRUN default`
// arguments on a key under `prefix`: MULTI, EXEC and every write command the scripts call,
// and UNLINK, with which Redis deletes a key a script finds expired (lazyfree-lazy-expire):
// 7.0 writes that before the transaction, but nothing promises every version does.
std::vector<std::vector<std::string>> AofReplayProbes(const std::string& prefix);

// The default user's line of docs/cluster.md ("Redis ACL") for `prefix`, without the
// leading "user ".
std::string DefaultUserAcl(const std::string& prefix);

// Asks the server, through `conn` (the node's own user, which needs +acl|dryrun), whether
// its default user may run every probe. Ok when the AOF is off or every probe passes.
// kInvalid naming the server's version, the refused command, the cause and the ACL line
// that mends it; kInvalid too when the node's user may not run ACL DRYRUN (the check cannot
// be made: add +acl|dryrun). kUnavailable when Redis cannot be reached.
Status CheckAofReplay(Connection& conn, const ServerFacts& facts);

}  // namespace trainq::redis
