// Notifications of ended jobs (--notify URL, --mail ADDR; docs/workflow.md,
// "Notifications"), delivered by a few threads of their own so a slow or dead receiver holds
// up neither the daemon's loop nor anyone else's notifications. Each delivery is a file in a
// directory of the state dir until it has been delivered, so one still pending when the
// daemon stops is delivered after it starts again.
//
// Deliveries are grouped by target (DeliveryTarget): a webhook's scheme, host and port, or
// the local sendmail for every mail. At most `per_target` go to one target at once, so a receiver
// that never answers holds only its own slots. A failure pauses the whole target, not just the one
// delivery: what else waits for it waits out the pause with it, one delivery then probes it,
// and the rest follow once one gets through.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "trainq/status.h"

namespace trainq {

struct Delivery {
  enum class Kind { kWebhook, kMail };
  Kind kind = Kind::kWebhook;
  std::string target;  // the URL, or the mail address
  std::string body;    // the JSON to POST, or the message for `sendmail -t`
};

// Delivers one; Ok when the receiver took it (a 2xx answer, sendmail's exit 0). Called on
// one of the notifier's threads, several at once (for different targets, or up to
// `per_target` for one); it must bound its own time (a webhook's timeouts).
using DeliverFn = std::function<Status(const Delivery&)>;

struct NotifierOptions {
  // A target's pause after a failure; doubles with each failure in a row, up to the most.
  int64_t first_backoff_ms = 1000;
  int64_t max_backoff_ms = 5 * 60 * 1000;
  // A delivery is given up after this many tries, and so is everything waiting for a target
  // that has failed this many times in a row (about an hour of pauses).
  int max_tries = 20;
  int workers = 8;     // deliveries in flight at once, all targets together
  int per_target = 2;  // deliveries in flight to one target at once
  // How long the destructor waits for deliveries in flight to end; those still going then
  // are left to finish unheard, their files kept.
  int64_t stop_wait_ms = 500;
};

// What a delivery's receiver is, as the notifier limits and pauses it: "http://host:port"
// (the host in lower case) for a webhook; "mail" for every mail, since all of it goes through
// one sendmail, and one that hangs (msmtp to a dead relay) must hold no more than its slots.
std::string DeliveryTarget(const Delivery& d);

class Notifier {
 public:
  Notifier(std::string dir, DeliverFn deliver, NotifierOptions options = {});
  // Starts no more deliveries and waits at most `stop_wait_ms` for those in flight; what is
  // pending stays in `dir` for the next start. A delivery still in flight after that runs
  // on, on its own thread, and is neither recorded nor removed (delivered again after the
  // next start: at least once, never lost); `deliver` must stay callable until it returns.
  ~Notifier();
  Notifier(const Notifier&) = delete;
  Notifier& operator=(const Notifier&) = delete;

  // Reads what `dir` holds from an earlier run (due at once) and starts the threads. Once.
  Status Start();
  // Stores `d` as `dir`/`key`.json (synced, so a crash cannot lose it), then hands it to the
  // threads. `key` (letters, digits, '-') names the end it reports: the same key again
  // replaces it.
  Status Enqueue(const std::string& key, const Delivery& d);
  // Deliveries stored and not yet delivered or given up.
  size_t Pending();
  // Blocks until nothing is pending or `timeout` passes (tests).
  bool WaitIdle(std::chrono::milliseconds timeout);

 private:
  struct Core;  // shared with the threads, which may outlive the Notifier
  std::shared_ptr<Core> core_;
};

// The file form of a delivery, and back (kInvalid for a file trainq did not write).
std::string DeliveryToText(const Delivery& d);
Result<Delivery> DeliveryFromText(const std::string& text);

}  // namespace trainq
