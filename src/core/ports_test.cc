#include "src/core/ports.h"

#include <gtest/gtest.h>

#include <map>
#include <random>

namespace trainq {
namespace {

TEST(PortPoolTest, AllocatesTheLowestFreePortAndReusesReleasedOnes) {
  PortPool pool(29500, 29503);
  EXPECT_EQ(pool.Allocate(), 29500);
  EXPECT_EQ(pool.Allocate(), 29501);
  EXPECT_EQ(pool.Allocate(), 29502);
  pool.Release(29501);
  EXPECT_FALSE(pool.Held(29501));
  EXPECT_EQ(pool.Allocate(), 29501);
  EXPECT_EQ(pool.Allocate(), 29503);
  EXPECT_EQ(pool.Allocate(), std::nullopt) << "the range is used up";
  EXPECT_EQ(pool.held_count(), 4u);
  pool.Release(29502);
  EXPECT_EQ(pool.Allocate(), 29502);
}

TEST(PortPoolTest, SkipsPortsInUseByOtherPrograms) {
  PortPool pool(29500, 29503);
  auto busy = [](int port) { return port != 29500 && port != 29502; };
  EXPECT_EQ(pool.Allocate(busy), 29501);
  EXPECT_EQ(pool.Allocate(busy), 29503);
  EXPECT_EQ(pool.Allocate(busy), std::nullopt) << "the free ones are held, the rest in use";
  EXPECT_FALSE(pool.Held(29500));
  EXPECT_EQ(pool.Allocate(), 29500) << "no longer in use";
}

TEST(PortPoolTest, ReleasingAPortNotHeldChangesNothing) {
  PortPool pool(100, 101);
  ASSERT_EQ(pool.Allocate(), 100);
  pool.Release(101);
  pool.Release(5);
  pool.Release(100);
  pool.Release(100);
  EXPECT_EQ(pool.held_count(), 0u);
  EXPECT_EQ(pool.Allocate(), 100);
}

TEST(PortPoolTest, EmptyAndSingleRanges) {
  PortPool empty(10, 9);
  EXPECT_EQ(empty.Allocate(), std::nullopt);
  PortPool one(10, 10);
  EXPECT_EQ(one.Allocate(), 10);
  EXPECT_EQ(one.Allocate(), std::nullopt);
}

// After a restart the daemon takes the ports of the attempts it re-adopts; new attempts
// must then get other ports.
TEST(PortPoolTest, RebuiltFromLiveAttemptsNeverHandsTheirPortsOut) {
  PortPool before(29500, 29509);
  std::vector<int> live;
  for (int i = 0; i < 6; ++i) live.push_back(*before.Allocate());
  before.Release(live[1]);
  before.Release(live[4]);
  live = {live[0], live[2], live[3], live[5]};  // 29500, 29502, 29503, 29505 still run

  PortPool after(29500, 29509);
  for (int port : live) EXPECT_TRUE(after.Take(port));
  EXPECT_FALSE(after.Take(live[0])) << "a port is held once";
  EXPECT_FALSE(after.Take(29499)) << "outside the range";
  EXPECT_FALSE(after.Take(29510));
  std::vector<int> fresh;
  while (auto port = after.Allocate()) fresh.push_back(*port);
  EXPECT_EQ(fresh, (std::vector<int>{29501, 29504, 29506, 29507, 29508, 29509}));
}

// Random starts and ends: no port is ever held by two attempts at once, and a port is
// refused only when the whole range is held.
TEST(PortPoolTest, NeverDoubleIssuedUnderRandomChurn) {
  constexpr int kFirst = 40000, kLast = 40015;
  PortPool pool(kFirst, kLast);
  std::map<int, int> holder;  // port -> attempt
  std::mt19937 rng(42);
  for (int step = 0; step < 5000; ++step) {
    if (rng() % 3 != 0 || holder.empty()) {
      std::optional<int> port = pool.Allocate();
      if (!port) {
        EXPECT_EQ(holder.size(), static_cast<size_t>(kLast - kFirst + 1));
        continue;
      }
      ASSERT_GE(*port, kFirst);
      ASSERT_LE(*port, kLast);
      ASSERT_EQ(holder.count(*port), 0u) << "port " << *port << " issued twice";
      holder[*port] = step;
    } else {
      auto it = std::next(holder.begin(), static_cast<long>(rng() % holder.size()));
      pool.Release(it->first);
      holder.erase(it);
    }
    ASSERT_EQ(pool.held_count(), holder.size());
  }
}

}  // namespace
}  // namespace trainq
