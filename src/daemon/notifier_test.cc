#include "src/daemon/notifier.h"

#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "src/os/proc_test_util.h"
#include "src/os/run_dir.h"

namespace trainq {
namespace {

using std::chrono::milliseconds;
using trainq::testing::TempDir;

// Records what it was asked to deliver; fails the first `failures` calls.
struct Receiver {
  std::mutex mu;
  std::vector<Delivery> got;
  std::atomic<int> calls{0};
  int failures = 0;
  DeliverFn Fn() {
    return [this](const Delivery& d) {
      int n = calls.fetch_add(1);
      if (n < failures) return Status::Unavailable("HTTP 503");
      std::lock_guard lock(mu);
      got.push_back(d);
      return Status::Ok();
    };
  }
};

// Whether `done` comes true within a bound far above what it takes on a loaded machine.
bool Eventually(const std::function<bool()>& done) {
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!done()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::yield();
  }
  return true;
}

NotifierOptions Fast() { return {.first_backoff_ms = 1, .max_backoff_ms = 4, .max_tries = 5}; }

TEST(NotifierTest, DeliversAndForgets) {
  TempDir dir;
  Receiver r;
  Notifier n(dir.path() + "/notify", r.Fn(), Fast());
  ASSERT_TRUE(n.Start().ok());
  ASSERT_TRUE(
      n.Enqueue("12-1-webhook", {Delivery::Kind::kWebhook, "http://h/x", "{\"id\":12}"}).ok());
  ASSERT_TRUE(n.WaitIdle(milliseconds(10000)));
  ASSERT_EQ(r.got.size(), 1u);
  EXPECT_EQ(r.got[0].body, "{\"id\":12}");
  EXPECT_TRUE(ListFiles(dir.path() + "/notify")->empty());
}

TEST(NotifierTest, RetriesAFailingReceiverWithBackoff) {
  TempDir dir;
  Receiver r;
  r.failures = 3;
  Notifier n(dir.path() + "/notify", r.Fn(), Fast());
  ASSERT_TRUE(n.Start().ok());
  ASSERT_TRUE(n.Enqueue("1-1-mail", {Delivery::Kind::kMail, "ada@lab", "Subject: x\n\nhi"}).ok());
  ASSERT_TRUE(n.WaitIdle(milliseconds(10000)));
  EXPECT_EQ(r.calls.load(), 4);
  ASSERT_EQ(r.got.size(), 1u);
  EXPECT_EQ(r.got[0].kind, Delivery::Kind::kMail);
}

TEST(NotifierTest, GivesUpAfterMaxTries) {
  TempDir dir;
  Receiver r;
  r.failures = 1000;
  Notifier n(dir.path() + "/notify", r.Fn(), Fast());
  ASSERT_TRUE(n.Start().ok());
  ASSERT_TRUE(n.Enqueue("2-1-webhook", {Delivery::Kind::kWebhook, "http://h/", "{}"}).ok());
  ASSERT_TRUE(n.WaitIdle(milliseconds(10000)));
  EXPECT_EQ(r.calls.load(), 5);
  EXPECT_TRUE(ListFiles(dir.path() + "/notify")->empty());
}

// A delivery still pending when the daemon stops is made by the next daemon.
TEST(NotifierTest, PendingSurvivesARestart) {
  TempDir dir;
  {
    Receiver down;
    down.failures = 1000;
    Notifier n(dir.path() + "/notify", down.Fn(),
               {.first_backoff_ms = 60000, .max_backoff_ms = 60000, .max_tries = 5});
    ASSERT_TRUE(n.Start().ok());
    ASSERT_TRUE(
        n.Enqueue("3-2-webhook", {Delivery::Kind::kWebhook, "http://h/", "{\"id\":3}"}).ok());
    while (down.calls.load() == 0) std::this_thread::yield();
  }
  EXPECT_EQ(ListFiles(dir.path() + "/notify")->size(), 1u);
  Receiver up;
  Notifier again(dir.path() + "/notify", up.Fn(), Fast());
  ASSERT_TRUE(again.Start().ok());
  ASSERT_TRUE(again.WaitIdle(milliseconds(10000)));
  ASSERT_EQ(up.got.size(), 1u);
  EXPECT_EQ(up.got[0].body, "{\"id\":3}");
  EXPECT_EQ(up.got[0].target, "http://h/");
}

TEST(NotifierTest, DeliveriesAreGroupedByTheirReceiver) {
  auto hook = [](std::string url) { return DeliveryTarget({Delivery::Kind::kWebhook, url, ""}); };
  auto mail = [](std::string to) { return DeliveryTarget({Delivery::Kind::kMail, to, ""}); };
  EXPECT_EQ(hook("http://Hooks.Example.org/a?x=1"), hook("http://hooks.example.org:80/b"));
  EXPECT_NE(hook("http://hooks.example.org/a"), hook("http://hooks.example.org:8080/a"));
  EXPECT_NE(hook("http://hooks.example.org/a"), hook("https://hooks.example.org/a"));
  // Every mail goes through the one sendmail.
  EXPECT_EQ(mail("ada@lab.example.org"), mail("ada"));
  EXPECT_NE(mail("ada@lab.example.org"), hook("http://lab.example.org/"));
}

// A receiver whose webhooks to host "dead" hang until it is opened, like a listener that
// accepts and never answers; every other target takes its deliveries at once. Held through
// a shared_ptr: a delivery left hanging by a destroyed Notifier still finds it.
struct Gate {
  std::mutex mu;
  std::condition_variable cv;
  bool open = false;
  bool dead_succeeds = false;  // once open: whether the hung deliveries then succeed
  int inside = 0;              // deliveries to "dead" now hanging
  int most_inside = 0;
  int dead_calls = 0;
  int returned = 0;                    // deliveries to "dead" that have come back
  std::vector<std::string> delivered;  // the other targets' URLs, in order

