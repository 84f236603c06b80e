// libFuzzer target for every parser of user input in src/core: sizes, --mem, --env and the
// JSON submit request (SpecFromJson -> ValidateSpec). Build and run: `make fuzz`.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "fuzz/fuzz_check.h"
#include "src/core/json_codec.h"
#include "src/core/spec.h"
#include "src/core/words.h"
#include "trainq/size.h"

namespace trainq {
namespace {

constexpr uint64_t kMaxBytes = 9'000'000'000'000'000'000ull;

void CheckInvalid(const Status& st) {
  FUZZ_CHECK(st.code() == Code::kInvalid);
  FUZZ_CHECK(!st.message().empty());
}

void CheckSize(std::string_view text) {
  Result<uint64_t> size = ParseSize(text, "size");
  if (!size.ok()) return CheckInvalid(size.status());
  FUZZ_CHECK(*size > 0 && *size <= kMaxBytes);
  Result<uint64_t> exact = ParseSize(fmt::format("{}B", *size));
  FUZZ_CHECK(exact.ok() && *exact == *size);
  FUZZ_CHECK(!FormatBytes(*size).empty());
}

void CheckMem(std::string_view text) {
  Result<MemRequest> mem = ParseMemRequest(text);
  if (!mem.ok()) return CheckInvalid(mem.status());
  FUZZ_CHECK(mem->bytes.has_value() != mem->percent.has_value());
  if (mem->bytes) {
    FUZZ_CHECK(*mem->bytes > 0);
    return;
  }
  FUZZ_CHECK(*mem->percent > 0.0 && *mem->percent <= 100.0);
  Result<MemRequest> again = ParseMemRequest(fmt::format("{}%", *mem->percent));
  FUZZ_CHECK(again.ok() && again->percent == mem->percent);
}

void CheckEnv(std::string_view text) {
  std::string s(text);
  Result<std::pair<std::string, std::string>> kv = ParseEnvAssignment(s);
  if (!kv.ok()) return CheckInvalid(kv.status());
  FUZZ_CHECK(!kv->first.empty() && kv->first.find('=') == std::string::npos);
  FUZZ_CHECK(kv->first + "=" + kv->second == s);
}

// --from lines: splitting never invents words, and quoting each word splits back the same.
void CheckWords(std::string_view text) {
  Result<std::vector<std::string>> words = SplitWords(text, "line");
  if (!words.ok()) return CheckInvalid(words.status());
  std::string quoted;
  for (const std::string& w : *words) {
    quoted += " '";
    for (char c : w) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
    quoted += "'";
  }
  Result<std::vector<std::string>> again = SplitWords(quoted, "line");
  FUZZ_CHECK(again.ok() && *again == *words);
}

bool SameSpec(const JobSpec& a, const JobSpec& b) {
  return a.name == b.name && a.command == b.command && a.cwd == b.cwd && a.env == b.env &&
         a.gpus == b.gpus && a.mem_bytes == b.mem_bytes && a.mem_percent == b.mem_percent &&
         a.cpus == b.cpus && a.priority == b.priority && a.retries == b.retries &&
         a.gpu_type == b.gpu_type && a.constraints == b.constraints && a.container == b.container;
}

void CheckValidation(const JobSpec& spec) {
  const SpecLimits limits{.max_gpus_per_node = 4, .max_cpu_slots = 16};
  for (CwdKind cwd : {CwdKind::kDirectory, CwdKind::kMissing, CwdKind::kNotADirectory}) {
    std::vector<FieldError> errors = ValidateSpec(spec, limits, cwd);
    FUZZ_CHECK(ToStatus(errors).ok() == errors.empty());
    for (const FieldError& e : errors) FUZZ_CHECK(!e.field.empty() && !e.message.empty());
    if (!errors.empty()) continue;
    FUZZ_CHECK(!spec.command.empty() && spec.gpus >= 0 && spec.gpus <= 4);
    // A GPU job may hold no CPU slot (its default); a CPU job holds at least one.
    FUZZ_CHECK(spec.cpus >= (spec.gpus > 0 ? 0 : 1) && spec.cpus <= 16);
    FUZZ_CHECK(spec.retries >= 0 && spec.retries <= 100);
    FUZZ_CHECK(cwd == CwdKind::kDirectory && !spec.cwd.empty() && spec.cwd[0] == '/');
  }
  std::string name = DefaultJobName(spec.command);
  FUZZ_CHECK(name.size() <= kMaxJobNameBytes);
  // One GPU: seven TRAINQ_/CUDA_ variables at most beyond the job's own (TRAINQ_RESTART_COUNT
  // the seventh).
  auto env =
      BuildAttemptEnv(spec, {.job = 1, .attempt = 1, .gpu_indices = {0}, .gpu_uuids = {"u"}});
  FUZZ_CHECK(env.size() <= spec.env.size() + 7);
  // Several GPUs: six more for torchrun, and none of the variables torchrun sets itself.
  auto dist = BuildAttemptEnv(spec, {.job = 1,
                                     .attempt = 1,
                                     .gpu_indices = {0, 1},
                                     .gpu_uuids = {"u", "v"},
                                     .master_port = 29500});
  FUZZ_CHECK(dist.size() <= spec.env.size() + 13);
  for (const auto& [key, value] : dist) FUZZ_CHECK(key != "WORLD_SIZE" && key != "RANK");
}

void CheckSpecJson(std::string_view text) {
  nlohmann::json request = nlohmann::json::parse(text, nullptr, false);
  if (request.is_discarded()) return;
  Result<JobSpec> spec = SpecFromJson(request);
  if (!spec.ok()) return CheckInvalid(spec.status());
  CheckValidation(*spec);
  nlohmann::json wire = nlohmann::json::parse(DumpJson(SpecToJson(*spec)), nullptr, false);
  FUZZ_CHECK(!wire.is_discarded());
  Result<JobSpec> back = SpecFromJson(wire);
  FUZZ_CHECK(back.ok());
  FUZZ_CHECK(SameSpec(*spec, *back));
}

// The raw bytes as JSON string values (not necessarily UTF-8), as a client could send them.
void CheckRawStrings(std::string_view text) {
  nlohmann::json request = {{"command", {std::string(text)}},
                            {"mem", std::string(text)},
                            {"env", {{std::string(text), std::string(text)}}}};
  Result<JobSpec> spec = SpecFromJson(request);
  FUZZ_CHECK(spec.ok() == ParseMemRequest(text).ok());
  if (spec.ok()) CheckValidation(*spec);
  FUZZ_CHECK(!DumpJson(request).empty());
}

}  // namespace
}  // namespace trainq

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  trainq::CheckSize(text);
  trainq::CheckMem(text);
  trainq::CheckEnv(text);
  trainq::CheckSpecJson(text);
  trainq::CheckRawStrings(text);
  trainq::CheckWords(text);
  return 0;
}
