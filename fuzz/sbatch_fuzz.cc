// libFuzzer target for the workflow's parsers: #SBATCH scripts (src/core/sbatch.h), node lists
// (src/core/hostlist.h), --signal (src/core/stop_spec.h), --array
// and --sweep (src/core/sweep.h). Any input is read or refused with kInvalid naming where;
// what an array parses to is ascending, unique and within bounds; a script that reads has
// its options in range; an output pattern always becomes one sh word list that quotes every
// fixed byte.
#include <csignal>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz/fuzz_check.h"
#include "src/core/hostlist.h"
#include "src/core/sbatch.h"
#include "src/core/stop_spec.h"
#include "src/core/sweep.h"

namespace trainq {
namespace {

void CheckScript(std::string_view text) {
  SbatchOptions o;
  Status st = ReadSbatchScript(text, o);
  if (!st.ok()) {
    FUZZ_CHECK(st.code() == Code::kInvalid);
    FUZZ_CHECK(!st.message().empty());
    return;
  }
  FUZZ_CHECK(!o.gpus || *o.gpus >= 0);
  FUZZ_CHECK(!o.nodes || *o.nodes >= 1);
  FUZZ_CHECK(!o.cpus_per_task || *o.cpus_per_task >= 1);
  FUZZ_CHECK(!o.time_limit_ms || *o.time_limit_ms > 0);
  for (int64_t id : o.after_ok) FUZZ_CHECK(id > 0);
}

void CheckArray(std::string_view text) {
  Result<ArraySpec> a = ParseArray(text);
  if (!a.ok()) {
    FUZZ_CHECK(a.status().code() == Code::kInvalid);
    FUZZ_CHECK(a.status().message().rfind("--array: ", 0) == 0);
    return;
  }
  FUZZ_CHECK(!a->indices.empty() && a->indices.size() <= kMaxExpandedJobs);
  for (size_t i = 0; i < a->indices.size(); ++i) {
    FUZZ_CHECK(a->indices[i] >= 0 && a->indices[i] <= kMaxArrayIndexValue);
    FUZZ_CHECK(i == 0 || a->indices[i - 1] < a->indices[i]);
  }
  FUZZ_CHECK(a->limit >= 0);
}

void CheckSweep(std::string_view text) {
  Result<SweepAxis> axis = ParseSweep(text);
  if (!axis.ok()) {
    FUZZ_CHECK(axis.status().message().rfind("--sweep: ", 0) == 0);
    return;
  }
  FUZZ_CHECK(!axis->name.empty() && !axis->values.empty());
  Result<std::vector<ExpandedJob>> jobs = ExpandJobs({"{" + axis->name + "}"}, {*axis}, nullptr);
  FUZZ_CHECK(jobs.ok() && jobs->size() == axis->values.size());
  for (size_t i = 0; i < jobs->size(); ++i) FUZZ_CHECK((*jobs)[i].command[0] == axis->values[i]);
}

void CheckPattern(std::string_view text) {
  std::string word = ShellPathOf(text, "name", "user");
  FUZZ_CHECK(!word.empty());
  // Read back as sh reads quotes: every quote is closed, a backslash appears only as the
  // escaped quote of '\'', and what is double-quoted is a ${...} variable, never fixed text.
  enum { kOut, kSingle, kDouble } state = kOut;
  for (size_t i = 0; i < word.size(); ++i) {
    char c = word[i];
    if (state == kSingle) {
      if (c == '\'') state = kOut;
    } else if (state == kDouble) {
      if (c == '"') state = kOut;
    } else if (c == '\'') {
      state = kSingle;
    } else if (c == '"') {
      FUZZ_CHECK(word.compare(i + 1, 2, "${") == 0);
      state = kDouble;
    } else {
      FUZZ_CHECK(c == '\\' && i + 1 < word.size() && word[i + 1] == '\'');
      ++i;
    }
  }
  FUZZ_CHECK(state == kOut);
}

// A node list expands or is refused naming itself; what it expands to compresses back to a
// list that expands to the same names.
void CheckHostlist(std::string_view text) {
  Result<std::vector<std::string>> names = ExpandHostlist(text);
  if (!names.ok()) {
    FUZZ_CHECK(names.status().code() == Code::kInvalid);
    FUZZ_CHECK(names.status().message().rfind("node list: ", 0) == 0);
    return;
  }
  FUZZ_CHECK(names->size() <= kMaxHostlistNames);
  Result<std::vector<std::string>> again = ExpandHostlist(CompressHostlist(*names));
  FUZZ_CHECK(again.ok() && *again == *names);
}

// --signal reads to a catchable signal and a lead in range, written back as a text that reads
// to the same, or is refused naming the field.
void CheckSignal(std::string_view text) {
  Result<SignalOption> sig = ParseSignalOption(text);
  if (!sig.ok()) {
    FUZZ_CHECK(sig.status().code() == Code::kInvalid);
    FUZZ_CHECK(sig.status().message().rfind("--signal: '", 0) == 0);
    return;
  }
  FUZZ_CHECK(sig->signal >= 1 && sig->signal <= 31 && sig->signal != SIGKILL &&
             sig->signal != SIGSTOP);
  FUZZ_CHECK(sig->lead_ms >= 0 && sig->lead_ms <= kMaxSignalLeadSeconds * 1000);
  StopSpec stop;
  stop.signal = sig->signal;
  stop.lead_ms = sig->lead_ms;
  stop.batch_only = sig->batch_only;
  Result<SignalOption> again = ParseSignalOption(FormatSignalOption(stop));
  FUZZ_CHECK(again.ok() && again->signal == sig->signal && again->lead_ms == sig->lead_ms &&
             again->batch_only == sig->batch_only);
}

}  // namespace
}  // namespace trainq

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  trainq::CheckScript(text);
  trainq::CheckArray(text);
  trainq::CheckSweep(text);
  trainq::CheckPattern(text);
  trainq::CheckHostlist(text);
  trainq::CheckSignal(text);
  return 0;
}
