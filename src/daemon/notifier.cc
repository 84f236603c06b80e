#include "src/daemon/notifier.h"

#include <algorithm>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "src/os/run_dir.h"

namespace trainq {

using json = nlohmann::json;

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

Notifier::Notifier(std::string dir, DeliverFn deliver, NotifierOptions options)
    : dir_(std::move(dir)), deliver_(std::move(deliver)), options_(options) {}

Notifier::~Notifier() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

Status Notifier::Start() {
  TRAINQ_RETURN_IF_ERROR(MakeDirs(dir_));
  Result<std::vector<std::string>> names = ListFiles(dir_);
  if (!names.ok()) return names.status();
  auto now = std::chrono::steady_clock::now();
  for (const std::string& name : *names) {
    if (!name.ends_with(".json")) continue;  // a temp file a crash left
    std::string path = dir_ + "/" + name;
    Result<std::string> text = ReadFile(path);
    Result<Delivery> d = text.ok() ? DeliveryFromText(*text) : Result<Delivery>(text.status());
    if (!d.ok()) {
      spdlog::warn("notification {}: {}; left as it is", path, d.status().message());
      continue;
    }
    items_.push_back({path, std::move(*d), 0, now});
  }
  if (!items_.empty()) spdlog::info("notifications: {} pending from before", items_.size());
  thread_ = std::thread([this] { Run(); });
  return Status::Ok();
}

Status Notifier::Enqueue(const std::string& key, const Delivery& d) {
  std::string path = fmt::format("{}/{}.json", dir_, key);
  TRAINQ_RETURN_IF_ERROR(WriteFileAtomic(path, DeliveryToText(d)));
  {
    std::lock_guard lock(mu_);
    std::erase_if(items_, [&](const Item& i) { return i.path == path; });
    items_.push_back({path, d, 0, std::chrono::steady_clock::now()});
  }
  cv_.notify_all();
  return Status::Ok();
}

size_t Notifier::Pending() {
  std::lock_guard lock(mu_);
  return items_.size() + in_flight_;
}

bool Notifier::WaitIdle(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  return cv_.wait_for(lock, timeout, [this] { return items_.empty() && in_flight_ == 0; });
}

void Notifier::Run() {
  std::unique_lock lock(mu_);
  while (!stop_) {
    auto next = std::min_element(items_.begin(), items_.end(),
                                 [](const Item& a, const Item& b) { return a.due < b.due; });
    if (next == items_.end()) {
      cv_.wait(lock);
      continue;
    }
    if (next->due > std::chrono::steady_clock::now()) {
      cv_.wait_until(lock, next->due);
      continue;
    }
    Item item = std::move(*next);
    items_.erase(next);
    ++in_flight_;
    lock.unlock();
    Status result = deliver_(item.delivery);
    lock.lock();
    --in_flight_;
    Finish(std::move(item), result);
    cv_.notify_all();
  }
}

// Called with mu_ held.
void Notifier::Finish(Item item, const Status& result) {
  if (result.ok()) {
    if (Status st = RemoveFile(item.path); !st.ok()) spdlog::warn("notification: {}", st.message());
    return;
  }
  ++item.tries;
  if (item.tries >= options_.max_tries) {
    spdlog::error("notification to {} given up after {} tries: {}", item.delivery.target,
                  item.tries, result.message());
    (void)RemoveFile(item.path);
    return;
  }
  int64_t backoff = options_.first_backoff_ms << std::min(item.tries - 1, 20);
  backoff = std::min(backoff, options_.max_backoff_ms);
  spdlog::warn("notification to {} failed ({}); trying again in {} ms", item.delivery.target,
               result.message(), backoff);
  item.due = std::chrono::steady_clock::now() + std::chrono::milliseconds(backoff);
  items_.push_back(std::move(item));
}

}  // namespace trainq
