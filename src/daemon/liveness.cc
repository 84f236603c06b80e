// The fence stamp's own thread and the loop's watchdog (liveness.h).
#include "src/daemon/liveness.h"

#include <algorithm>
#include <chrono>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace trainq {

namespace {

std::atomic<const char*> g_activity{"idle"};
std::atomic<const char*> g_detail{""};

}  // namespace

void SetLoopActivity(const char* what, const char* detail) {
  g_activity.store(what, std::memory_order_relaxed);
  g_detail.store(detail, std::memory_order_relaxed);
}

std::string LoopActivity() {
  std::string what = g_activity.load(std::memory_order_relaxed);
  std::string detail = g_detail.load(std::memory_order_relaxed);
  return detail.empty() ? what : what + " " + detail;
}

Liveness::Liveness(Parts parts) : p_(std::move(parts)), contact_at_(p_.now()), loop_at_(p_.now()) {}

Liveness::~Liveness() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Liveness::Start() {
  threaded_ = true;
  thread_ = std::thread([this] {
    std::unique_lock lock(mu_);
    while (!stopping_) {
      lock.unlock();
      Round();
      lock.lock();
      wake_.wait_for(lock, std::chrono::milliseconds(p_.heartbeat_interval_ms),
                     [this] { return stopping_; });
    }
  });
}

void Liveness::OfferRecord(NodeRecord record) {
  std::lock_guard lock(mu_);
  record_ = std::move(record);
}

void Liveness::OfferPeers(std::vector<Peer> peers) {
  std::lock_guard lock(mu_);
  peers_ = std::move(peers);
}

void Liveness::LoopBeat(int64_t sent_at_ms) {
  // The stamp counts from the send, the store's absence from the answer: the heartbeat landed
  // between the two, and each side is judged by the bound that is safe for it.
  contact_at_.store(std::max(contact_at_.load(), p_.now()));
  {
    std::lock_guard lock(mu_);
    loop_sent_at_ = std::max(loop_sent_at_.value_or(sent_at_ms), sent_at_ms);
  }
  if (!threaded_) Stamp(sent_at_ms);
}

void Liveness::LoopAlive() { loop_at_.store(p_.now()); }

int64_t Liveness::NoStoreMs() const {
  int64_t since = p_.now() - contact_at_.load();
  // Heartbeats come every interval: only a longer silence is an absence.
  return since > 2 * p_.heartbeat_interval_ms ? since : 0;
}

int Liveness::Nodes() const {
  std::lock_guard lock(mu_);
  return static_cast<int>(peers_.size()) + 1;
}

void Liveness::Stamp(int64_t at_ms) {
  // Never backwards: the loop's beat may be older than the thread's own.
  if (at_ms <= stamped_) return;
  if (Status st = p_.stamp(at_ms); !st.ok()) {
    spdlog::error("fence stamp: {}", st.message());
    return;
  }
  stamped_ = at_ms;
}

void Liveness::CheckLoop(int64_t now) {
  int64_t quiet = now - loop_at_.load();
  if (quiet > p_.stall_ms && !stall_logged_) {
    spdlog::warn(
        "event loop: no progress for {:.1f} s, busy with {}; running jobs are not "
        "affected, this node's heartbeat goes on from its own thread",
        static_cast<double>(quiet) / 1000, LoopActivity());
    stall_logged_ = true;
  } else if (quiet <= p_.stall_ms && stall_logged_) {
    spdlog::info("event loop: making progress again");
    stall_logged_ = false;
  }
}

void Liveness::Round() {
  int64_t now = p_.now();
  CheckLoop(now);
  std::optional<int64_t> loop_sent;
  NodeRecord record;
  {
    std::lock_guard lock(mu_);
    loop_sent = loop_sent_at_;
    record = record_;
  }
  if (loop_sent && now - *loop_sent <= 2 * p_.heartbeat_interval_ms) {
    if (said_ != Said::kNothing) spdlog::info("heartbeat: the event loop beats again");
    said_ = Said::kNothing;
    return Stamp(*loop_sent);
  }
  if (record.name.empty()) return;  // the loop has not reported yet
  // The loop is late or cannot reach the store: beat from here. Read before sending, as the
  // loop does: the stamp is never fresher than what the store holds.
  Result<UnixMs> beat = p_.renew(record);
  if (beat.ok()) {
    contact_at_.store(std::max(contact_at_.load(), p_.now()));
    if (said_ != Said::kOwnBeat) {
      spdlog::warn("heartbeat: renewed by the liveness thread; the event loop is late ({})",
                   LoopActivity());
    }
    said_ = Said::kOwnBeat;
    return Stamp(now);
  }
  OutageRound(now);
}

std::vector<std::optional<PeerView>> Liveness::AskPeers(const std::vector<Peer>& peers) {
  std::vector<std::optional<PeerView>> views(peers.size());
  std::vector<std::thread> asks;
  int64_t began = p_.now();
  for (size_t i = 0; i < peers.size(); ++i) {
    asks.emplace_back([this, &peers, &views, i, began] {
      Result<PeerView> v = p_.ask(peers[i], p_.times.round_ms);
      // An answer later than the round's end may describe a store that came back since.
      if (v.ok() && p_.now() - began <= p_.times.round_ms) views[i] = *v;
    });
  }
  for (std::thread& t : asks) t.join();
  return views;
}

void Liveness::OutageRound(int64_t now) {
  int64_t quiet = now - contact_at_.load();
  std::vector<Peer> peers;
  {
    std::lock_guard lock(mu_);
    peers = peers_;
  }
  // Until this node has been without a store for `quiet`, its last stamp still holds; and
  // where the times leave no room to learn of an outage, the node fences as if cut off.
  if (quiet <= p_.times.quiet_ms || !p_.times.outage_possible) {
    if (!p_.times.outage_possible && said_ != Said::kCutOff) {
      spdlog::error(
          "heartbeat: the store is unreachable; this node's jobs stop themselves {} ms "
          "after the last heartbeat (node_timeout is too short beside "
          "heartbeat_interval for the nodes to tell an outage of the store)",
          p_.fence_after_ms);
      said_ = Said::kCutOff;
    }
    return;
  }
  std::vector<std::optional<PeerView>> views = AskPeers(peers);
  int nodes = static_cast<int>(peers.size()) + 1;
  int no_store = 1;  // this node
  int answered = 0;
  for (const std::optional<PeerView>& v : views) {
    if (!v) continue;
    ++answered;
    nodes = std::max(nodes, v->nodes);
    if (v->no_store_ms > p_.times.quiet_ms) ++no_store;
  }
  if (StoreDownForMost(no_store, nodes)) {
    if (said_ != Said::kOutage) {
      spdlog::warn(
          "heartbeat: the store is unreachable for {} of {} nodes: an outage of the "
          "store, not of this node; running jobs go on",
          no_store, nodes);
    }
    said_ = Said::kOutage;
    return Stamp(now);
  }
  if (said_ != Said::kCutOff) {
    spdlog::error(
        "heartbeat: this node cannot reach the store while the others can ({} of {} "
        "peers answered, {} without a store): cut off, its jobs stop themselves {} ms "
        "after its last heartbeat",
        answered, peers.size(), no_store - 1, p_.fence_after_ms);
  }
  said_ = Said::kCutOff;
}

}  // namespace trainq
