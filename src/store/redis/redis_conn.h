// One synchronous connection to Redis (hiredis 0.14, RESP2), with every command bounded by
// the target's timeout. Only the Redis store's sources include this header: hiredis stays
// out of everything else.
#pragma once

#include <hiredis/hiredis.h>

#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "src/store/cluster.h"

namespace trainq::redis {

struct ReplyFree {
  void operator()(redisReply* reply) const { freeReplyObject(reply); }
};
using Reply = std::unique_ptr<redisReply, ReplyFree>;

struct ContextFree {
  void operator()(redisContext* c) const { redisFree(c); }
};
using Context = std::unique_ptr<redisContext, ContextFree>;

// A Lua script: its source and the name errors use.
struct LuaScript {
  std::string_view name;
  std::string source;
};

// The element's bytes ("" for nil or a non-string).
std::string_view Text(const redisReply* reply);

// Thread: one thread at a time.
class Connection {
 public:
  explicit Connection(RedisTarget target) : target_(std::move(target)) {}

  // Connects, authenticates and selects the database. kUnavailable naming host:port when
  // Redis cannot be reached, kUnauthenticated when it refuses the credentials.
  Status Connect();
  // Sends one command (argv is binary-safe) and reads its reply; connects first when there
  // is no connection. A lost connection is dropped (the next call reconnects) and reported
  // kUnavailable "store unreachable: redis HOST:PORT: ..."; an error reply becomes a Status.
  Result<Reply> Command(std::span<const std::string> argv);
  // EVALSHA of `script` with the prefix as its one key and `args` as ARGV, loading it
  // (again: a restarted Redis forgets its scripts) on NOSCRIPT.
  Result<Reply> Eval(const LuaScript& script, std::span<const std::string> args);
  Status Load(const LuaScript& script);

  const RedisTarget& target() const { return target_; }
  // "redis HOST:PORT"
  std::string Where() const;
  redisContext* context() { return ctx_.get(); }

 private:
  Result<Reply> Send(std::span<const std::string> argv);
  Status Lost(const char* what);

  RedisTarget target_;
  Context ctx_;
  std::map<std::string_view, std::string> shas_;  // script name -> SHA1
};

// The Status an error reply stands for: kUnauthenticated for refused credentials or
// permissions, kUnavailable while Redis loads or is read-only, kInternal otherwise.
Status ErrorReplyStatus(std::string_view where, std::string_view error);

}  // namespace trainq::redis
