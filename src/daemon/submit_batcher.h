// Submits that arrive in one turn of the event loop are stored in one transaction (group
// commit: one fsync for all of them), each request first judged against the per-user caps
// (docs/operations.md, "Per-user caps").
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "src/api/http.h"
#include "src/daemon/config.h"
#include "src/os/clock.h"
#include "src/store/store.h"

namespace boost::asio {
class io_context;
}  // namespace boost::asio

namespace trainq {

class SubmitBatcher {
 public:
  // What the rest of the daemon does around a batch. `before`: the specs just before they are
  // stored (a cluster's node signs them). `stored`: the jobs just stored, with their ids and
  // a new group named as the store named it, before the answers go out.
  struct Hooks {
    std::function<void(std::vector<JobSpec>& specs)> before;
    std::function<void(const std::vector<JobSpec>& specs, const std::vector<JobId>& ids,
                       UnixMs now)>
        stored;
  };

  // Everything given outlives the object; `config` is read at each batch. The hooks come
  // later (SetHooks), once what they call is made; no batch is stored before.
  SubmitBatcher(boost::asio::io_context& io, Store& store, const Clock& clock, const Config& config)
      : io_(io), store_(store), clock_(clock), config_(config) {}
  void SetHooks(Hooks hooks) { hooks_ = std::move(hooks); }

  // The waiting-jobs cap for a request on its own, before its jobs are checked one by one
  // (a 100,000-job array is refused before that work).
  Status CheckAlone(const std::vector<JobSpec>& specs, const std::string& user) const;
  // A request with the Idempotency-Key of one still pending joins it and is answered with its
  // ids (marked repeated); whether it joined.
  bool JoinPending(const std::string& user, const std::string& key, Responder& respond);
  // Queues a request of one user's `specs`; it is answered once the batch is stored.
  void Add(std::vector<JobSpec> specs, Responder respond);

 private:
  struct Pending {
    std::vector<JobSpec> specs;
    Responder respond;
    std::vector<Responder> repeats;  // the same request sent again before it was stored
  };
  // `footprints` carries what each user keeps, plus what earlier requests of the batch add;
  // null: the request is judged alone.
  Status WithinCaps(const std::vector<JobSpec>& specs, const std::string& user,
                    std::map<std::string, UserFootprint>* footprints) const;
  void Flush();
  static void Answer(Pending& p, const std::vector<JobId>& ids, size_t& next);

  boost::asio::io_context& io_;
  Store& store_;
  const Clock& clock_;
  const Config& config_;
  Hooks hooks_;
  std::vector<Pending> pending_;
  bool flush_posted_ = false;
};

}  // namespace trainq
