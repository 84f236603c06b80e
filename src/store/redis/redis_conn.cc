#include "src/store/redis/redis_conn.h"

#include <fmt/format.h>

#include <span>
#include <vector>

#include "src/os/system.h"

namespace trainq::redis {

namespace {

timeval Timeval(int ms) { return timeval{ms / 1000, static_cast<suseconds_t>(ms % 1000) * 1000}; }

bool StartsWith(std::string_view text, std::string_view prefix) {
  return text.substr(0, prefix.size()) == prefix;
}

}  // namespace

std::string_view Text(const redisReply* reply) {
  if (reply == nullptr) return {};
  if (reply->type != REDIS_REPLY_STRING && reply->type != REDIS_REPLY_STATUS &&
      reply->type != REDIS_REPLY_ERROR) {
    return {};
  }
  return {reply->str, reply->len};
}

Status ErrorReplyStatus(std::string_view where, std::string_view error) {
  std::string text = fmt::format("{}: {}", where, error);
  if (StartsWith(error, "NOAUTH") || StartsWith(error, "WRONGPASS") ||
      StartsWith(error, "NOPERM")) {
    return Status::Unauthenticated(text);
  }
  if (StartsWith(error, "LOADING") || StartsWith(error, "READONLY") ||
      StartsWith(error, "MASTERDOWN") || StartsWith(error, "BUSY")) {
    return Status::Unavailable("store unreachable: " + text);
  }
  if (StartsWith(error, "OOM")) return Status::NoSpace(text);
  return Status::Internal(text);
}

std::string Connection::Where() const {
  if (server_.host.empty() && !target_.sentinels.empty()) {
    return fmt::format("redis master {}", target_.master_name);
  }
  return fmt::format("redis {}:{}", server_.host, server_.port);
}

Status Connection::Lost(const char* what) {
  std::string message = fmt::format("store unreachable: {}: {}", Where(),
                                    ctx_ && ctx_->errstr[0] ? ctx_->errstr : what);
  ctx_.reset();  // a reply may still be on its way: the next call starts afresh
  return Status::Unavailable(message);
}

Result<Context> Dial(const RedisAddress& server, int timeout_ms, std::string_view where) {
  Context ctx(redisConnectWithTimeout(server.host.c_str(), server.port, Timeval(timeout_ms)));
  if (!ctx) return Status::Unavailable(fmt::format("store unreachable: {}: out of memory", where));
  if (ctx->err || redisSetTimeout(ctx.get(), Timeval(timeout_ms)) != REDIS_OK) {
    return Status::Unavailable(fmt::format("store unreachable: {}: {}", where,
                                           ctx->errstr[0] ? ctx->errstr : "cannot connect"));
  }
  return ctx;
}

Result<Reply> SendOn(redisContext* c, std::span<const std::string> argv, std::string_view where) {
  std::vector<const char*> args;
  std::vector<size_t> lens;
  for (const std::string& a : argv) {
    args.push_back(a.data());
    lens.push_back(a.size());
  }
  void* raw = redisCommandArgv(c, static_cast<int>(args.size()), args.data(), lens.data());
  if (raw == nullptr) {
    return Status::Unavailable(
        fmt::format("store unreachable: {}: {}", where, c->errstr[0] ? c->errstr : "no reply"));
  }
  Reply reply(static_cast<redisReply*>(raw));
  if (reply->type == REDIS_REPLY_ERROR) return ErrorReplyStatus(where, Text(reply.get()));
  return reply;
}

Status Connection::Connect() {
  ctx_.reset();
  if (!target_.sentinels.empty()) return ConnectViaSentinels();
  return Open({target_.host, target_.port}, target_.timeout_ms);
}

Status Connection::Open(const RedisAddress& server, int timeout_ms) {
  ctx_.reset();
  server_ = server;
  Result<Context> ctx = Dial(server, timeout_ms, Where());
  if (!ctx.ok()) return ctx.status();
  ctx_ = std::move(*ctx);
  if (redisSetTimeout(ctx_.get(), Timeval(target_.timeout_ms)) != REDIS_OK) {
    return Lost("cannot set the timeout");
  }
  if (!target_.password.empty()) {
    std::vector<std::string> auth = {"AUTH"};
    if (!target_.user.empty()) auth.push_back(target_.user);
    auth.push_back(target_.password);
    Result<Reply> reply = Send(auth);
    if (!reply.ok()) {
      if (reply.status().code() == Code::kUnavailable) return reply.status();
      ctx_.reset();
      return Status::Unauthenticated(Where() + " refused the credentials (store, " +
                                     "store_password_file): " + reply.status().message());
    }
  }
  if (target_.db != 0) {
    Result<Reply> reply = Send(std::vector<std::string>{"SELECT", std::to_string(target_.db)});
    if (!reply.ok()) {
      ctx_.reset();
      return reply.status();
    }
  }
  return Status::Ok();
}

Result<Reply> Connection::Send(std::span<const std::string> argv) {
  if (!ctx_) return Status::Unavailable("store unreachable: " + Where() + ": not connected");
  Result<Reply> reply = SendOn(ctx_.get(), argv, Where());
  if (!reply.ok() && reply.status().code() == Code::kUnavailable) {
    // No reply (the connection broke) or READONLY (this master was demoted): either way the
    // next command must find the master afresh.
    ctx_.reset();
  }
  return reply;
}

// Redis sends nothing unasked on a connection that is not subscribed, so anything to read
// (or a hang-up) on an idle one means the server closed it.
bool Connection::ClosedWhileIdle() const {
  int fd = ctx_->fd;
  return !WaitReadable(std::span<const int>(&fd, 1), 0).empty();
}

Result<Reply> Connection::Command(std::span<const std::string> argv) {
  if (ctx_ && ClosedWhileIdle()) ctx_.reset();
  if (!ctx_) TRAINQ_RETURN_IF_ERROR(Connect());
  return Send(argv);
}

Status Connection::WaitForReplicas() {
  int want = target_.min_replicas_acked;
  if (want <= 0) return Status::Ok();
  // Send, not Command: WAIT counts this connection's writes, and a fresh one has none.
  Result<Reply> reply =
      Send(std::vector<std::string>{"WAIT", std::to_string(want), std::to_string(target_.wait_ms)});
  if (!reply.ok()) return reply.status();
  long long got = (*reply)->type == REDIS_REPLY_INTEGER ? (*reply)->integer : 0;
  if (got >= want) return Status::Ok();
  return Status::Unavailable(fmt::format(
      "store: the write reached {} of {} replicas in {} ms (store_min_replicas_acked); it is on "
      "{} alone, which a failover now could lose",
      got, want, target_.wait_ms, Where()));
}

Status Connection::Load(const LuaScript& script) {
  std::vector<std::string> argv = {"SCRIPT", "LOAD", script.source};
  Result<Reply> reply = Command(argv);
  if (!reply.ok()) {
    return Status(reply.status().code(),
                  fmt::format("loading script {}: {}", script.name, reply.status().message()));
  }
  shas_[script.name] = std::string(Text(reply->get()));
  return Status::Ok();
}

Result<Reply> Connection::Eval(const LuaScript& script, std::span<const std::string> args) {
  if (!shas_.contains(script.name)) TRAINQ_RETURN_IF_ERROR(Load(script));
  std::vector<std::string> argv = {"EVALSHA", shas_[script.name], "1", target_.prefix};
  argv.insert(argv.end(), args.begin(), args.end());
  Result<Reply> reply = Command(argv);
  if (reply.ok() || reply.status().message().find("NOSCRIPT") == std::string::npos) return reply;
  TRAINQ_RETURN_IF_ERROR(Load(script));
  argv[1] = shas_[script.name];
  return Command(argv);
}

}  // namespace trainq::redis
