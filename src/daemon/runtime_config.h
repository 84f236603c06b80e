// The config in force: the config file's (and the environment's), with the settings
// `trainq config set` changed at run time on top. GET /v1/config shows every option's value
// and where it came from; a set is checked whole, persisted in settings.json in the state
// dir, and only then applied, so it survives a restart or a crash (docs/config.md).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "src/daemon/config.h"
#include "trainq/status.h"

namespace trainq {

class RuntimeConfig {
 public:
  // `gpus`: the indices of the GPUs of the latest sample (a `devices` setting must name
  // them).
  RuntimeConfig(Config file_config, std::string settings_path,
                std::function<std::vector<int>()> gpus)
      : config_(file_config),
        file_config_(std::move(file_config)),
        settings_path_(std::move(settings_path)),
        gpus_(std::move(gpus)) {}

  // What every part of the daemon reads; the same object for the daemon's life.
  const Config& config() const { return config_; }
  // Applies settings.json on top of the file's config (at start, after the first sample).
  Status Load();
  // GET /v1/config's body.
  std::string Json() const;
  // A `trainq config set` request (PUT /v1/config's body): checked whole, persisted, then
  // applied; what changed, one line each ("max_jobs_per_user = 2 (was 0)"). Nothing changes
  // when it is refused.
  Result<std::string> Set(const std::string& body, const std::string& user);

 private:
  void Apply(const RuntimeSettings& settings);
  std::vector<int> MissingDevices(const std::vector<int>& devices) const;

  Config config_;       // in force: the file's, with runtime_ on top
  Config file_config_;  // as the config file (and environment) gave it
  RuntimeSettings runtime_;
  std::string settings_path_;
  std::function<std::vector<int>()> gpus_;
};

}  // namespace trainq
