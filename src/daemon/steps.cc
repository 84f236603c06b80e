#include "src/daemon/steps.h"

#include <algorithm>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace trainq {

using json = nlohmann::json;

struct StepBoard::Step {
  std::string text;        // srun's body, as the parts get it
  std::vector<int> tasks;  // per part
  std::vector<int> first;  // per part: the rank of its first task
  std::map<int, json> results;
  bool cancelled = false;
  // The parts' output srun has not read: pieces numbered from `start`, in the order taken.
  std::deque<StepOutput> output;
  int64_t start = 0;
  size_t bytes = 0;
  std::map<int, int64_t> taken;  // per part: how many of its pieces were taken
};

struct StepBoard::Attempt {
  int n = 0;
  std::map<int, Step> steps;
};

StepBoard::StepBoard() = default;
StepBoard::~StepBoard() = default;

namespace {

// At most this many steps a job keeps: a script that runs srun in a loop forgets its oldest.
constexpr size_t kMaxSteps = 1000;

Status Field(std::string_view name, std::string_view form) {
  return Status::Invalid(fmt::format("step: {} must be {}", name, form));
}

}  // namespace

Status StepBoard::Add(JobId job, int n, int nodes, const std::string& body) {
  json doc = json::parse(body, nullptr, false);
  if (!doc.is_object()) return Status::Invalid("step: the body must be a JSON object");
  const json& step = doc["step"];
  if (!step.is_number_integer() || step.get<int64_t>() < 0 || step.get<int64_t>() > 1'000'000'000) {
    return Field("step", "a number, 0 or more");
  }
  const json& argv = doc["argv"];
  if (!argv.is_array() || argv.empty()) return Field("argv", "a non-empty list of strings");
  for (const json& a : argv) {
    if (!a.is_string()) return Field("argv", "a non-empty list of strings");
  }
  const json& env = doc["env"];
  if (!env.is_object()) return Field("env", "an object of strings");
  for (const auto& [key, value] : env.items()) {
    if (!value.is_string() || key.empty() || key.find('=') != std::string::npos) {
      return Field("env", "an object of strings, NAME (no '=') to value");
    }
  }
  if (!doc["cwd"].is_string()) return Field("cwd", "a path");
  Step s;
  for (const char* list : {"tasks", "first"}) {
    const json& v = doc[list];
    if (!v.is_array() || v.size() != static_cast<size_t>(nodes)) {
      return Field(list, fmt::format("a list of {} counts, one per node of the job", nodes));
    }
    for (const json& c : v) {
      if (!c.is_number_integer() || c.get<int64_t>() < 0 || c.get<int64_t>() > 1'000'000) {
        return Field(list, "counts from 0 to 1000000");
      }
    }
  }
  s.tasks = doc["tasks"].get<std::vector<int>>();
  s.first = doc["first"].get<std::vector<int>>();
  s.text = body;
  Attempt& a = jobs_[job];
  if (a.n != n) a = Attempt{n, {}};
  int id = step.get<int>();
  if (a.steps.contains(id)) return Status::Conflict(fmt::format("step {}.{} exists", job, id));
  a.steps.emplace(id, std::move(s));
  while (a.steps.size() > kMaxSteps) a.steps.erase(a.steps.begin());
  return Status::Ok();
}

const StepBoard::Step* StepBoard::Find(JobId job, int n, int step) const {
  auto it = jobs_.find(job);
  if (it == jobs_.end() || it->second.n != n) return nullptr;
  auto s = it->second.steps.find(step);
  return s == it->second.steps.end() ? nullptr : &s->second;
}

StepBoard::Step* StepBoard::Find(JobId job, int n, int step) {
  return const_cast<Step*>(std::as_const(*this).Find(job, n, step));
}

size_t StepBoard::Held(JobId job) const {
  size_t held = 0;
  for (const auto& [id, s] : jobs_.at(job).steps) held += s.bytes;
  return held;
}

std::string StepBoard::Next(JobId job, int n, int rank, int after) const {
  auto it = jobs_.find(job);
  if (it == jobs_.end() || it->second.n != n) return "";
  for (auto s = it->second.steps.upper_bound(after); s != it->second.steps.end(); ++s) {
    const Step& step = s->second;
    if (rank >= 0 && static_cast<size_t>(rank) < step.tasks.size() && step.tasks[rank] > 0 &&
        !step.results.contains(rank)) {
      return step.text;
    }
  }
  return "";
}

Result<json> StepBoard::State(JobId job, int n, int step) const {
  const Step* s = Find(job, n, step);
  if (s == nullptr) return Status::NotFound(fmt::format("step {}.{} is not known here", job, step));
  json results = json::object();
  for (const auto& [rank, r] : s->results) results[std::to_string(rank)] = r;
  return json{{"results", std::move(results)}, {"cancelled", s->cancelled}};
}

