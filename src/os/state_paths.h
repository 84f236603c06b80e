// Where an instance keeps its files. The state dir is chosen by --state-dir, then
// TRAINQ_STATE_DIR, then $XDG_STATE_HOME/trainq, then ~/.local/state/trainq.
#pragma once

#include <string>

namespace trainq {

struct StatePaths {
  std::string state_dir;
  std::string db;      // trainq.db
  std::string runs;    // runs/<job>/<attempt>/
  std::string socket;  // trainq.sock, or under $XDG_RUNTIME_DIR when the path is too long
  std::string lock;    // daemon.lock: held by the running daemon
  std::string log;     // daemon.log
  std::string config;    // config.toml
  std::string settings;  // settings.json: values `trainq config set` changed at run time
};

std::string DefaultStateDir();
// `flag` is the --state-dir value, empty if not given. The result's paths are absolute.
StatePaths ResolveStatePaths(const std::string& flag);

}  // namespace trainq
