#include "src/cli/api_paths.h"

#include <fmt/format.h>

namespace trainq::api {

namespace {

constexpr std::string_view kPrefix = "/v1";

std::string Path(std::string_view collection) { return fmt::format("{}/{}", kPrefix, collection); }

}  // namespace

std::string JobsPath(std::string_view query) {
  return query.empty() ? Path("jobs") : fmt::format("{}?{}", Path("jobs"), query);
}

std::string JobsActionPath(std::string_view action) {
  return fmt::format("{}/{}", Path("jobs"), action);
}

std::string JobPath(int64_t id, std::string_view action) {
  std::string path = fmt::format("{}/{}", Path("jobs"), id);
  return action.empty() ? path : fmt::format("{}/{}", path, action);
}

std::string JobLogPath(int64_t id, int64_t attempt) {
  return fmt::format("{}?attempt={}", JobPath(id, "log"), attempt);
}

std::string GpusPath() { return Path("gpus"); }
std::string StatusPath() { return Path("status"); }
std::string ConfigPath() { return Path("config"); }

std::string DaemonPath(std::string_view action) {
  return fmt::format("{}/{}", Path("daemon"), action);
}

std::string TokensPath() { return Path("tokens"); }
std::string DashboardTokenPath() { return Path("tokens/dashboard"); }

std::string TokenPath(std::string_view name) { return fmt::format("{}/{}", TokensPath(), name); }

std::string NodesPath() { return Path("nodes"); }

std::string AcctPath(std::string_view query) {
  return query.empty() ? Path("acct") : Path("acct") + "?" + std::string(query);
}

std::string NodePath(std::string_view name, std::string_view action) {
  return fmt::format("{}/{}/{}", NodesPath(), name, action);
}

}  // namespace trainq::api
