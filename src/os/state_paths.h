// Where an instance keeps its files. The state dir is chosen by --state-dir, then
// TRAINQ_STATE_DIR, then $XDG_STATE_HOME/trainq, then ~/.local/state/trainq.
#pragma once

#include <cstdint>
#include <string>

namespace trainq {

struct StatePaths {
  std::string state_dir;
  std::string db;    // trainq.db
  std::string runs;  // runs/<job>/<attempt>/
  // sessions/<job>.<attempt>.sock: interactive sessions' sockets, each its user's (0600); a
  // shared daemon's users pass through the directory (0711) to theirs.
  std::string sessions;
  std::string socket;  // trainq.sock, or <hash>.sock in socket_dir when the path is too long
  // Empty when the socket is in the state dir. Otherwise the directory only its user may
  // enter that holds the socket: $XDG_RUNTIME_DIR/trainq, else /tmp/trainq-<euid>. Whoever
  // uses the socket checks this directory first (CheckPrivateDir, src/os/permissions.h).
  std::string socket_dir;
  std::string lock;      // daemon.lock: held by the running daemon
  std::string log;       // daemon.log
  std::string config;    // config.toml
  std::string settings;  // settings.json: values `trainq config set` changed at run time
};

std::string DefaultStateDir();

// The socket of attempt `n` of interactive job `job` (RunSpec::session_socket).
std::string SessionSocketPath(const StatePaths& paths, int64_t job, int n);

// A shared daemon's defaults (docs/operations.md, "A shared server"): root's state, and the
// socket every user's client looks for before it starts a personal daemon.
inline constexpr const char* kSharedStateDir = "/var/lib/trainq";
inline constexpr const char* kSharedSocket = "/run/trainq/trainq.sock";

// `paths` with its socket at `socket` (absolute); its directory becomes socket_dir unless it
// is the state dir.
StatePaths WithSocket(StatePaths paths, const std::string& socket);
// `flag` is the --state-dir value, empty if not given. The result's paths are absolute.
// A path computation only: nothing is created or checked.
StatePaths ResolveStatePaths(const std::string& flag);

}  // namespace trainq
