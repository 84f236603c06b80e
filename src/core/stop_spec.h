// How a job is warned before it is stopped and what becomes of it then (docs/scheduling.md,
// "Preemption and requeue"): Slurm's --signal=[B:]SIG[@T], --requeue, and trainq's
// --preemptible and --checkpoint. Pure parsing and text forms; the shim sends the signals.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "trainq/job.h"
#include "trainq/status.h"

namespace trainq {

// Slurm's default lead when --signal gives no @T, and its largest.
inline constexpr int64_t kDefaultSignalLeadMs = 60 * 1000;
inline constexpr int64_t kMaxSignalLeadSeconds = 65535;

struct SignalOption {
  int signal = 0;
  int64_t lead_ms = kDefaultSignalLeadMs;
  bool batch_only = false;
};

// --signal [B:]SIG[@T]: SIG a name with or without SIG (USR1, SIGUSR1, TERM; any case) or a
// number 1 to 31 other than SIGKILL's and SIGSTOP's (they cannot be caught, so they warn of
// nothing), T seconds 0 to 65535 (60 when left out). `field` names the option in errors
// ("--signal", "#SBATCH --signal"). kInvalid naming it and the accepted form otherwise.
Result<SignalOption> ParseSignalOption(std::string_view text, std::string_view field = "--signal");
// The form ParseSignalOption reads back: "B:USR1@60".
std::string FormatSignalOption(const StopSpec& stop);

// "USR1" for SIGUSR1 (no SIG prefix, as Slurm prints them); "signal N" when unnamed.
std::string ShortSignalName(int sig);

// StopSpec as one text for the stores ("" at its defaults) and back (kInternal when the text
// is not what StopToText writes).
std::string StopToText(const StopSpec& stop);
Status StopFromText(std::string_view text, StopSpec& stop);

// --checkpoint GLOB: a glob(3) pattern relative to the job's cwd, without "..", at most 1024
// bytes. What is wrong with it and the accepted form, or "" when nothing is.
std::string CheckpointGlobProblem(std::string_view glob);

}  // namespace trainq
