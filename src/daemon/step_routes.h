// The step API of `trainq sbatch` jobs (docs/api.md, "Steps"): srun on the job's first node
// adds a step (POST /v1/jobs/ID/steps) and reads how it goes (GET ?step=K); the job's part on
// every other node asks its own daemon for its next step (GET ?rank=R&after=K), sends its
// tasks' output (POST /v1/jobs/ID/steps/result?at=N, which srun reads with GET
// ?step=K&output=N), reports its end (POST /v1/jobs/ID/steps/result?exit=N) and is told when
// the batch script ended. A node that is not the first sends those requests on to the first,
// signed with the cluster key. Who may call each is the route table's rule, judged before
// these run (routes.h): the job's owner or an admin, and a node only for a part it holds
// (PeerMay::kItsPart); `caller` here only says whether a node asks.
#pragma once

#include <map>
#include <string>

#include "src/api/http.h"
#include "src/core/auth.h"
#include "src/daemon/steps.h"
#include "src/os/clock.h"
#include "trainq/job.h"

namespace trainq {

class Agent;
class Trust;
class Mode;

class StepRoutes {
 public:
  // Everything given outlives the object; `key` is null on one machine.
  StepRoutes(const Agent& agent, Mode& mode, const Clock& clock, const Trust& trust,
             std::string node)
      : agent_(agent), mode_(mode), clock_(clock), trust_(trust), node_(std::move(node)) {}

  void Add(const HttpRequest& req, const Caller& caller, const Job& job, Responder& respond);
  void Read(const HttpRequest& req, const Caller& caller, const Job& job, Responder& respond);
  // A part's end (exit=N), or its tasks' output (at=N): both come to the same route, so a
  // node's signed request for its part's output needs nothing a report of its end does not.
  void Finish(const HttpRequest& req, const Caller& caller, const Job& job, Responder& respond);
  void Cancel(const HttpRequest& req, const Caller& caller, const Job& job, Responder& respond);
  // The batch script ended (its wrapper says so): the other nodes' parts end.
  void Done(const HttpRequest& req, const Caller& caller, const Job& job, Responder& respond);

 private:
  // Whether the batch script of attempt `n` of `job` runs on this node now; remembers the
  // attempts it saw so, so their end is told apart from a start still to come.
  bool BatchRunsHere(JobId job, int n);
  // A step request made where the batch script of attempt `attempt` does not run: sent to
  // `node`, the one where it runs, as this node's signed request (Mode::AskNode); a step
  // that node gives part `rank` is checked (Trust::StepFromPeer) before it is answered.
  void Proxy(const std::string& node, const std::string& method, const HttpRequest& req,
             const std::map<std::string, std::string>& query, const Job& job, int attempt, int rank,
             Responder& respond);

  const Agent& agent_;
  Mode& mode_;
  const Clock& clock_;
  const Trust& trust_;
  std::string node_;
  StepBoard board_;
  std::map<JobId, int> seen_;  // job -> attempt whose batch script was seen running here
  std::map<JobId, int> done_;  // job -> attempt whose batch script said it ended
};

}  // namespace trainq
