#include "src/core/state_machine.h"

#include <algorithm>
#include <iterator>
#include <set>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace trainq {
namespace {

using S = JobState;

constexpr S kAll[] = {S::kQueued,    S::kBlocked, S::kStarting, S::kRunning,
                      S::kSucceeded, S::kFailed,  S::kCancelled};

// The life of a job (docs/architecture.md), written out pair by pair; every pair not listed is
// refused.
const std::set<std::pair<S, S>> kAllowed = {
    {S::kQueued, S::kStarting},    {S::kQueued, S::kCancelled},  {S::kQueued, S::kBlocked},
    {S::kBlocked, S::kQueued},     {S::kBlocked, S::kCancelled}, {S::kStarting, S::kRunning},
    {S::kStarting, S::kSucceeded}, {S::kStarting, S::kFailed},   {S::kStarting, S::kCancelled},
    {S::kStarting, S::kQueued},    {S::kRunning, S::kSucceeded}, {S::kRunning, S::kFailed},
    {S::kRunning, S::kCancelled},  {S::kRunning, S::kQueued},    {S::kSucceeded, S::kQueued},
    {S::kFailed, S::kQueued},      {S::kCancelled, S::kQueued},
};

constexpr Move kEveryMove[] = {Move::kStart,   Move::kRun,     Move::kFinish, Move::kCancelWaiting,
                               Move::kRequeue, Move::kResolve, Move::kBlock};

// Whether any move leads from `from` to `to`.
bool AnyMoveAllows(S from, S to) {
  return std::any_of(std::begin(kEveryMove), std::end(kEveryMove),
                     [&](Move m) { return MoveAllowed(m, from, to); });
}

TEST(StateMachineTest, EveryPairMatchesTheDesign) {
  int allowed = 0;
  for (S from : kAll) {
    for (S to : kAll) {
      bool want = kAllowed.count({from, to}) == 1;
      EXPECT_EQ(AnyMoveAllows(from, to), want) << StateName(from) << " -> " << StateName(to);
      allowed += want ? 1 : 0;
    }
  }
  EXPECT_EQ(allowed, 17);
}

TEST(StateMachineTest, MovesNameTheirStates) {
  EXPECT_TRUE(MoveAllowed(Move::kFinish, S::kStarting, S::kQueued));
  EXPECT_FALSE(MoveAllowed(Move::kFinish, S::kQueued, S::kFailed));
  EXPECT_FALSE(MoveAllowed(Move::kResolve, S::kQueued, S::kBlocked));
  EXPECT_TRUE(MoveAllowed(Move::kBlock, S::kQueued, S::kBlocked));
  EXPECT_EQ(StatesText(MoveFrom(Move::kFinish)), "starting or running");
  EXPECT_EQ(StatesText(MoveFrom(Move::kRequeue)), "succeeded, failed or cancelled");
  EXPECT_EQ(StatesText(MoveFrom(Move::kStart)), "queued");
}

}  // namespace
}  // namespace trainq
