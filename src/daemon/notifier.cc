#include "src/daemon/notifier.h"

#include <algorithm>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "src/core/endpoint.h"
#include "src/os/run_dir.h"

namespace trainq {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

std::string DeliveryToText(const Delivery& d) {
  json doc = {{"kind", d.kind == Delivery::Kind::kMail ? "mail" : "webhook"},
              {"target", d.target},
              {"body", d.body}};
  return doc.dump(-1, ' ', false, json::error_handler_t::replace);
}

Result<Delivery> DeliveryFromText(const std::string& text) {
  json doc = json::parse(text, nullptr, false);
  bool shaped = doc.is_object() && doc.value("kind", json()).is_string() &&
                doc.value("target", json()).is_string() && doc.value("body", json()).is_string();
  if (!shaped) return Status::Invalid("not a delivery trainq wrote");
  std::string kind = doc["kind"];
  if (kind != "mail" && kind != "webhook") return Status::Invalid("unknown delivery kind " + kind);
  return Delivery{kind == "mail" ? Delivery::Kind::kMail : Delivery::Kind::kWebhook, doc["target"],
                  doc["body"]};
}

namespace {

std::string Lower(std::string s) {
  for (char& c : s) c = (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
  return s;
}

}  // namespace

std::string DeliveryTarget(const Delivery& d) {
  if (d.kind == Delivery::Kind::kMail) return "mail";
  Result<WebhookUrl> url = ParseWebhookUrl(d.target, "--notify");
  return url.ok() ? Lower(url->endpoint.Describe()) : d.target;
}

struct Notifier::Core {
  struct Item {
    std::string path;
    Delivery delivery;
    std::string target;  // DeliveryTarget(delivery)
    uint64_t seq = 0;    // enqueue order: the oldest due goes first
    int tries = 0;
    Clock::time_point due{};
  };
  struct Target {
    int in_flight = 0;
    int failures = 0;  // pauses in a row; 0: healthy
    Clock::time_point paused_until{};
  };

  Core(std::string d, DeliverFn fn, NotifierOptions o)
      : dir(std::move(d)), deliver(std::move(fn)), options(o) {}

  void Add(std::string path, Delivery d);
  void Work();
  std::vector<Item>::iterator NextDue(Clock::time_point now, Clock::time_point* wake);
  void Finish(Item item, const Status& result);
  void Failed(Item item, const Status& result);
  void GiveUp(const Item& item, const std::string& why);
  bool Waiting(const std::string& path) const;
  void Forget(const std::string& target);
  std::chrono::milliseconds Backoff(int failures) const;

