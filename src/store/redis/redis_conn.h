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

  // Connects, authenticates and selects the database. With sentinels (redis+sentinel://)
  // it first asks them in turn where the master is and takes the server they name only
  // once it answers ROLE as a master; the whole search is bounded by the target's timeout.
  // kUnavailable "store unreachable: ..." when no server can be reached (with sentinels:
  // none named a master that answers as one, each reason listed), kUnauthenticated when a
  // server or a sentinel refuses the credentials.
  Status Connect();
  // Sends one command (argv is binary-safe) and reads its reply; connects first when there
  // is no connection, or when the server closed this one while it was idle (a killed or
  // demoted master, a timeout), so that the command goes to the server that serves now. A
  // connection lost during the command is dropped (the next call reconnects) and reported
  // kUnavailable "store unreachable: redis HOST:PORT: ..."; so is a READONLY reply (a master
  // demoted to a replica under it). Any other error reply becomes a Status.
  Result<Reply> Command(std::span<const std::string> argv);
  // EVALSHA of `script` with the prefix as its one key and `args` as ARGV, loading it
  // (again: a restarted Redis, or a replica promoted by a failover, lacks its scripts) on
  // NOSCRIPT.
  Result<Reply> Eval(const LuaScript& script, std::span<const std::string> args);
  Status Load(const LuaScript& script);
  // After a write on this connection: WAIT until target().min_replicas_acked replicas hold
  // it, at most target().wait_ms. Ok at once when that is 0. kUnavailable "store: the write
  // reached N of M replicas in T ms ..." when fewer did (the write stays on the master, which
  // a failover could lose), or "store unreachable" when the connection is gone.
  Status WaitForReplicas();

  const RedisTarget& target() const { return target_; }
  // "redis HOST:PORT" of the server connected, or last tried; "redis master NAME" before a
  // sentinel named one.
  std::string Where() const;
  redisContext* context() { return ctx_.get(); }

 private:
  Result<Reply> Send(std::span<const std::string> argv);
  Status Lost(const char* what);
  // Connects to `server` (within `timeout_ms`), authenticates and selects the database.
  Status Open(const RedisAddress& server, int timeout_ms);
  Status ConnectViaSentinels();
  Status CheckMaster();
  bool ClosedWhileIdle() const;

  RedisTarget target_;
  RedisAddress server_;       // connected, or last tried
  size_t next_sentinel_ = 0;  // the one that answered last is asked first
  Context ctx_;
  std::map<std::string_view, std::string> shas_;  // script name -> SHA1
};

// One command on `c`, a connection of no Connection (a sentinel's): the reply, an error
// reply as a Status, kUnavailable "store unreachable: WHERE: ..." when no reply came.
Result<Reply> SendOn(redisContext* c, std::span<const std::string> argv, std::string_view where);
// A connection to `server` whose connect and commands are bounded by `timeout_ms`;
// kUnavailable "store unreachable: WHERE: ..." when it cannot be made.
Result<Context> Dial(const RedisAddress& server, int timeout_ms, std::string_view where);
// Asks the sentinel at `sentinel` where the master `target.master_name` is (AUTH first with
// target's user and sentinel_password when that is set). kUnavailable when it cannot be
// reached or knows no such master, kUnauthenticated when it refuses the credentials.
Result<RedisAddress> AskSentinel(const RedisTarget& target, const RedisAddress& sentinel,
                                 int timeout_ms);

// The Status an error reply stands for: kUnauthenticated for refused credentials or
// permissions, kUnavailable while Redis loads or is read-only, kInternal otherwise.
Status ErrorReplyStatus(std::string_view where, std::string_view error);

}  // namespace trainq::redis