  static DeliverFn Fn(const std::shared_ptr<Gate>& gate) {
    return [gate](const Delivery& d) { return gate->Deliver(d); };
  }
  Status Deliver(const Delivery& d) {
    std::unique_lock lock(mu);
    if (!d.target.starts_with("http://dead")) {
      delivered.push_back(d.target);
      cv.notify_all();
      return Status::Ok();
    }
    ++dead_calls;
    most_inside = std::max(most_inside, ++inside);
    cv.notify_all();
    cv.wait(lock, [this] { return open; });
    --inside;
    ++returned;
    cv.notify_all();
    return dead_succeeds ? Status::Ok() : Status::Unavailable("timed out");
  }
  // Events, not time: each bound is far above what they take on a loaded machine.
  template <class Pred>
  bool Await(Pred pred) {
    std::unique_lock lock(mu);
    return cv.wait_for(lock, std::chrono::seconds(30), pred);
  }
  void Open() {
    std::lock_guard lock(mu);
    open = true;
    cv.notify_all();
  }
};

Delivery Hook(const std::string& url) { return {Delivery::Kind::kWebhook, url, "{}"}; }

// Twenty ends notifying a receiver that never answers, then another user's: the other is
// delivered while the dead one still holds its two slots, and no more than those.
TEST(NotifierTest, AHungReceiverHoldsOnlyItsOwnSlots) {
  TempDir dir;
  auto gate = std::make_shared<Gate>();
  Notifier n(dir.path() + "/notify", Gate::Fn(gate),
             {.first_backoff_ms = 1, .max_backoff_ms = 4, .workers = 4, .per_target = 2});
  ASSERT_TRUE(n.Start().ok());
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(n.Enqueue(fmt::format("{}-1-webhook", i), Hook("http://dead:8080/hook")).ok());
  }
  ASSERT_TRUE(gate->Await([&] { return gate->inside == 2; }));
  ASSERT_TRUE(n.Enqueue("99-1-webhook", Hook("http://alive/hook")).ok());
  ASSERT_TRUE(gate->Await([&] { return gate->delivered.size() == 1; }));
  {
    std::lock_guard lock(gate->mu);
    EXPECT_EQ(gate->delivered[0], "http://alive/hook");
    // Two workers were free all along, and the dead target's deliveries came first.
    EXPECT_EQ(gate->most_inside, 2);
    EXPECT_EQ(gate->dead_calls, 2);
  }
  EXPECT_TRUE(Eventually([&] { return n.Pending() == 20; }));
  gate->Open();
}

