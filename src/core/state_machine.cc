#include "src/core/state_machine.h"

#include <algorithm>
#include <array>

namespace trainq {

namespace {

using S = JobState;

struct Rule {
  std::span<const S> from;
  std::span<const S> to;
};

constexpr S kQueued[] = {S::kQueued};
constexpr S kStarting[] = {S::kStarting};
constexpr S kRunning[] = {S::kRunning};
constexpr S kBlocked[] = {S::kBlocked};
constexpr S kCancelled[] = {S::kCancelled};
constexpr S kActive[] = {S::kStarting, S::kRunning};
constexpr S kWaiting[] = {S::kQueued, S::kBlocked};
constexpr S kDone[] = {S::kSucceeded, S::kFailed, S::kCancelled};
constexpr S kEnds[] = {S::kQueued, S::kSucceeded, S::kFailed, S::kCancelled};
constexpr S kResolved[] = {S::kQueued, S::kCancelled};

Rule RuleOf(Move move) {
  switch (move) {
    case Move::kStart:
      return {kQueued, kStarting};
    case Move::kRun:
      return {kStarting, kRunning};
    case Move::kFinish:
      return {kActive, kEnds};
    case Move::kCancelWaiting:
      return {kWaiting, kCancelled};
    case Move::kRequeue:
      return {kDone, kQueued};
    case Move::kResolve:
      return {kBlocked, kResolved};
    case Move::kBlock:
      return {kQueued, kBlocked};
  }
  return {};
}

bool Contains(std::span<const S> states, S s) {
  return std::find(states.begin(), states.end(), s) != states.end();
}

}  // namespace

std::span<const JobState> MoveFrom(Move move) { return RuleOf(move).from; }

bool MoveAllowed(Move move, JobState from, JobState to) {
  Rule rule = RuleOf(move);
  return Contains(rule.from, from) && Contains(rule.to, to);
}

std::string StatesText(std::span<const JobState> states) {
  std::string out;
  for (size_t i = 0; i < states.size(); ++i) {
    if (i > 0) out += i + 1 == states.size() ? " or " : ", ";
    out += StateName(states[i]);
  }
  return out;
}

}  // namespace trainq
