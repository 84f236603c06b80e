// Finding the master through Redis Sentinel (redis+sentinel://, docs/cluster.md "Redis with
// failover"). A sentinel's answer may be stale (it has not yet learned of a failover, or
// names a master that was demoted since), so the server it names is used only once it
// answers ROLE as a master; otherwise the next sentinel is asked.
#include <fmt/format.h>

#include <charconv>
#include <chrono>
#include <optional>
#include <vector>

#include "src/store/redis/redis_conn.h"

namespace trainq::redis {

namespace {

using Clock = std::chrono::steady_clock;

std::string HostPort(const RedisAddress& a) {
  return a.host.find(':') == std::string::npos ? fmt::format("{}:{}", a.host, a.port)
                                               : fmt::format("[{}]:{}", a.host, a.port);
}

// The message without its "store unreachable: " head, to list several under one.
std::string Reason(const Status& st) {
  constexpr std::string_view kHead = "store unreachable: ";
  std::string_view m = st.message();
  if (m.substr(0, kHead.size()) == kHead) m.remove_prefix(kHead.size());
  return std::string(m);
}

bool HasCodeOf(const Status& st, Code code) { return !st.ok() && st.code() == code; }

std::optional<int> PortOf(std::string_view text) {
  int port = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), port);
  if (ec != std::errc() || ptr != text.data() + text.size() || port < 1 || port > 65535) {
    return std::nullopt;
  }
  return port;
}

// SENTINEL get-master-addr-by-name answers [HOST, PORT], or nil for a name it does not know.
Result<RedisAddress> MasterFromReply(const redisReply* r, const RedisTarget& target,
                                     std::string_view where) {
  if (r->type != REDIS_REPLY_ARRAY || r->elements != 2) {
    return Status::Unavailable(
        fmt::format("store unreachable: {} knows no master named {}", where, target.master_name));
  }
  std::optional<int> port = PortOf(Text(r->element[1]));
  if (Text(r->element[0]).empty() || !port) {
    return Status::Unavailable(
        fmt::format("store unreachable: {} gave a bad address for {}", where, target.master_name));
  }
  return RedisAddress{std::string(Text(r->element[0])), *port};
}

}  // namespace

Result<RedisAddress> AskSentinel(const RedisTarget& target, const RedisAddress& sentinel,
                                 int timeout_ms) {
  std::string where = "sentinel " + HostPort(sentinel);
  Result<Context> ctx = Dial(sentinel, timeout_ms, where);
  if (!ctx.ok()) return ctx.status();
  if (!target.sentinel_password.empty()) {
    std::vector<std::string> auth = {"AUTH"};
    if (!target.user.empty()) auth.push_back(target.user);
    auth.push_back(target.sentinel_password);
    Result<Reply> ok = SendOn(ctx->get(), auth, where);
    if (!ok.ok() && ok.status().code() != Code::kUnavailable) {
      return Status::Unauthenticated(
          fmt::format("{} refused the credentials (store's user, store_sentinel_password_file): {}",
                      where, ok.status().message()));
    }
    if (!ok.ok()) return ok.status();
  }
  std::vector<std::string> ask = {"SENTINEL", "get-master-addr-by-name", target.master_name};
  Result<Reply> reply = SendOn(ctx->get(), ask, where);
  if (HasCodeOf(reply.status(), Code::kUnauthenticated)) {
    return Status::Unauthenticated(
        fmt::format("{}; the sentinels' password belongs in "
                    "store_sentinel_password_file",
                    reply.status().message()));
  }
  if (!reply.ok()) return reply.status();
  return MasterFromReply(reply->get(), target, where);
}

Status Connection::CheckMaster() {
  Result<Reply> role = Send(std::vector<std::string>{"ROLE"});
  if (!role.ok()) return role.status();
  const redisReply* r = role->get();
  std::string_view what =
      r->type == REDIS_REPLY_ARRAY && r->elements > 0 ? Text(r->element[0]) : "";
  if (what == "master") return Status::Ok();
  std::string message = fmt::format(
      "store unreachable: {} is a {}, not the master (a sentinel's answer from before a "
      "failover)",
      Where(), what.empty() ? "server of unknown role" : std::string(what));
  ctx_.reset();
  return Status::Unavailable(message);
}

// Each sentinel in turn, from the one that answered last, until one names a server that
// answers as the master; all of it within the target's timeout, so a command made while
// the sentinels still elect a new master fails fast rather than waiting for them.
Status Connection::ConnectViaSentinels() {
  const std::vector<RedisAddress>& sentinels = target_.sentinels;
  Clock::time_point deadline = Clock::now() + std::chrono::milliseconds(target_.timeout_ms);
  auto left = [&] {
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    return static_cast<int>(ms.count());
  };
  std::vector<std::string> reasons;
  for (size_t i = 0; i < sentinels.size() && left() > 0; ++i) {
    size_t k = (next_sentinel_ + i) % sentinels.size();
    Result<RedisAddress> master = AskSentinel(target_, sentinels[k], left());
    Status st = master.status();
    if (st.ok()) {
      st = left() > 0
               ? Open(*master, left())
               : Status::Unavailable("store unreachable: no time left for " + HostPort(*master));
    }
    if (st.ok()) st = CheckMaster();
    if (st.ok()) {
      next_sentinel_ = k;
      return st;
    }
    ctx_.reset();
    if (st.code() == Code::kUnauthenticated) return st;  // the next one would refuse them too
    reasons.push_back(Reason(st));
  }
  if (reasons.size() < sentinels.size()) {
    reasons.push_back(fmt::format("{} ms passed", target_.timeout_ms));
  }
  server_ = {};
  return Status::Unavailable(
      fmt::format("store unreachable: no sentinel named a master of {} that answers as one ({})",
                  target_.master_name, fmt::join(reasons, "; ")));
}

}  // namespace trainq::redis