TEST(NotifierTest, AFailingReceiverIsPausedAsAWhole) {
  TempDir dir;
  std::mutex mu;
  std::map<std::string, int> calls;
  DeliverFn fn = [&](const Delivery& d) {
    std::lock_guard lock(mu);
    ++calls[d.target];
    return d.target.starts_with("http://down") ? Status::Unavailable("HTTP 503") : Status::Ok();
  };
  // One worker takes the oldest delivery that may go: had the pause been the failed
  // delivery's alone, down's second one would go before up's.
  Notifier n(dir.path() + "/notify", fn,
             {.first_backoff_ms = 600000, .max_backoff_ms = 600000, .workers = 1});
  ASSERT_TRUE(n.Start().ok());
  ASSERT_TRUE(n.Enqueue("1-1-webhook", Hook("http://down/a")).ok());
  auto called = [&](const std::string& url) {
    std::lock_guard lock(mu);
    return calls[url];
  };
  ASSERT_TRUE(Eventually([&] { return called("http://down/a") == 1; }));
  ASSERT_TRUE(n.Enqueue("2-1-webhook", Hook("http://down/b")).ok());
  ASSERT_TRUE(n.Enqueue("3-1-webhook", Hook("http://up/c")).ok());
  ASSERT_TRUE(Eventually([&] { return n.Pending() == 2; }));
  EXPECT_EQ(called("http://up/c"), 1);
  EXPECT_EQ(called("http://down/a"), 1);
  EXPECT_EQ(called("http://down/b"), 0);
  EXPECT_EQ(ListFiles(dir.path() + "/notify")->size(), 2u);
}

// A target that fails max_tries times in a row takes what waits for it along, and is
// probed one delivery at a time meanwhile rather than by each waiting delivery.
TEST(NotifierTest, ADeadReceiversWaitingDeliveriesAreGivenUpWithIt) {
  TempDir dir;
  Receiver r;
  r.failures = 1000;
  // Pending from before, so all six wait when the first try fails.
  ASSERT_TRUE(MakeDirs(dir.path() + "/notify").ok());
  for (int i = 0; i < 6; ++i) {
    std::string path = fmt::format("{}/notify/{}-1-webhook.json", dir.path(), i);
    ASSERT_TRUE(WriteFileAtomic(path, DeliveryToText(Hook("http://h/x"))).ok());
  }
  Notifier n(dir.path() + "/notify", r.Fn(),
             {.first_backoff_ms = 1, .max_backoff_ms = 2, .max_tries = 3, .per_target = 2});
  ASSERT_TRUE(n.Start().ok());
  ASSERT_TRUE(n.WaitIdle(milliseconds(30000)));
  // Three failures in a row; only the first round may have two in flight.
  EXPECT_LE(r.calls.load(), 4);
  EXPECT_TRUE(ListFiles(dir.path() + "/notify")->empty());
}

// Stopping the daemon does not wait for a receiver that never answers: the delivery stays
// on disk for the next start, and what comes back after the stop is not recorded.
TEST(NotifierTest, StoppingDoesNotWaitForAHungDelivery) {
  TempDir dir;
  auto gate = std::make_shared<Gate>();
  gate->dead_succeeds = true;
  std::string file = dir.path() + "/notify/7-1-webhook.json";
  auto n = std::make_unique<Notifier>(dir.path() + "/notify", Gate::Fn(gate),
                                      NotifierOptions{.stop_wait_ms = 50});
  ASSERT_TRUE(n->Start().ok());
  ASSERT_TRUE(n->Enqueue("7-1-webhook", Hook("http://dead/hook")).ok());
  ASSERT_TRUE(gate->Await([&] { return gate->inside == 1; }));
  auto before = std::chrono::steady_clock::now();
  n.reset();
  EXPECT_LT(std::chrono::steady_clock::now() - before, std::chrono::seconds(5));
  EXPECT_TRUE(std::filesystem::exists(file));
  gate->Open();
  ASSERT_TRUE(gate->Await([&] { return gate->returned == 1; }));
  // The abandoned thread lets go of the notifier's state (and with it the gate) once done.
  ASSERT_TRUE(Eventually([&] { return gate.use_count() == 1; }));
  EXPECT_TRUE(std::filesystem::exists(file));
}

TEST(NotifierTest, TheFileFormRoundTripsAndRefusesOthers) {
  Delivery d{Delivery::Kind::kMail, "a@b", "line\n\"quoted\""};
  Result<Delivery> back = DeliveryFromText(DeliveryToText(d));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->kind, d.kind);
  EXPECT_EQ(back->target, d.target);
  EXPECT_EQ(back->body, d.body);
  EXPECT_FALSE(DeliveryFromText("{\"kind\":\"pigeon\",\"target\":\"\",\"body\":\"\"}").ok());
  EXPECT_FALSE(DeliveryFromText("[]").ok());
}

}  // namespace
}  // namespace trainq
