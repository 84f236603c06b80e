// Subscribe: a thread with its own connection in SUBSCRIBE mode. It polls the socket in
// short slices so that destroying the subscription stops it within one slice, and
// reconnects with backoff when the connection breaks.
#include <spdlog/spdlog.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <span>
#include <thread>

#include "src/os/system.h"
#include "src/store/redis/redis_store.h"

namespace trainq::redis {

namespace {

using Clock = std::chrono::steady_clock;
constexpr int kSliceMs = 100;
constexpr int kFirstBackoffMs = 100;
constexpr int kMaxBackoffMs = 5000;
// With no traffic for this long the connection is checked with a PING.
constexpr auto kIdlePing = std::chrono::seconds(5);

class Subscription final : public EventSubscription {
 public:
  Subscription(RedisTarget target, std::function<void(const std::string&)> on_event)
      : target_(std::move(target)), on_event_(std::move(on_event)) {
    thread_ = std::thread([this] { Loop(); });
  }
  ~Subscription() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    wake_.notify_all();
    thread_.join();
  }

 private:
  void Loop() {
    bool lost_before = false;
    int backoff = kFirstBackoffMs;
    while (!stopping()) {
      Connection conn(target_);
      Status st = Listen(conn, lost_before, backoff);
      if (stopping()) return;
      lost_before = true;
      spdlog::warn("cluster events: {}; reconnecting in {} ms", st.message(), backoff);
      std::unique_lock<std::mutex> lock(mu_);
      wake_.wait_for(lock, std::chrono::milliseconds(backoff), [this] { return stop_; });
      backoff = std::min(backoff * 2, kMaxBackoffMs);
    }
  }

  // Subscribes and hands events on until the connection fails (its Status) or stop.
  Status Listen(Connection& conn, bool lost_before, int& backoff) {
    TRAINQ_RETURN_IF_ERROR(conn.Connect());
    redisContext* c = conn.context();
    std::string channel = target_.prefix + "events";
    std::vector<std::string> argv = {"SUBSCRIBE", channel};
    Result<Reply> subscribed = conn.Command(argv);
    if (!subscribed.ok()) return subscribed.status();
    if (lost_before) spdlog::info("cluster events: {} reached again", conn.Where());
    // Also the first time: what was published before the subscription was live is missed.
    on_event_("reconnected");
    backoff = kFirstBackoffMs;
    Clock::time_point last = Clock::now();
    bool pinged = false;
    while (!stopping()) {
      int fd = c->fd;
      if (!WaitReadable(std::span<const int>(&fd, 1), kSliceMs).empty()) {
        if (redisBufferRead(c) != REDIS_OK) return Lost(conn, c);
        last = Clock::now();
        pinged = false;
        TRAINQ_RETURN_IF_ERROR(Deliver(conn, c));
        continue;
      }
      auto idle = Clock::now() - last;
      if (!pinged && idle > kIdlePing) {
        const char* ping[] = {"PING"};
        if (redisAppendCommandArgv(c, 1, ping, nullptr) != REDIS_OK) return Lost(conn, c);
        int done = 0;
        while (!done) {
          if (redisBufferWrite(c, &done) != REDIS_OK) return Lost(conn, c);
        }
        pinged = true;
      } else if (pinged && idle > kIdlePing + std::chrono::milliseconds(target_.timeout_ms)) {
        return Status::Unavailable("store unreachable: " + conn.Where() + ": no answer to PING");
      }
    }
    return Status::Ok();
  }

  Status Deliver(Connection& conn, redisContext* c) {
    for (;;) {
      void* raw = nullptr;
      if (redisGetReplyFromReader(c, &raw) != REDIS_OK) return Lost(conn, c);
      if (raw == nullptr) return Status::Ok();
      Reply reply(static_cast<redisReply*>(raw));
      const redisReply* r = reply.get();
      if (r->type == REDIS_REPLY_ARRAY && r->elements == 3 && Text(r->element[0]) == "message") {
        on_event_(std::string(Text(r->element[2])));
      }
    }
  }

  static Status Lost(Connection& conn, redisContext* c) {
    return Status::Unavailable("store unreachable: " + conn.Where() + ": " +
                               (c->errstr[0] ? c->errstr : "connection lost"));
  }

  bool stopping() {
    std::lock_guard<std::mutex> lock(mu_);
    return stop_;
  }

  RedisTarget target_;
  std::function<void(const std::string&)> on_event_;
  std::mutex mu_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace

std::unique_ptr<EventSubscription> RedisStore::Subscribe(
    std::function<void(const std::string& event)> on_event) {
  return std::make_unique<Subscription>(conn_.target(), std::move(on_event));
}

}  // namespace trainq::redis
