#include "src/daemon/step_routes.h"

#include <charconv>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "src/daemon/agent.h"
#include "src/daemon/json_response.h"
#include "src/daemon/mode.h"
#include "src/daemon/trust.h"

namespace trainq {

using json = nlohmann::json;

namespace {

// A part whose first node never showed its batch script running for this long after the
// attempt started takes the script as ended (its daemon restarted meanwhile).
constexpr int64_t kUnseenEndMs = 60'000;

const std::string& FirstNode(const Attempt& a) {
  return a.parts.empty() ? a.node : a.parts[0].node;
}
int Parts(const Attempt& a) { return a.parts.empty() ? 1 : static_cast<int>(a.parts.size()); }

bool Active(const Attempt* a) {
  return a != nullptr && (a->state == JobState::kStarting || a->state == JobState::kRunning);
}

// The numbers a step request names: rank, after, step, exit, and the piece numbers of output
// (`at`: a part's first piece in its body; `output`: srun's first piece to read); each absent
// when not given.
struct StepQuery {
  std::optional<int> rank, after, step, exit;
  std::optional<int64_t> at, output;
};

Result<StepQuery> ReadQuery(const HttpRequest& req, const Attempt& a) {
  StepQuery q;
  for (const auto& [key, value] : req.query) {
    int64_t n = 0;
    auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
    bool number = ec == std::errc() && ptr == value.data() + value.size() && !value.empty();
    bool small = number && n >= -1 && n <= 1'000'000'000;
    if (key == "rank" && small && n >= 0 && n < Parts(a)) {
      q.rank = static_cast<int>(n);
    } else if (key == "after" && small) {
      q.after = static_cast<int>(n);
    } else if (key == "step" && small && n >= 0) {
      q.step = static_cast<int>(n);
    } else if (key == "exit" && number && n >= 0 && n <= 255) {
      q.exit = static_cast<int>(n);
    } else if ((key == "at" || key == "output") && number && n >= 0) {
      (key == "at" ? q.at : q.output) = n;
    } else {
      return Status::Invalid(fmt::format(
          "{}: '{}' is not accepted; expected rank (0 to {}), after (-1 or more), step (0 or "
          "more), exit (0 to 255), at and output (0 or more)",
          key, value.substr(0, 64), Parts(a) - 1));
    }
  }
  return q;
}

std::map<std::string, std::string> QueryOf(const StepQuery& q) {
  std::map<std::string, std::string> out;
  if (q.rank) out["rank"] = std::to_string(*q.rank);
  if (q.after) out["after"] = std::to_string(*q.after);
  if (q.step) out["step"] = std::to_string(*q.step);
  if (q.exit) out["exit"] = std::to_string(*q.exit);
  if (q.at) out["at"] = std::to_string(*q.at);
  if (q.output) out["output"] = std::to_string(*q.output);
  return out;
}

}  // namespace

bool StepRoutes::BatchRunsHere(JobId job, int n) {
  std::map<JobId, int> live;
  for (const auto& [id, a] : agent_.live()) {
    if (a.part <= 0) live[id] = a.n;
  }
  board_.Keep(live);
  std::erase_if(seen_, [&](const auto& kv) { return !live.contains(kv.first) && kv.first != job; });
  auto it = live.find(job);
  if (it == live.end() || it->second != n) return false;
  seen_[job] = n;
  return true;
}

// Short and synchronous, as a proxied log: a step request is small, and the parts ask a few
// times a second at most.
void StepRoutes::Proxy(const std::string& node, const std::string& method, const HttpRequest& req,
                       const std::map<std::string, std::string>& query, const Job& job, int attempt,
                       int rank, Responder& respond) {
  Result<HttpResponse> answer =
      mode_.AskNode(node, method, req.path, query, method == "POST" ? req.body : "",
                    fmt::format("the batch script of job {}", job.id));
  if (!answer.ok()) return respond(ErrorResponse(answer.status()));
  if (method != "GET" || answer->status != 200) return respond(std::move(*answer));
  json doc = json::parse(answer->body, nullptr, false);
  if (!doc.is_object()) return respond(std::move(*answer));
  Result<json> step = trust_.StepFromPeer(job.id, attempt, rank, doc, node);
  if (!step.ok()) return respond(ErrorResponse(step.status()));
  respond(Json(200, *step));
}

void StepRoutes::Add(const HttpRequest& req, const Caller& caller, const Job& job,
                     Responder& respond) {
  (void)caller;
  const Attempt* a = job.current();
  if (!Active(a) || FirstNode(*a) != node_ || !BatchRunsHere(job.id, a->n)) {
    return respond(ErrorResponse(Status::Conflict(fmt::format(
        "job {}: its batch script does not run on this node ({}); srun starts steps from it",
        job.id, node_))));
  }
  Status st = board_.Add(job.id, a->n, Parts(*a), req.body);
  if (!st.ok()) return respond(ErrorResponse(st));
  respond(Json(200, json{{"job", job.id}, {"attempt", a->n}}));
}

void StepRoutes::Read(const HttpRequest& req, const Caller& caller, const Job& job,
                      Responder& respond) {
  const Attempt* a = job.current();
  if (!Active(a)) return respond(Json(200, json{{"ended", true}}));
  Result<StepQuery> q = ReadQuery(req, *a);
  if (!q.ok()) return respond(ErrorResponse(q.status()));
  bool peer = !caller.node.empty();
  int rank = q->rank.value_or(-1);
  if (FirstNode(*a) != node_) {
    if (peer) return respond(ErrorResponse(Status::Conflict("ask the job's first node")));
    return Proxy(FirstNode(*a), "GET", req, QueryOf(*q), job, a->n, rank, respond);
  }
  bool here = BatchRunsHere(job.id, a->n);
  if (q->output && (peer || !q->step)) {
    // Reading output drops what came before it: srun's alone, on this node.
    return respond(ErrorResponse(Status::Invalid("output=N is srun's, with step=K")));
  }
  if (q->step) {
    Result<json> state = board_.State(job.id, a->n, *q->step);
    if (!state.ok()) return respond(ErrorResponse(state.status()));
    if (q->output) {
      Result<json> output = board_.ReadOutput(job.id, a->n, *q->step, *q->output);
      if (!output.ok()) return respond(ErrorResponse(output.status()));
      (*state)["output"] = std::move(*output);
    }
    return respond(Json(200, *state));
  }
  if (!q->after || rank < 0) {
    return respond(ErrorResponse(Status::Invalid("give step=K, or rank=R and after=K")));
  }
  std::string text = board_.Next(job.id, a->n, rank, *q->after);
  if (!text.empty()) {
    if (peer) return respond(Json(200, trust_.StepForPeer(job.id, a->n, rank, text)));
    return respond(Json(200, json{{"step", json::parse(text, nullptr, false)}}));
  }
  auto seen = seen_.find(job.id);
  auto done = done_.find(job.id);
  bool ended = (done != done_.end() && done->second == a->n) ||
               (!here && seen != seen_.end() && seen->second == a->n) ||
               (!here && a->started_at > 0 && clock_.Now() - a->started_at > kUnseenEndMs);
  respond(Json(200, ended ? json{{"ended", true}} : json::object()));
}

void StepRoutes::Finish(const HttpRequest& req, const Caller& caller, const Job& job,
                        Responder& respond) {
  const Attempt* a = job.current();
  if (!Active(a)) return respond(Json(200, json{{"ended", true}}));
  Result<StepQuery> q = ReadQuery(req, *a);
  if (!q.ok()) return respond(ErrorResponse(q.status()));
  if (!q->step || !q->rank || q->exit.has_value() == q->at.has_value()) {
    return respond(ErrorResponse(Status::Invalid(
        "give step=K, rank=R and exit=CODE (the part's end), or at=N (its tasks' output)")));
  }
  bool peer = !caller.node.empty();
  if (FirstNode(*a) != node_) {
    if (peer) return respond(ErrorResponse(Status::Conflict("ask the job's first node")));
    return Proxy(FirstNode(*a), "POST", req, QueryOf(*q), job, a->n, *q->rank, respond);
  }
  if (q->at) {
    Result<json> taken = board_.Append(job.id, a->n, *q->step, *q->rank, *q->at, req.body);
    if (!taken.ok()) return respond(ErrorResponse(taken.status()));
    return respond(Json(200, *taken));
  }
  // The body: what srun prints of each failed task, for srun to print on the first node.
  std::vector<std::string> failures;
  json doc = json::parse(req.body, nullptr, false);
  if (doc.is_object() && doc["failures"].is_array()) {
    for (const json& line : doc["failures"]) {
      if (line.is_string() && failures.size() < 64)
        failures.push_back(line.get<std::string>().substr(0, 1024));
    }
  }
  Status st = board_.Finish(job.id, a->n, *q->step, *q->rank, *q->exit, failures);
  if (!st.ok()) return respond(ErrorResponse(st));
  respond(Json(200, json::object()));
}

void StepRoutes::Cancel(const HttpRequest& req, const Caller& caller, const Job& job,
                        Responder& respond) {
  (void)caller;
  const Attempt* a = job.current();
  if (!Active(a)) return respond(Json(200, json{{"ended", true}}));
  Result<StepQuery> q = ReadQuery(req, *a);
  if (!q.ok()) return respond(ErrorResponse(q.status()));
  if (!q->step) return respond(ErrorResponse(Status::Invalid("give step=K")));
  Status st = board_.Cancel(job.id, a->n, *q->step);
  if (!st.ok()) return respond(ErrorResponse(st));
  respond(Json(200, json::object()));
}

void StepRoutes::Done(const HttpRequest& req, const Caller& caller, const Job& job,
                      Responder& respond) {
  (void)req, (void)caller;
  const Attempt* a = job.current();
  if (!Active(a) || FirstNode(*a) != node_) return respond(Json(200, json::object()));
  BatchRunsHere(job.id, a->n);
  // What other jobs' scripts said is kept while they run here, and their parts asked since.
  std::erase_if(done_, [&](const auto& kv) { return !seen_.contains(kv.first); });
  done_[job.id] = a->n;
  respond(Json(200, json::object()));
}

}  // namespace trainq
