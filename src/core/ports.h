// The MASTER_PORT pool of multi-GPU attempts on one node: a port is never held by two live
// attempts. Pure bookkeeping; the daemon allocates on start, releases when the attempt's
// shim is gone, and after a restart rebuilds the pool from the attempts it re-adopts (the
// port is stored with the attempt).
#pragma once

#include <functional>
#include <optional>
#include <set>

namespace trainq {

class PortPool {
 public:
  // The range [first, last]; empty when last < first.
  PortPool(int first, int last) : first_(first), last_(last) {}

  // The lowest port in the range that is neither held nor refused by `usable` (a port another
  // program listens on), now held; nullopt when there is none.
  std::optional<int> Allocate(const std::function<bool(int)>& usable = nullptr);
  // Marks `port` held (rebuilding after a restart). false when it is outside the range or
  // already held.
  bool Take(int port);
  // Frees `port`; a port not held is ignored (releasing twice is harmless).
  void Release(int port);

  bool Held(int port) const { return held_.count(port) > 0; }
  int first() const { return first_; }
  int last() const { return last_; }
  size_t held_count() const { return held_.size(); }

 private:
  int first_;
  int last_;
  std::set<int> held_;
};

}  // namespace trainq
