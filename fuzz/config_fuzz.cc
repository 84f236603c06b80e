// libFuzzer target for what an operator writes or the daemon keeps: config.toml (ParseConfig)
// and settings.json (RuntimeSettingsFromJson). The first input byte picks which. Invariants:
// a refusal is kInvalid and names where ("fuzz.toml: ..."); what parses has every option
// readable, a sane policy, and settings.json round-trips to the same text.
#include <cstdint>
#include <string>

#include "fuzz/fuzz_check.h"
#include "src/daemon/config.h"

namespace trainq {
namespace {

void CheckRefusal(const Status& status, const std::string& origin) {
  FUZZ_CHECK(status.code() == Code::kInvalid);
  FUZZ_CHECK(status.message().find(origin) != std::string::npos);
}

void FuzzToml(const std::string& text) {
  Result<Config> config = ParseConfig(text, "fuzz.toml");
  if (!config.ok()) return CheckRefusal(config.status(), "fuzz.toml");
  for (const OptionInfo& option : ConfigOptions()) {
    FUZZ_CHECK(OptionValueText(*config, option.name).has_value());
  }
  FUZZ_CHECK(config->sample_interval_ms >= 0 && config->grace_ms >= 0);
  FUZZ_CHECK(config->oom_backoff_ms >= 0 && config->oom_backoff_max_ms >= 0);
  PolicyConfig policy = PolicyOf(*config);
  FUZZ_CHECK(policy.ramp_up_ms >= 0 && policy.max_holds >= 0 && policy.max_jobs_per_gpu >= 0);
}

void FuzzSettings(const std::string& text) {
  Result<RuntimeSettings> settings = RuntimeSettingsFromJson(text, "settings.json");
  if (!settings.ok()) return CheckRefusal(settings.status(), "settings.json");
  for (const std::string& name : settings->names) FUZZ_CHECK(IsSettable(name));
  std::string saved = RuntimeSettingsToJson(*settings);
  Result<RuntimeSettings> again = RuntimeSettingsFromJson(saved, "settings.json");
  FUZZ_CHECK(again.ok());
  FUZZ_CHECK(RuntimeSettingsToJson(*again) == saved);
}

}  // namespace
}  // namespace trainq

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] % 2 == 0) {
    trainq::FuzzToml(text);
  } else {
    trainq::FuzzSettings(text);
  }
  return 0;
}
