#include "src/store/redis/durability.h"

#include <fmt/format.h>

#include <cctype>
#include <cstdlib>

namespace trainq::redis {

namespace {

// The value of "NAME:" on its own line of INFO's text; "" when absent.
std::string_view InfoField(std::string_view info, std::string_view name) {
  for (size_t at = info.find(name); at != std::string_view::npos; at = info.find(name, at + 1)) {
    bool line_start = at == 0 || info[at - 1] == '\n';
    size_t colon = at + name.size();
    if (!line_start || colon >= info.size() || info[colon] != ':') continue;
    size_t end = info.find_first_of("\r\n", colon);
    return info.substr(colon + 1, end == std::string_view::npos ? end : end - colon - 1);
  }
  return {};
}

// The write commands of src/store/redis/scripts.cc, with arguments of the right arity.
constexpr std::string_view kWrites[][3] = {
    {"HSET", "f", "v"},    {"HDEL", "f", ""},  {"DEL", "", ""},     {"UNLINK", "", ""},
    {"SET", "v", ""},      {"INCR", "", ""},   {"INCRBY", "1", ""}, {"RPUSH", "v", ""},
    {"SADD", "v", ""},     {"SREM", "v", ""},  {"ZADD", "1", "v"},  {"ZREM", "v", ""},
    {"HINCRBY", "f", "1"}, {"LREM", "0", "v"},
};

std::string Fix(const std::string& prefix) {
  return fmt::format(
      "give the default user, in Redis's ACL file: user {} (docs/cluster.md, "
      "\"Redis ACL\")",
      DefaultUserAcl(prefix));
}

}  // namespace

ServerFacts ParseServerInfo(std::string_view info) {
  ServerFacts facts;
  std::string_view valkey = InfoField(info, "valkey_version");
  std::string_view version = valkey.empty() ? InfoField(info, "redis_version") : valkey;
  if (!valkey.empty()) facts.product = "Valkey";
  facts.version = std::string(version);
  facts.major = std::atoi(facts.version.c_str());
  facts.aof = InfoField(info, "aof_enabled") == "1";
  return facts;
}

std::vector<std::vector<std::string>> AofReplayProbes(const std::string& prefix) {
  std::vector<std::vector<std::string>> probes = {{"MULTI"}, {"EXEC"}};
  for (const auto& write : kWrites) {
    std::vector<std::string> argv = {std::string(write[0]), prefix + "aof-probe"};
    for (std::string_view arg : {write[1], write[2]}) {
      if (!arg.empty()) argv.emplace_back(arg);
    }
    probes.push_back(std::move(argv));
  }
  return probes;
}

std::string DefaultUserAcl(const std::string& prefix) {
  std::string line =
      fmt::format("default off resetkeys ~{}* resetchannels -@all +multi +exec", prefix);
  for (const auto& write : kWrites) {
    line += " +";
    for (char c : write[0]) line += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return line;
}

Status CheckAofReplay(Connection& conn, const ServerFacts& facts) {
  if (!facts.aof) return Status::Ok();
  const std::string& prefix = conn.target().prefix;
  for (const std::vector<std::string>& probe : AofReplayProbes(prefix)) {
    std::vector<std::string> argv = {"ACL", "DRYRUN", "default"};
    argv.insert(argv.end(), probe.begin(), probe.end());
    Result<Reply> reply = conn.Command(argv);
    if (!reply.ok() && reply.status().code() == Code::kUnavailable) return reply.status();
    if (!reply.ok()) {
      return Status::Invalid(fmt::format(
          "store: cannot check that {} keeps trainq's writes across a restart: the store's "
          "user may not run ACL DRYRUN ({}); add +acl|dryrun to its ACL line (docs/cluster.md, "
          "\"Redis ACL\")",
          conn.Where(), reply.status().message()));
    }
    std::string_view answer = Text(reply->get());
    if (answer == "OK") continue;
    return Status::Invalid(fmt::format(
        "store: {} would drop trainq's writes when it restarts: {} {} replays the append-only "
        "file's transactions as its default user and checks that user's ACL at EXEC "
        "(redis/redis#14541, valkey-io/valkey#3983), and the default user may not run {} on "
        "{}* ({}); {}",
        conn.Where(), facts.product, facts.version.empty() ? "(version unknown)" : facts.version,
        probe.front(), prefix, answer, Fix(prefix)));
  }
  return Status::Ok();
}

}  // namespace trainq::redis
