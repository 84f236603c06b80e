#include "src/os/state_paths.h"

#include <sys/un.h>
#include <unistd.h>

#include <filesystem>
#include <functional>

#include <fmt/format.h>

#include "src/os/system.h"

namespace trainq {

std::string SessionSocketPath(const StatePaths& paths, int64_t job, int n) {
  return fmt::format("{}/{}.{}.sock", paths.sessions, job, n);
}

std::string DefaultStateDir() {
  std::string xdg = GetEnv("XDG_STATE_HOME");
  if (!xdg.empty()) return xdg + "/trainq";
  std::string home = GetEnv("HOME");
  if (home.empty()) home = "/tmp";
  return home + "/.local/state/trainq";
}

StatePaths ResolveStatePaths(const std::string& flag) {
  std::string dir = flag;
  if (dir.empty()) dir = GetEnv("TRAINQ_STATE_DIR");
  if (dir.empty()) dir = DefaultStateDir();
  std::error_code ec;
  std::filesystem::path abs = std::filesystem::absolute(dir, ec);
  if (!ec) dir = abs.lexically_normal().string();
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();

  StatePaths p;
  p.state_dir = dir;
  p.db = dir + "/trainq.db";
  p.runs = dir + "/runs";
  p.sessions = dir + "/sessions";
  p.lock = dir + "/daemon.lock";
  p.log = dir + "/daemon.log";
  p.config = dir + "/config.toml";
  p.settings = dir + "/settings.json";
  p.socket = dir + "/trainq.sock";
  if (p.socket.size() >= sizeof(sockaddr_un::sun_path)) {
    // Unix socket paths are limited to 107 bytes: use a directory of the user's own, keyed
    // by the state dir. A name in /tmp itself could be taken by anyone first.
    std::string runtime = GetEnv("XDG_RUNTIME_DIR");
    p.socket_dir =
        runtime.empty() ? fmt::format("/tmp/trainq-{}", ::geteuid()) : runtime + "/trainq";
    p.socket = fmt::format("{}/{:016x}.sock", p.socket_dir, std::hash<std::string>{}(dir));
  }
  return p;
}

StatePaths WithSocket(StatePaths paths, const std::string& socket) {
  paths.socket = socket;
  std::string dir = std::filesystem::path(socket).parent_path().string();
  paths.socket_dir = dir == paths.state_dir ? "" : dir;
  return paths;
}

}  // namespace trainq
