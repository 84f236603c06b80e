#include "src/daemon/notifier.h"

#include <atomic>
#include <mutex>
#include <vector>

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
