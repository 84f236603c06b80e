#include "src/core/ports.h"

namespace trainq {

std::optional<int> PortPool::Allocate(const std::function<bool(int)>& usable) {
  for (int candidate = first_; candidate <= last_; ++candidate) {
    if (held_.count(candidate) || (usable && !usable(candidate))) continue;
    held_.insert(candidate);
    return candidate;
  }
  return std::nullopt;
}

bool PortPool::Take(int port) {
  if (port < first_ || port > last_) return false;
  return held_.insert(port).second;
}

void PortPool::Release(int port) { held_.erase(port); }

}  // namespace trainq
