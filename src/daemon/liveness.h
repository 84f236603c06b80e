// What tells a cluster node's shims "this node is alive and in the cluster" (self-fencing,
// docs/cluster.md): the fence stamp, written by a thread of its own so that no slow request
// on the event loop can let it lapse, and a watchdog of that loop.
//
// Each round (every heartbeat interval) the thread:
// - stamps the time of the loop's last heartbeat the store accepted, when it is recent;
// - else heartbeats itself, on a connection of its own, with the loop's latest record, and
//   stamps on success (a loop stuck in a request leaves its jobs running and its node alive);
// - else, the store being out of its reach, asks the peers whether they see the store and
//   stamps while more than half of the nodes, itself included, have had none for `quiet`
//   (quorum.h): nobody can place its jobs elsewhere then. Otherwise it stamps nothing, and
//   the shims stop their jobs when the last stamp is fence_after old, as a node cut off must.
// It also logs a loop that has made no progress for a while, with what the loop was doing.
//
// Thread: Offer*, LoopBeat, LoopAlive and NoStoreMs from the loop; Round from the thread (or
// a test). The parts' functions run on the thread and must be safe there.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "src/core/quorum.h"
#include "src/store/cluster.h"

namespace trainq {

// What a peer said of the store (GET /v1/cluster/store).
struct PeerView {
  int64_t no_store_ms = 0;  // how long it has had no store; 0 while it has one
  int nodes = 0;            // how many nodes it counts in the cluster
};

struct Peer {
  std::string name;
  std::string api_url;
};

// What the event loop is doing now, for the watchdog's log line: static strings only (a
// route's method and pattern, a timer's name). Cheap enough to set on every request.
void SetLoopActivity(const char* what, const char* detail = "");
std::string LoopActivity();

class Liveness {
 public:
  struct Parts {
    QuorumTimes times;
    int64_t heartbeat_interval_ms = 0;
    int64_t fence_after_ms = 0;
    int64_t stall_ms = 0;  // a loop without progress this long is logged
    // Heartbeats `record` on a connection of the thread's own.
    std::function<Result<UnixMs>(const NodeRecord& record)> renew;
    // Asks one peer, answering within `timeout_ms`.
    std::function<Result<PeerView>(const Peer& peer, int64_t timeout_ms)> ask;
    std::function<Status(int64_t renewed_at_ms)> stamp;  // WriteFenceStamp
    std::function<int64_t()> now;                        // BootClockMs
  };
  explicit Liveness(Parts parts);
  ~Liveness();
  Liveness(const Liveness&) = delete;
  Liveness& operator=(const Liveness&) = delete;

  // Runs Round every heartbeat interval on a thread of its own until destroyed. Without it
  // (unit tests) LoopBeat stamps at once, as the loop did before.
  void Start();

  // The loop's latest record of the node, for the thread's own heartbeats.
  void OfferRecord(NodeRecord record);
  // The other nodes, not lost, as the loop last read them.
  void OfferPeers(std::vector<Peer> peers);
  // The loop's heartbeat sent at `sent_at_ms` (BootClockMs, read before sending) was accepted.
  void LoopBeat(int64_t sent_at_ms);
  // The loop runs (its timer fired).
  void LoopAlive();
  // How long this node has had no store (0 while it has one): what it tells its peers.
  int64_t NoStoreMs() const;
  int Nodes() const;

  void Round();

 private:
  void Stamp(int64_t at_ms);
  void CheckLoop(int64_t now);
  // Asks every peer at once; the views that came back within round_ms.
  std::vector<std::optional<PeerView>> AskPeers(const std::vector<Peer>& peers);
  void OutageRound(int64_t now);

  Parts p_;
  mutable std::mutex mu_;
  NodeRecord record_;                    // guarded by mu_
  std::vector<Peer> peers_;              // guarded by mu_
  std::optional<int64_t> loop_sent_at_;  // guarded by mu_
  int64_t stamped_ = -1;                 // the thread's (or, unthreaded, the loop's)
  std::atomic<int64_t> contact_at_;      // the last heartbeat the store accepted, either side's
  std::atomic<int64_t> loop_at_;         // the loop's last sign of life
  bool stall_logged_ = false;
  enum class Said { kNothing, kOwnBeat, kOutage, kCutOff };
  Said said_ = Said::kNothing;  // logged once per change
  bool threaded_ = false;
  bool stopping_ = false;  // guarded by mu_
  std::condition_variable wake_;
  std::thread thread_;
};

}  // namespace trainq
