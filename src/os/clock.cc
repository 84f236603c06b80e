#include "src/os/clock.h"

#include <chrono>

namespace trainq {

UnixMs SystemClock::Now() const {
  using namespace std::chrono;
  return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

}  // namespace trainq