Status StepBoard::Finish(JobId job, int n, int step, int rank, int exit,
                         const std::vector<std::string>& failures) {
  const Step* found = Find(job, n, step);
  if (found == nullptr)
    return Status::NotFound(fmt::format("step {}.{} is not known here", job, step));
  Step& s = jobs_[job].steps[step];
  if (rank < 0 || static_cast<size_t>(rank) >= s.tasks.size() || s.tasks[rank] == 0) {
    return Status::Invalid(fmt::format("step {}.{} gives node {} no tasks", job, step, rank));
  }
  s.results[rank] = json{{"exit", exit}, {"failures", failures}};
  return Status::Ok();
}

Status StepBoard::Cancel(JobId job, int n, int step) {
  if (Find(job, n, step) == nullptr) {
    return Status::NotFound(fmt::format("step {}.{} is not known here", job, step));
  }
  jobs_[job].steps[step].cancelled = true;
  return Status::Ok();
}

namespace {

// The pieces of a part's output body, each checked against the part's tasks.
Result<std::vector<StepOutput>> ReadPieces(const std::string& body, int low, int high) {
  json doc = json::parse(body, nullptr, false);
  if (!doc.is_object() || !doc["output"].is_array()) {
    return Field("output", "a list of {\"task\", \"fd\", \"text\"}");
  }
  std::vector<StepOutput> pieces;
  for (const json& p : doc["output"]) {
    if (!p.is_object() || !p["task"].is_number_integer() || p["task"].get<int64_t>() < low ||
        p["task"].get<int64_t>() >= high) {
      return Field("output: task", fmt::format("a task of this part ({} to {})", low, high - 1));
    }
    if (!p["fd"].is_number_integer() || (p["fd"] != 1 && p["fd"] != 2)) {
      return Field("output: fd", "1 (stdout) or 2 (stderr)");
    }
    if (!p["text"].is_string() ||
        p["text"].get_ref<const std::string&>().size() > StepBoard::kMaxPieceBytes) {
      return Field("output: text",
                   fmt::format("a string of at most {} bytes", StepBoard::kMaxPieceBytes));
    }
    pieces.push_back({p["task"].get<int>(), p["fd"].get<int>(), p["text"].get<std::string>()});
  }
  return pieces;
}

json PieceJson(const StepOutput& p) {
  return json{{"task", p.task}, {"fd", p.fd}, {"text", p.text}};
}

}  // namespace

Result<json> StepBoard::Append(JobId job, int n, int step, int rank, int64_t at,
                               const std::string& body) {
  Step* s = Find(job, n, step);
  if (s == nullptr) return Status::NotFound(fmt::format("step {}.{} is not known here", job, step));
  if (rank < 0 || static_cast<size_t>(rank) >= s->tasks.size() || s->tasks[rank] == 0) {
    return Status::Invalid(fmt::format("step {}.{} gives node {} no tasks", job, step, rank));
  }
  int low = s->first[rank];
  Result<std::vector<StepOutput>> pieces = ReadPieces(body, low, low + s->tasks[rank]);
  if (!pieces.ok()) return pieces.status();
  int64_t& taken = s->taken[rank];
  if (at < 0 || at > taken) {
    return Field("at", fmt::format("at most {}, the pieces of node {} taken so far", taken, rank));
  }
  size_t held = Held(job);
  for (size_t i = static_cast<size_t>(taken - at); i < pieces->size(); ++i) {
    StepOutput& p = (*pieces)[i];
    bool room =
        s->bytes + p.text.size() <= kStepWindowBytes && held + p.text.size() <= kAttemptWindowBytes;
    if (!room && s->bytes > 0) break;
    s->bytes += p.text.size();
    held += p.text.size();
    s->output.push_back(std::move(p));
    ++taken;
  }
  return json{{"taken", taken}, {"cancelled", s->cancelled}};
}

Result<json> StepBoard::ReadOutput(JobId job, int n, int step, int64_t from) {
  Step* s = Find(job, n, step);
  if (s == nullptr) return Status::NotFound(fmt::format("step {}.{} is not known here", job, step));
  while (!s->output.empty() && s->start < from) {
    s->bytes -= s->output.front().text.size();
    s->output.pop_front();
    ++s->start;
  }
  int64_t end = s->start + static_cast<int64_t>(s->output.size());
  int64_t next = std::clamp(from, s->start, end);
  json pieces = json::array();
  size_t bytes = 0;
  for (; next < end; ++next) {
    const StepOutput& p = s->output[static_cast<size_t>(next - s->start)];
    if (bytes > 0 && bytes + p.text.size() > kReadBytes) break;
    bytes += p.text.size();
    pieces.push_back(PieceJson(p));
  }
  bool ended = true;
  for (size_t rank = 1; rank < s->tasks.size(); ++rank) {
    ended = ended && (s->tasks[rank] == 0 || s->results.contains(static_cast<int>(rank)));
  }
  // The last read: srun stops once every part ended and it has all their output.
  if (ended && next == end) {
    s->output.clear();
    s->start = end;
    s->bytes = 0;
  }
  return json{{"pieces", std::move(pieces)}, {"next", next}, {"end", end}};
}

void StepBoard::Keep(const std::map<JobId, int>& live) {
  std::erase_if(jobs_, [&live](const auto& kv) {
    auto it = live.find(kv.first);
    return it == live.end() || it->second != kv.second.n;
  });
}

}  // namespace trainq