  const std::string dir;
  const DeliverFn deliver;
  const NotifierOptions options;
  std::mutex mu;
  std::condition_variable cv;
  std::vector<Item> items;                // waiting, not in flight; guarded by mu
  std::map<std::string, Target> targets;  // guarded by mu
  size_t in_flight = 0;                   // guarded by mu
  uint64_t next_seq = 0;                  // guarded by mu
  int workers = 0;                        // threads not yet ended; guarded by mu
  bool stop = false;                      // no more deliveries start; guarded by mu
  bool abandoned = false;  // the Notifier is gone: results are not recorded; guarded by mu
};

// Called with mu held.
void Notifier::Core::Add(std::string path, Delivery d) {
  std::erase_if(items, [&](const Item& i) { return i.path == path; });
  std::string target = DeliveryTarget(d);
  items.push_back({std::move(path), std::move(d), std::move(target), next_seq++, 0, Clock::now()});
}

std::chrono::milliseconds Notifier::Core::Backoff(int failures) const {
  int64_t ms = options.first_backoff_ms << std::clamp(failures - 1, 0, 20);
  return std::chrono::milliseconds(std::min(ms, options.max_backoff_ms));
}

// The oldest item that may go now, or items.end() with `wake` lowered to when one may.
// Called with mu held.
std::vector<Notifier::Core::Item>::iterator Notifier::Core::NextDue(Clock::time_point now,
                                                                    Clock::time_point* wake) {
  auto best = items.end();
  for (auto it = items.begin(); it != items.end(); ++it) {
    const Target& t = targets[it->target];
    // A failing target gets one probe at a time until one gets through.
    int limit = t.failures > 0 ? 1 : std::max(options.per_target, 1);
    if (t.in_flight >= limit) continue;  // its end wakes the threads
    Clock::time_point ready = std::max(it->due, t.paused_until);
    if (ready > now) {
      *wake = std::min(*wake, ready);
      continue;
    }
    if (best == items.end() || it->seq < best->seq) best = it;
  }
  return best;
}

void Notifier::Core::Work() {
  std::unique_lock lock(mu);
  while (!stop) {
    Clock::time_point wake = Clock::time_point::max();
    auto next = NextDue(Clock::now(), &wake);
    if (next == items.end()) {
      if (wake == Clock::time_point::max()) {
        cv.wait(lock);
      } else {
        cv.wait_until(lock, wake);
      }
      continue;
    }
    Item item = std::move(*next);
    items.erase(next);
    ++in_flight;
    ++targets[item.target].in_flight;
    lock.unlock();
    Status result = deliver(item.delivery);
    lock.lock();
    --in_flight;
    std::string target = item.target;
    --targets[target].in_flight;
    if (!abandoned) Finish(std::move(item), result);
    Forget(target);
    cv.notify_all();
  }
  --workers;
  cv.notify_all();
}

// Whether a newer delivery under `path` waits (Enqueue replaced the one in flight). Called
// with mu held.
bool Notifier::Core::Waiting(const std::string& path) const {
  return std::any_of(items.begin(), items.end(), [&](const Item& i) { return i.path == path; });
}

// Drops a healthy, idle target's entry, so targets seen once do not pile up (a missing entry
// reads as healthy). Called with mu held.
void Notifier::Core::Forget(const std::string& target) {
  auto t = targets.find(target);
  if (t != targets.end() && t->second.in_flight == 0 && t->second.failures == 0) targets.erase(t);
}

// Called with mu held.
void Notifier::Core::Finish(Item item, const Status& result) {
  if (!result.ok()) return Failed(std::move(item), result);
  Target& t = targets[item.target];
  t.failures = 0;
  t.paused_until = {};
  if (Waiting(item.path)) return;  // its file is the newer one's now
  if (Status st = RemoveFile(item.path); !st.ok()) spdlog::warn("notification: {}", st.message());
}

// Called with mu held.
void Notifier::Core::Failed(Item item, const Status& result) {
  if (Waiting(item.path)) return;  // replaced while in flight
  ++item.tries;
  Target& t = targets[item.target];
  Clock::time_point now = Clock::now();
  // One pause per round: deliveries in flight together that all fail count once.
  if (now >= t.paused_until) {
    ++t.failures;
    t.paused_until = now + Backoff(t.failures);
  }
  if (t.failures >= options.max_tries) {
    // Dead for about an hour: what waits for it is given up with this one.
    std::string why = fmt::format("with {} ({} failures in a row): {}", item.target, t.failures,
                                  result.message());
    GiveUp(item, why);
    for (const Item& other : items) {
      if (other.target == item.target) GiveUp(other, why);
    }
    std::erase_if(items, [&](const Item& i) { return i.target == item.target; });
    t = Target{.in_flight = t.in_flight};
    return;
  }
  if (item.tries >= options.max_tries) {
    return GiveUp(item, fmt::format("after {} tries: {}", item.tries, result.message()));
  }
  item.due = now + Backoff(item.tries);
  auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::max(item.due, t.paused_until) - now);
  spdlog::warn("notification to {} failed ({}); trying again in {} ms", item.delivery.target,
               result.message(), wait.count());
  items.push_back(std::move(item));
}

// Called with mu held.
void Notifier::Core::GiveUp(const Item& item, const std::string& why) {
  spdlog::error("notification to {} given up {}", item.delivery.target, why);
  (void)RemoveFile(item.path);
}

Notifier::Notifier(std::string dir, DeliverFn deliver, NotifierOptions options)
    : core_(std::make_shared<Core>(std::move(dir), std::move(deliver), options)) {}

Notifier::~Notifier() {
  std::unique_lock lock(core_->mu);
  core_->stop = true;
  core_->cv.notify_all();
  bool ended = core_->cv.wait_for(lock, std::chrono::milliseconds(core_->options.stop_wait_ms),
                                  [this] { return core_->workers == 0; });
  core_->abandoned = true;
  if (!ended) {
    spdlog::warn(
        "notifications: {} still in flight left unfinished; they are sent again after "
        "the next start",
        core_->in_flight);
  }
}

Status Notifier::Start() {
  TRAINQ_RETURN_IF_ERROR(MakeDirs(core_->dir));
  Result<std::vector<std::string>> names = ListFiles(core_->dir);
  if (!names.ok()) return names.status();
  std::lock_guard lock(core_->mu);
  for (const std::string& name : *names) {
    if (!name.ends_with(".json")) continue;  // a temp file a crash left
    std::string path = core_->dir + "/" + name;
    Result<std::string> text = ReadFile(path);
    Result<Delivery> d = text.ok() ? DeliveryFromText(*text) : Result<Delivery>(text.status());
    if (!d.ok()) {
      spdlog::warn("notification {}: {}; left as it is", path, d.status().message());
      continue;
    }
    core_->Add(path, std::move(*d));
  }
  if (!core_->items.empty()) {
    spdlog::info("notifications: {} pending from before", core_->items.size());
  }
  // Detached, each holding the core: one stuck in a delivery must not hold up the
  // destructor, and finds the core alive when it comes back.
  for (int i = 0; i < std::max(core_->options.workers, 1); ++i) {
    ++core_->workers;
    std::thread([core = core_] { core->Work(); }).detach();
  }
  return Status::Ok();
}

Status Notifier::Enqueue(const std::string& key, const Delivery& d) {
  std::string path = fmt::format("{}/{}.json", core_->dir, key);
  TRAINQ_RETURN_IF_ERROR(WriteFileAtomic(path, DeliveryToText(d)));
  {
    std::lock_guard lock(core_->mu);
    core_->Add(path, d);
  }
  core_->cv.notify_all();
  return Status::Ok();
}

size_t Notifier::Pending() {
  std::lock_guard lock(core_->mu);
  return core_->items.size() + core_->in_flight;
}

bool Notifier::WaitIdle(std::chrono::milliseconds timeout) {
  std::unique_lock lock(core_->mu);
  return core_->cv.wait_for(lock, timeout,
                            [this] { return core_->items.empty() && core_->in_flight == 0; });
}

}  // namespace trainq
