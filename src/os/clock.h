// Time behind an interface so tests move it by hand.
#pragma once

#include "trainq/job.h"

namespace trainq {

class Clock {
 public:
  virtual ~Clock() = default;
  virtual UnixMs Now() const = 0;  // wall clock, for records
};

class SystemClock final : public Clock {
 public:
  UnixMs Now() const override;
};

// Blocks the calling thread for `ms` milliseconds (a test hook's stall; nothing else sleeps).
void SleepMs(int64_t ms);

}  // namespace trainq
