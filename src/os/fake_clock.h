// A clock the test moves by hand: a day of scheduling runs in a millisecond.
#pragma once

#include "src/os/clock.h"

namespace trainq {

class FakeClock final : public Clock {
 public:
  explicit FakeClock(UnixMs now) : now_(now) {}
  UnixMs Now() const override { return now_; }
  void Advance(int64_t ms) { now_ += ms; }
  void Set(UnixMs now) { now_ = now; }

 private:
  UnixMs now_;
};

}  // namespace trainq
