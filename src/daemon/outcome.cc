#include "src/daemon/outcome.h"

#include <csignal>
#include <cstring>

#include <fmt/format.h>

#include "src/core/duration.h"
#include "src/core/oom.h"
#include "trainq/size.h"

namespace trainq {

std::string SignalName(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  return abbrev ? fmt::format("SIG{}", abbrev) : fmt::format("signal {}", sig);
}

namespace {

AttemptEnd Ended(JobState state, UnixMs now, std::string reason) {
  AttemptEnd end;
  end.attempt_state = state;
  end.job_state = state;
  end.ended_at = now;
  end.end_reason = reason;
  end.job_reason = std::move(reason);
  return end;
}

AttemptEnd OutOfMemory(const OutcomeInput& in, const ExitRecord& rec, const std::string& match,
                       std::string failure) {
  int retry = in.oom_retries_used + 1;
  AttemptEnd end = Ended(JobState::kFailed, in.now, "");
  end.exit_code = rec.exit_code;
  end.signal = rec.signal;
  end.oom = true;
  if (retry > in.retries_allowed) {
    end.end_reason = fmt::format("out of memory ({}), {}", match, failure);
    end.job_reason = fmt::format("out of memory ({}); no retries left (--retries {})", match,
                                 in.retries_allowed);
    return end;
  }
  int64_t wait = OomBackoffMs(retry, in.backoff_ms, in.backoff_max_ms);
  end.job_state = JobState::kQueued;
  end.not_before = in.now + wait;
  end.end_reason = fmt::format("out of memory ({}), {}", match, failure);
  end.job_reason = fmt::format("out of memory ({}) on attempt {}: retry {} of {} after {}", match,
                               retry, retry, in.retries_allowed, FormatDuration(wait));
  return end;
}

std::string Processes(size_t n) { return fmt::format("{} process{}", n, n == 1 ? "" : "es"); }

// What became of the attempt's processes, for the end's reason.
std::string WhatWasStopped(const UnrecordedInput& in, std::string_view none_left) {
  std::string text = in.stopped == 0 ? std::string(none_left)
                                     : fmt::format("its {} {} stopped", Processes(in.stopped),
                                                   in.stopped == 1 ? "was" : "were");
  if (in.survivors > 0) {
    text += fmt::format(" ({} survived SIGKILL and {} left running)", Processes(in.survivors),
                        in.survivors == 1 ? "is" : "are");
  }
  return text;
}

// The job did nothing wrong: its node lost touch with the cluster. Queued again at once, not
// as an OOM retry. In cluster mode the leader has normally ended the attempt first, as "node
// NAME lost" (counting it against max_node_failures); this decides only when this node's
// daemon collects the record before that.
AttemptEnd SelfFenced(const ExitRecord& rec, UnixMs ended) {
  AttemptEnd end =
      Ended(JobState::kQueued, ended, "stopped by self-fencing: node heartbeat lapsed");
  end.attempt_state = JobState::kFailed;
  end.exit_code = rec.exit_code;
  end.signal = rec.signal;
  end.job_reason = "requeued: " + end.end_reason;
  return end;
}

// The errno text of EADDRINUSE as Python, glibc and c10d print it.
bool PortTaken(std::string_view log_tail) {
  return log_tail.find("Address already in use") != std::string_view::npos ||
         log_tail.find("EADDRINUSE") != std::string_view::npos;
}

const char* Describe(Unrecorded why) {
  switch (why) {
    case Unrecorded::kShimDied:
      return "the job's supervisor (shim) ended without an exit record";
    case Unrecorded::kNeverStarted:
      return "the daemon stopped before this attempt started";
    case Unrecorded::kRunDirMissing:
      break;
  }
  return "its run dir was missing";
}

bool CancelWins(const UnrecordedInput& in) {
  if (in.cancel == CancelAt::kBeforeTheEnd) return true;
  return in.cancel == CancelAt::kWhileStopping && in.why != Unrecorded::kShimDied;
}

}  // namespace

AttemptEnd DecideUnrecorded(const UnrecordedInput& in) {
  if (CancelWins(in)) {
    return Ended(JobState::kCancelled, in.now,
                 fmt::format("cancelled; {}; {}", Describe(in.why),
                             WhatWasStopped(in, "no process of the job was left")));
  }
  switch (in.why) {
    case Unrecorded::kShimDied:
      return Ended(JobState::kFailed, in.now,
                   "the job's supervisor (shim) died without an exit record; " +
                       WhatWasStopped(in, "no process of the job was left"));
    case Unrecorded::kNeverStarted:
      break;
    case Unrecorded::kRunDirMissing: {
      AttemptEnd end = Ended(JobState::kQueued, in.now, "");
      end.attempt_state = JobState::kFailed;
      end.end_reason = fmt::format("the run dir {} was missing; {}", in.run_dir,
                                   WhatWasStopped(in, "no process of the attempt was left"));
      end.job_reason = "requeued: " + end.end_reason;
      return end;
    }
  }
  AttemptEnd end =
      Ended(JobState::kQueued, in.now, "the daemon stopped before this attempt started");
  end.attempt_state = JobState::kFailed;
  if (in.stopped > 0) end.end_reason += "; " + WhatWasStopped(in, "");
  end.job_reason = "requeued: " + end.end_reason;
  return end;
}

namespace {

// What podman and docker exit with when the container itself failed (125: the runtime; 126: a
// device or the command could not be set up; 127: the command is not in the image).
bool ContainerDidNotStart(std::optional<int> code) { return code && *code >= 125 && *code <= 127; }

// The runtime's last error line in the log ("Error: ...", "docker: Error ...", or trainq's own
// "trainq: ..." about an archive), as it wrote it; "" when there is none.
std::string RuntimeError(std::string_view log) {
  std::string found;
  size_t start = 0;
  while (start < log.size()) {
    size_t end = log.find('\n', start);
    std::string_view line = log.substr(start, end == std::string_view::npos ? end : end - start);
    if (line.starts_with("Error: ") || line.starts_with("docker: Error") ||
        line.starts_with("trainq: --image") || line.starts_with("trainq: GPU isolation")) {
      found = std::string(line);
    }
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  return found;
}

}  // namespace

namespace {

// What the warning before a stop achieved, for the end's reason: "; SIGUSR1 sent 60 s before,
// checkpoints/last.ckpt written after it".
std::string WarningNote(const OutcomeInput& in, const ExitRecord& rec) {
  if (rec.warned_at <= 0 || in.stop.signal <= 0) return "";
  // To the nearest second: the end comes a moment after the lead asked for.
  int64_t lead = std::max<int64_t>(0, rec.ended_at - rec.warned_at);
  if (lead >= 1000) lead = (lead + 500) / 1000 * 1000;
  std::string note =
      fmt::format("; {} sent {} before", SignalName(in.stop.signal), FormatDuration(lead));
  if (in.stop.checkpoint.empty()) return note + " the end";
  if (rec.checkpoint.empty()) {
    return note + fmt::format(" the end; no file matching --checkpoint {} was written after it",
                              in.stop.checkpoint);
  }
  return note + fmt::format(" the end; checkpoint {} written after it", rec.checkpoint);
}

AttemptEnd Stopped(const OutcomeInput& in, const ExitRecord& rec, UnixMs ended) {
  std::string note = WarningNote(in, rec);
  AttemptEnd end = Ended(JobState::kCancelled, ended, rec.stop_reason + note);
  end.exit_code = rec.exit_code;
  end.signal = rec.signal;
  if (rec.stop == "requeued" || in.stop.requeue) {
    end.job_state = JobState::kQueued;
    end.job_reason = fmt::format("requeued: {}", rec.stop_reason);
    return end;
  }
  // An elastic job's resize: back in the queue at once, its new GPUs held for it.
  if (rec.stop == "resized") {
    end.job_state = JobState::kQueued;
    end.job_reason = rec.stop_reason + note;
    return end;
  }
  end.job_reason =
      fmt::format("{}{}; not queued again (submit with --requeue for that)", rec.stop_reason, note);
  return end;
}

}  // namespace

AttemptEnd DecideOutcome(const OutcomeInput& in) {
  if (!in.record) return DecideUnrecorded({Unrecorded::kShimDied, "", 0, 0, in.now});
  const ExitRecord& rec = *in.record;
  UnixMs ended = rec.ended_at ? rec.ended_at : in.now;
  if (rec.spawn_failed) {
    AttemptEnd end = Ended(JobState::kFailed, ended, "could not start: " + rec.error);
    end.exit_code = rec.exit_code;
    return end;
  }
  if (rec.cancelled) {
    AttemptEnd end =
        Ended(JobState::kCancelled, ended,
              in.cancelled_by.empty() ? "cancelled" : "cancelled by " + in.cancelled_by);
    end.exit_code = rec.exit_code;
    end.signal = rec.signal;
    return end;
  }
  // A session hung up (its terminal went away): cancelled, as closing an ssh window is.
  if (!rec.hangup.empty()) {
    AttemptEnd end = Ended(JobState::kCancelled, ended, rec.hangup);
    end.exit_code = rec.exit_code;
    end.signal = rec.signal;
    return end;
  }
  if (!rec.stop.empty()) return Stopped(in, rec, ended);
  if (rec.fenced) return SelfFenced(rec, ended);
  if (rec.time_limit) {
    std::string limit = in.time_limit_ms > 0 ? " (" + FormatDuration(in.time_limit_ms) + ")" : "";
    AttemptEnd end = Ended(JobState::kFailed, ended, "time limit" + limit + WarningNote(in, rec));
    end.exit_code = rec.exit_code;
    end.signal = rec.signal;
    return end;
  }
  // Neither an exit code nor a signal: what ended it is all there is to say (a gate's process
  // that ended inside its block).
  if (!rec.exit_code && !rec.signal && !rec.error.empty()) {
    return Ended(JobState::kFailed, ended, rec.error);
  }
  if (rec.exit_code && *rec.exit_code == 0) {
    AttemptEnd end = Ended(JobState::kSucceeded, ended, "exit code 0");
    end.exit_code = 0;
    return end;
  }
  std::string failure = rec.signal ? "killed by " + SignalName(*rec.signal)
                                   : fmt::format("exit code {}", rec.exit_code.value_or(-1));
  // The host memory limit, not the GPU's: a retry would only meet the same limit.
  if (rec.mem_limit_hit > 0) {
    AttemptEnd end = Ended(JobState::kFailed, ended,
                           fmt::format("host memory limit {} reached (--mem-limit); {}",
                                       FormatBytes(rec.mem_limit_hit), failure));
    end.exit_code = rec.exit_code;
    end.signal = rec.signal;
    return end;
  }
  if (in.container && ContainerDidNotStart(rec.exit_code)) {
    std::string said = RuntimeError(in.log_tail);
    if (!said.empty()) {
      AttemptEnd end = Ended(JobState::kFailed, ended, "container did not start: " + said);
      end.exit_code = rec.exit_code;
      return end;
    }
  }
  std::string match = MatchOom(in.log_tail, in.oom_patterns);
  if (!match.empty()) {
    OutcomeInput at = in;
    at.now = ended;
    return OutOfMemory(at, rec, match, failure);
  }
  // The daemon checked the port was free when it placed the job; another program bound it
  // before the job's rendezvous did. Another port will do, so this is no fault of the job.
  if (in.master_port > 0 && PortTaken(in.log_tail) && in.port_retries_used < kPortRetries) {
    int retry = in.port_retries_used + 1;
    AttemptEnd end = Ended(JobState::kQueued, ended,
                           fmt::format("{}{} was taken by another program (Address already in "
                                       "use), {}",
                                       kPortTakenReason, in.master_port, failure));
    end.attempt_state = JobState::kFailed;
    end.exit_code = rec.exit_code;
    end.signal = rec.signal;
    end.job_reason = fmt::format(
        "requeued with another MASTER_PORT: port {} was taken by "
        "another program (retry {} of {})",
        in.master_port, retry, kPortRetries);
    return end;
  }
  AttemptEnd end = Ended(JobState::kFailed, ended, failure);
  end.exit_code = rec.exit_code;
  end.signal = rec.signal;
  return end;
}

}  // namespace trainq
