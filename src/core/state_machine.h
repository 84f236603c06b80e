// The job's life as one table of moves: each way a job's state changes, with the states it
// may leave and reach. Stores build their compare-and-set conditions (and the words of a
// refusal) from it, so the rules are written once; docs/architecture.md draws them.
//
//   submit -> queued -(placed)-> starting -(shim up)-> running -> succeeded | failed | cancelled
//             queued <-> blocked (dependencies)     starting|running -> queued (OOM retry)
//             done -> queued (`trainq retry`)        queued|blocked -> cancelled
#pragma once

#include <span>
#include <string>

#include "trainq/job.h"

namespace trainq {

enum class Move {
  kStart,          // queued -> starting: an attempt is placed (Store::StartAttempt)
  kRun,            // starting -> running: its shim runs (MarkRunning)
  kFinish,         // starting|running -> queued (retry), succeeded, failed, cancelled
  kCancelWaiting,  // queued|blocked -> cancelled
  kRequeue,        // succeeded|failed|cancelled -> queued (`trainq retry`)
  kResolve,        // blocked -> queued|cancelled: its dependencies were judged
  kBlock,          // queued -> blocked: a retried job's dependencies are open again
};

std::span<const JobState> MoveFrom(Move move);
bool MoveAllowed(Move move, JobState from, JobState to);
// "starting or running": the states a refusal expected.
std::string StatesText(std::span<const JobState> states);

}  // namespace trainq
