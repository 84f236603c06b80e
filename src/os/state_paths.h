// Where an instance keeps its files. The state dir is chosen by --state-dir, then
// TRAINQ_STATE_DIR, then $XDG_STATE_HOME/trainq, then ~/.local/state/trainq.
#pragma once

#include <string>

namespace trainq {

struct StatePaths {
  std::string state_dir;
  std::string db;      // trainq.db
  std::string runs;    // runs/<job>/<attempt>/
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
// `flag` is the --state-dir value, empty if not given. The result's paths are absolute.
// A path computation only: nothing is created or checked.
StatePaths ResolveStatePaths(const std::string& flag);

}  // namespace trainq
