#include "src/core/ports.h"

namespace trainq {

std::optional<int> PortPool::Allocate() {
  int candidate = first_;
  // held_ is sorted: the first gap at or after `first_` is the lowest free port.
  for (auto it = held_.lower_bound(first_); it != held_.end() && *it == candidate; ++it) {
    ++candidate;
  }
  if (candidate > last_) return std::nullopt;
  held_.insert(candidate);
  return candidate;
}

bool PortPool::Take(int port) {
  if (port < first_ || port > last_) return false;
  return held_.insert(port).second;
}

void PortPool::Release(int port) { held_.erase(port); }

}  // namespace trainq
