#include "src/daemon/submit_batcher.h"

#include <malloc.h>

#include <set>

#include <fmt/format.h>

#include "src/api/asio.h"
#include "src/daemon/json_response.h"
#include "trainq/size.h"

namespace trainq {

using json = nlohmann::json;

Status SubmitBatcher::CheckAlone(const std::vector<JobSpec>& specs, const std::string& user) const {
  return WithinCaps(specs, user, nullptr);
}

Status SubmitBatcher::WithinCaps(const std::vector<JobSpec>& specs, const std::string& user,
                                 std::map<std::string, UserFootprint>* footprints) const {
  int64_t max_waiting = config_.max_waiting_jobs_per_user;
  uint64_t max_bytes = config_.max_stored_bytes_per_user;
  if (specs.empty() || (max_waiting == 0 && max_bytes == 0)) return Status::Ok();
  auto count = static_cast<int64_t>(specs.size());
  if (!footprints) {
    if (max_waiting == 0 || count <= max_waiting) return Status::Ok();
    return Status::NoSpace(fmt::format(
        "this submit of {} jobs is more than {} may have waiting: max_waiting_jobs_per_user = "
        "{}; nothing was stored",
        count, user, max_waiting));
  }
  auto [it, fresh] = footprints->try_emplace(user);
  if (fresh) {
    Result<UserFootprint> stored = store_.Footprint(user);
    if (!stored.ok()) {
      footprints->erase(it);
      return stored.status();
    }
    it->second = *stored;
  }
  UserFootprint& fp = it->second;
  if (max_waiting > 0 && fp.waiting_jobs + count > max_waiting) {
    return Status::NoSpace(fmt::format(
        "{} has {} job{} waiting and this submit adds {}: over max_waiting_jobs_per_user = {}; "
        "nothing was stored (cancel some, or submit again once some have started)",
        user, fp.waiting_jobs, fp.waiting_jobs == 1 ? "" : "s", count, max_waiting));
  }
  // A large environment the request's jobs share is stored once (Store::kSharedEnvBytes).
  uint64_t bytes = 0;
  std::set<EnvVars::List> shared;
  const JobSpec* previous = nullptr;
  size_t previous_env = 0;
  for (const JobSpec& spec : specs) {
    size_t env = 2;
    if (previous != nullptr && spec.env.SharedWith(previous->env)) {
      env = previous_env >= kSharedEnvBytes ? 0 : previous_env;  // one copy for the batch
    } else {
      for (const auto& [name, value] : spec.env) env += name.size() + value.size() + 6;
      previous_env = env;
      if (env >= kSharedEnvBytes && !shared.insert(spec.env.list()).second) env = 0;
    }
    previous = &spec;
    bytes += RecordBytes(spec, env);
  }
  if (max_bytes > 0 && fp.stored_bytes + bytes > max_bytes) {
    return Status::NoSpace(fmt::format(
        "{}'s jobs keep {} (their records and logs) and this submit adds {}: over "
        "max_stored_bytes_per_user = {}; nothing was stored (`trainq clean` forgets ended jobs "
        "and their logs)",
        user, FormatBytes(fp.stored_bytes), FormatBytes(bytes), FormatBytes(max_bytes)));
  }
  fp.waiting_jobs += count;
  fp.stored_bytes += bytes;
  return Status::Ok();
}

bool SubmitBatcher::JoinPending(const std::string& user, const std::string& key,
                                Responder& respond) {
  for (Pending& p : pending_) {
    if (!p.specs.empty() && p.specs[0].submit_key == key && p.specs[0].user == user) {
      p.repeats.push_back(std::move(respond));
      return true;
    }
  }
  return false;
}

void SubmitBatcher::Add(std::vector<JobSpec> specs, Responder respond) {
  pending_.push_back({std::move(specs), std::move(respond), {}});
  if (flush_posted_) return;
  flush_posted_ = true;
  boost::asio::post(io_, [this] { Flush(); });
}

void SubmitBatcher::Flush() {
  flush_posted_ = false;
  std::vector<Pending> batch;
  std::map<std::string, UserFootprint> footprints;
  size_t refused = 0;
  for (Pending& p : pending_) {
    Status within =
        p.specs.empty() ? Status::Ok() : WithinCaps(p.specs, p.specs.front().user, &footprints);
    if (within.ok()) {
      batch.push_back(std::move(p));
      continue;
    }
    refused += p.specs.size();
    for (Responder& repeat : p.repeats) repeat(ErrorResponse(within));
    p.respond(ErrorResponse(within));
  }
  pending_.clear();
  // A large request leaves hundreds of MiB of freed parse trees and environments in the
  // allocator's arenas: give them back rather than keep them resident.
  if (batch.empty()) {
    if (refused > 1000) ::malloc_trim(0);
    return;
  }
  std::vector<JobSpec> specs;
  for (size_t k = 0; k < batch.size(); ++k) {
    for (JobSpec& s : batch[k].specs) {
      // Each request's new group is its own (the store names it by its first job).
      if (s.group == kNewGroup) s.group = kNewGroup - static_cast<JobId>(k);
      specs.push_back(std::move(s));
    }
  }
  UnixMs now = clock_.Now();
  if (hooks_.before) hooks_.before(specs);
  Result<std::vector<JobId>> ids = store_.Submit(specs, now);
  if (ids.ok()) {
    std::map<JobId, JobId> groups;  // a new group's tag -> its first id, as the store named it
    for (size_t i = 0; i < specs.size(); ++i) {
      if (specs[i].group < 0)
        specs[i].group = groups.try_emplace(specs[i].group, (*ids)[i]).first->second;
    }
    hooks_.stored(specs, *ids, now);
  }
  size_t next = 0;
  for (Pending& p : batch) {
    if (ids.ok()) {
      Answer(p, *ids, next);
      continue;
    }
    for (Responder& repeat : p.repeats) repeat(ErrorResponse(ids.status()));
    p.respond(ErrorResponse(ids.status()));
  }
  bool large = specs.size() + refused > 1000;
  batch.clear();
  specs.clear();
  specs.shrink_to_fit();
  if (large) ::malloc_trim(0);
}

// Request `p`'s ids are the next of the batch's, in order; its new group (if it made one) is
// named by its first job.
void SubmitBatcher::Answer(Pending& p, const std::vector<JobId>& ids, size_t& next) {
  json out = json::array();
  json group = nullptr;
  for (const JobSpec& spec : p.specs) {
    if (spec.group < 0 && group.is_null()) group = ids[next];
    out.push_back(ids[next++]);
  }
  json reply = {{"ids", std::move(out)}};
  if (!group.is_null()) reply["group"] = group;
  for (Responder& repeat : p.repeats) {
    json again = reply;
    again["repeated"] = true;
    repeat(Json(200, again));
  }
  p.respond(Json(201, reply));
}

}  // namespace trainq
