// Notifications of ended jobs (--notify URL, --mail ADDR; docs/workflow.md,
// "Notifications"), delivered on a thread of their own so a slow or dead receiver never
// holds up the daemon's loop. Each delivery is a file in a directory of the state dir until
// it has been delivered, so one still pending when the daemon stops is delivered after it
// starts again.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "trainq/status.h"

namespace trainq {

struct Delivery {
  enum class Kind { kWebhook, kMail };
  Kind kind = Kind::kWebhook;
  std::string target;  // the URL, or the mail address
  std::string body;    // the JSON to POST, or the message for `sendmail -t`
};

// Delivers one; Ok when the receiver took it (a 2xx answer, sendmail's exit 0). Called on
// the notifier's thread.
using DeliverFn = std::function<Status(const Delivery&)>;

struct NotifierOptions {
  int64_t first_backoff_ms = 1000;  // doubles after each failure
  int64_t max_backoff_ms = 5 * 60 * 1000;
  int max_tries = 20;  // then it is given up and logged (about an hour of tries)
};

class Notifier {
 public:
  Notifier(std::string dir, DeliverFn deliver, NotifierOptions options = {});
  // Stops the thread; what is pending stays in `dir` for the next start.
  ~Notifier();
  Notifier(const Notifier&) = delete;
  Notifier& operator=(const Notifier&) = delete;

  // Reads what `dir` holds from an earlier run (due at once) and starts the thread.
  Status Start();
  // Stores `d` as `dir`/`key`.json (synced, so a crash cannot lose it), then hands it to the
  // thread. `key` (letters, digits, '-') names the end it reports: the same key again
  // replaces it.
  Status Enqueue(const std::string& key, const Delivery& d);
  // Deliveries stored and not yet delivered or given up.
  size_t Pending();
  // Blocks until nothing is pending or `timeout` passes (tests).
  bool WaitIdle(std::chrono::milliseconds timeout);

 private:
  struct Item {
    std::string path;
    Delivery delivery;
    int tries = 0;
    std::chrono::steady_clock::time_point due;
  };
  void Run();
  void Finish(Item item, const Status& result);

  std::string dir_;
  DeliverFn deliver_;
  NotifierOptions options_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Item> items_;  // guarded by mu_
  size_t in_flight_ = 0;     // guarded by mu_
  bool stop_ = false;        // guarded by mu_
  std::thread thread_;
};

// The file form of a delivery, and back (kInvalid for a file trainq did not write).
std::string DeliveryToText(const Delivery& d);
Result<Delivery> DeliveryFromText(const std::string& text);

}  // namespace trainq
