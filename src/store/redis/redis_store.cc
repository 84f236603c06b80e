#include "src/store/redis/redis_store.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "src/core/deps.h"
#include "src/core/state_machine.h"
#include "src/store/redis/durability.h"
#include "src/store/redis/records.h"
#include "src/store/redis/scripts.h"

namespace trainq::redis {

namespace {

// A submit retried this often lost every time to a dependency changing under it.
constexpr int kSubmitTries = 20;

std::string FromCsv(Move move) {
  std::string csv;
  for (JobState s : MoveFrom(move)) csv += std::string(StateName(s)) + ",";
  return csv;
}

std::string Num(int64_t v) { return std::to_string(v); }

Status RefusalStatus(std::string_view kind, std::string message) {
  if (kind == "conflict") return Status::Conflict(std::move(message));
  if (kind == "notfound") return Status::NotFound(std::move(message));
  if (kind == "invalid") return Status::Invalid(std::move(message));
  return Status::Internal(std::move(message));
}

}  // namespace

Status RedisStore::Open() {
  TRAINQ_RETURN_IF_ERROR(conn_.Connect());
  std::string text;
  for (const char* section : {"server", "persistence"}) {
    Result<Reply> info = Command({"INFO", section});
    if (!info.ok()) return info.status();
    text += Text(info->get());
  }
  ServerFacts facts = ParseServerInfo(text);
  if (facts.major < 7) {
    return Status::Unavailable(
        fmt::format("{} runs Redis {}; trainq needs Redis 7.0 or later", conn_.Where(),
                    facts.major == 0 ? "of unknown version" : std::to_string(facts.major)));
  }
  if (!facts.aof) {
    spdlog::warn(
        "store: {} has appendonly off, so a Redis restart loses every trainq write since its "
        "last snapshot; set appendonly yes and appendfsync always (docs/cluster.md, "
        "\"Durability\")",
        conn_.Where());
  }
  TRAINQ_RETURN_IF_ERROR(CheckAofReplay(conn_, facts));
  for (const LuaScript* script : AllScripts()) TRAINQ_RETURN_IF_ERROR(conn_.Load(*script));
  return CheckReplicas();
}

// WAIT 0 0 answers at once and proves that the node's user may WAIT; ROLE lists the
// replicas. Too few is logged, not refused: one may be resyncing, and writes say so meanwhile.
Status RedisStore::CheckReplicas() {
  int want = conn_.target().min_replicas_acked;
  if (want <= 0) return Status::Ok();
  Result<Reply> role = Command({"WAIT", "0", "0"});
  if (role.ok()) role = Command({"ROLE"});
  if (!role.ok()) {
    return Status(role.status().code(), fmt::format("store_min_replicas_acked = {} needs WAIT "
                                                    "and ROLE: {}",
                                                    want, role.status().message()));
  }
  const redisReply* r = role->get();
  size_t have = r->type == REDIS_REPLY_ARRAY && r->elements > 2 ? r->element[2]->elements : 0;
  if (have < static_cast<size_t>(want)) {
    spdlog::warn(
        "store: {} has {} replicas and store_min_replicas_acked is {}: submits, starts and "
        "ends are refused until enough replicas are connected (docs/cluster.md, \"Redis with "
        "failover\")",
        conn_.Where(), have, want);
  }
  return Status::Ok();
}

Status RedisStore::Acked(Status written) {
  if (written.ok()) return conn_.WaitForReplicas();
  if (written.code() != Code::kConflict) return written;
  Status replicated = conn_.WaitForReplicas();
  return replicated.ok() ? written : replicated;
}

Result<Reply> RedisStore::Run(const LuaScript& script, std::vector<std::string> args) {
  Result<Reply> reply = conn_.Eval(script, args);
  if (!reply.ok()) return reply;
  const redisReply* r = reply->get();
  if (r->type != REDIS_REPLY_ARRAY || r->elements == 0) {
    return Status::Internal(fmt::format("script {} gave no answer", script.name));
  }
  std::string_view kind = Text(r->element[0]);
  if (kind == "ok") return reply;
  return RefusalStatus(kind, r->elements > 1 ? std::string(Text(r->element[1])) : std::string());
}

Status RedisStore::Backup(const std::string& /*dest*/) {
  return Status::Invalid(
      "the Redis store is backed up by Redis itself, not by trainq: run BGSAVE and copy the "
      "RDB file, or copy the AOF directory (docs/cluster.md, \"Durability\")");
}

// --- Submit and reads ---

Result<std::vector<JobId>> RedisStore::Submit(std::span<const JobSpec> specs, UnixMs now) {
  if (specs.empty()) return std::vector<JobId>{};
  for (int i = 0; i < kSubmitTries; ++i) {
    Result<std::optional<std::vector<JobId>>> ids = TrySubmit(specs, now);
    if (!ids.ok()) return ids.status();
    if (!*ids) continue;  // a dependency changed under it
    // Not acked: stored but not replicated. The submit's Idempotency-Key is stored with the
    // jobs, so the client's retry is answered with these ids rather than storing them again.
    TRAINQ_RETURN_IF_ERROR(conn_.WaitForReplicas());
    return std::move(**ids);
  }
  return Status::Unavailable("submit: the jobs it depends on kept changing; try again");
}

namespace {

// A large environment is stored once per submit: the job's "env" field becomes "env_ref",
// the number of its text among `bodies` (the submit script stores each once). Sets the
// job's stored_bytes, counting a shared environment on the first job that carries it.
void ShareEnv(const JobSpec& spec, Fields& fields, std::map<std::string, size_t>& shared,
              std::vector<std::string>& bodies) {
  auto env =
      std::find_if(fields.begin(), fields.end(), [](const auto& f) { return f.first == "env"; });
  size_t env_bytes = env->second.size();
  if (env_bytes >= kSharedEnvBytes) {
    auto [it, added] = shared.try_emplace(env->second, bodies.size() + 1);
    if (added) bodies.push_back(std::move(env->second));
    if (!added) env_bytes = 0;
    *env = {"env_ref", std::to_string(it->second)};
  }
  fields.emplace_back("stored_bytes", std::to_string(RecordBytes(spec, env_bytes)));
}

}  // namespace

// Judges each job's dependencies from their states read now, then stores everything in one
// script that first checks those states are still the same.
Result<std::optional<std::vector<JobId>>> RedisStore::TrySubmit(std::span<const JobSpec> specs,
                                                                UnixMs now) {
  std::vector<std::string> checks;
  std::vector<std::string> jobs;
  std::map<std::string, size_t> shared_envs;  // a large env's text -> its number in env_bodies
  std::vector<std::string> env_bodies;
  for (size_t i = 0; i < specs.size(); ++i) {
    const JobSpec& spec = specs[i];
    DepDecision start;
    if (spec.has_deps()) {
      std::vector<DepState> deps;
      auto read = [&](JobId id, const char* field) -> Status {
        Result<Reply> r = Command({"HMGET", Key("job:" + Num(id)), "state", "reason"});
        if (!r.ok()) return r.status();
        std::optional<JobState> state = ParseState(Text((*r)->element[0]));
        if (!state) {
          std::string where = specs.size() > 1 ? fmt::format("jobs[{}]: ", i) : "";
          return Status::Invalid(fmt::format("{}{}: no job {}", where, field, id));
        }
        deps.push_back({id, true, *state, std::string(Text((*r)->element[1]))});
        checks.push_back(Num(id));
        checks.emplace_back(StateName(*state));
        return Status::Ok();
      };
      for (JobId id : spec.after) TRAINQ_RETURN_IF_ERROR(read(id, "after"));
      for (JobId id : spec.after_any) TRAINQ_RETURN_IF_ERROR(read(id, "after_any"));
      start = DecideDeps(spec, deps);
    }
    Fields fields = NewJobFields(spec, now, SubmitStart(spec, start));
    ShareEnv(spec, fields, shared_envs, env_bodies);
    jobs.push_back(Num(static_cast<int64_t>(fields.size())));
    for (auto& [name, value] : fields) {
      jobs.push_back(std::move(name));
      jobs.push_back(std::move(value));
    }
  }
  std::vector<std::string> args = {Num(static_cast<int64_t>(checks.size() / 2))};
  args.insert(args.end(), checks.begin(), checks.end());
  args.push_back(Num(static_cast<int64_t>(env_bodies.size())));
  args.insert(args.end(), env_bodies.begin(), env_bodies.end());
  args.push_back(Num(static_cast<int64_t>(specs.size())));
  args.insert(args.end(), jobs.begin(), jobs.end());
  Result<Reply> reply = conn_.Eval(SubmitScript(), args);
  if (!reply.ok()) return reply.status();
  const redisReply* r = reply->get();
  if (r->type != REDIS_REPLY_ARRAY || r->elements == 0)
    return Status::Internal("submit: no answer");
  if (Text(r->element[0]) == "retry") return std::optional<std::vector<JobId>>();
  if (Text(r->element[0]) != "ok" || r->elements < 2) return Status::Internal("submit: bad answer");
  std::vector<JobId> ids;
  for (size_t i = 0; i < r->element[1]->elements; ++i)
    ids.push_back(r->element[1]->element[i]->integer);
  return std::optional(std::move(ids));
}

Result<std::vector<JobId>> RedisStore::IdsForSubmitKey(const std::string& user,
                                                       const std::string& key) {
  std::vector<JobId> ids;
  if (key.empty()) return ids;
  Result<Reply> r =
      Command({"LRANGE", Key(fmt::format("submit:{}:{}{}", user.size(), user, key)), "0", "-1"});
  if (!r.ok()) return r.status();
  for (size_t i = 0; i < (*r)->elements; ++i) {
    ids.push_back(std::atoll(std::string(Text((*r)->element[i])).c_str()));
  }
  return ids;
}

Result<std::vector<Job>> JobsFromReply(const redisReply* jobs) {
  std::vector<Job> out;
  for (size_t i = 0; i < jobs->elements; ++i) {
    const redisReply* entry = jobs->element[i];
    if (entry->type != REDIS_REPLY_ARRAY || entry->elements != 2) continue;
    Result<Job> job = ReadJob(entry->element[0]);
    if (!job.ok()) return job.status();
    const redisReply* attempts = entry->element[1];
    for (size_t k = 0; k < attempts->elements; ++k) {
      Result<Attempt> a = ReadAttempt(attempts->element[k]);
      if (!a.ok()) return a.status();
      job->attempts.push_back(std::move(*a));
    }
    out.push_back(std::move(*job));
  }
  return out;
}

Result<std::vector<Job>> RedisStore::ReadJobs(std::span<const std::string> ids,
                                              bool with_attempts) {
  std::vector<std::string> args = {with_attempts ? "1" : "0", "1"};
  args.insert(args.end(), ids.begin(), ids.end());
  Result<Reply> reply = Run(ReadJobsScript(), std::move(args));
  if (!reply.ok()) return reply.status();
  return JobsFromReply((*reply)->element[1]);
}

Result<Job> RedisStore::Get(JobId id) {
  std::string key = Num(id);
  Result<std::vector<Job>> jobs = ReadJobs(std::span(&key, 1), true);
  if (!jobs.ok()) return jobs.status();
  if (jobs->empty()) return Status::NotFound("no job " + key);
  return std::move(jobs->front());
}

Result<std::vector<Job>> RedisStore::List(const ListQuery& query) {
  std::vector<JobState> states = query.states;
  std::sort(states.begin(), states.end());
  states.erase(std::unique(states.begin(), states.end()), states.end());
  // Jobs without an attempt are left out after reading (only_started), so the limit too.
  std::vector<std::string> args = {Num(query.after_id),
                                   Num(query.only_started ? 0 : std::max(query.limit, 0)),
                                   query.user,
                                   query.with_attempts ? "1" : "0",
                                   query.with_env ? "1" : "0",
                                   Num(query.group)};
  for (JobState s : states) args.emplace_back(StateName(s));
  Result<Reply> reply = Run(ListScript(), std::move(args));
  if (!reply.ok()) return reply.status();
  Result<std::vector<Job>> jobs = JobsFromReply((*reply)->element[1]);
  if (!jobs.ok() || !query.only_started) return jobs;
  std::erase_if(*jobs, [](const Job& job) { return job.attempts.empty(); });
  if (query.limit > 0 && jobs->size() > static_cast<size_t>(query.limit)) {
    jobs->erase(jobs->begin() + query.limit, jobs->end());
  }
  return jobs;
}

Result<std::vector<Job>> RedisStore::Dependents(JobId id) {
  Result<std::vector<Job>> blocked = List({.states = {JobState::kBlocked}});
  if (!blocked.ok()) return blocked;
  std::erase_if(*blocked, [id](const Job& job) {
    auto names = [id](const std::vector<JobId>& ids) {
      return std::find(ids.begin(), ids.end(), id) != ids.end();
    };
    return !names(job.spec.after) && !names(job.spec.after_any);
  });
  return blocked;
}

// --- Transitions: each one script ---

namespace {

// A gang's parts: JSON for readers, and their nodes as a list the scripts walk (node names
// hold no comma: ValidNodeName). Both "" for none.
std::pair<std::string, std::string> PartsFields(std::span<const AttemptPart> parts) {
  if (parts.empty()) return {};
  nlohmann::json doc = nlohmann::json::array();
  std::vector<std::string> nodes;
  for (const AttemptPart& part : parts) {
    doc.push_back({{"node", part.node},
                   {"gpu_indices", part.gpu_indices},
                   {"gpu_uuids", part.gpu_uuids},
                   {"run_dir", part.run_dir},
                   {"log_path", part.log_path}});
    if (part.added_at > 0) doc.back()["added_at"] = part.added_at;
    nodes.push_back(part.node);
  }
  return {doc.dump(), fmt::format("{}", fmt::join(nodes, ","))};
}

}  // namespace

Status RedisStore::AddPart(JobId id, int attempt, std::span<const AttemptPart> before,
                           const AttemptPart& added) {
  std::vector<AttemptPart> after(before.begin(), before.end());
  after.push_back(added);
  auto [parts, part_nodes] = PartsFields(after);
  return Acked(RunStatus(
      AddPartScript(),
      {fence_, Num(id), Num(attempt), PartsFields(before).second, part_nodes, parts, added.node}));
}

Status RedisStore::StartAttempt(JobId id, int expected_attempt, const Placement& p, UnixMs now) {
  auto [parts, part_nodes] = PartsFields(p.parts);
  return Acked(RunStatus(
      StartScript(),
      {fence_, Num(id), Num(expected_attempt), FromCsv(Move::kStart),
       StatesText(MoveFrom(Move::kStart)) + " with attempt " + Num(expected_attempt), p.node,
       fmt::format("{}", fmt::join(p.gpu_indices, ",")), EncodeStrings(p.gpu_uuids),
       std::to_string(p.reserved_bytes), Num(p.cpus), p.run_dir, p.log_path, Num(now),
       Num(p.master_port), part_nodes, parts, p.master_addr}));
}

Status RedisStore::MarkRunning(JobId id, int attempt, int64_t pid, uint64_t pid_start_ticks,
                               UnixMs /*now*/) {
  return RunStatus(RunScript(), {Num(id), Num(attempt), FromCsv(Move::kRun),
                                 StatesText(MoveFrom(Move::kRun)) + " with attempt " + Num(attempt),
                                 Num(pid), std::to_string(pid_start_ticks)});
}

Status RedisStore::FinishAttempt(JobId id, int attempt, const AttemptEnd& end) {
  TRAINQ_RETURN_IF_ERROR(CheckAttemptEnd(end));
  return Acked(RunStatus(
      FinishScript(), {Num(id), Num(attempt), FromCsv(Move::kFinish),
                       StatesText(MoveFrom(Move::kFinish)) + " with attempt " + Num(attempt),
                       std::string(StateName(end.job_state)), end.job_reason, Num(end.not_before),
                       Num(end.ended_at), std::string(StateName(end.attempt_state)),
                       end.exit_code ? Num(*end.exit_code) : "", end.signal ? Num(*end.signal) : "",
                       end.oom ? "1" : "0", end.end_reason, Num(end.part), Num(end.parts),
                       end.exclude_node.empty() ? "" : EncodeStrings({end.exclude_node}),
                       std::to_string(end.log_bytes)}));
}

Result<std::vector<JobId>> RedisStore::Forget(std::span<const JobId> ids,
                                              std::span<const AcctRow> summaries) {
  std::vector<JobId> gone;
  // Scripts of bounded size: a huge `clean` does not hold Redis for long at a time.
  constexpr size_t kChunk = 500;
  for (size_t from = 0; from < ids.size(); from += kChunk) {
    std::vector<std::string> args;
    for (size_t i = from; i < std::min(ids.size(), from + kChunk); ++i) {
      args.push_back(Num(ids[i]));
      args.push_back(summaries.empty() ? "" : AcctToJson(summaries[i]).dump());
    }
    Result<Reply> reply = Run(ForgetScript(), std::move(args));
    if (!reply.ok()) return reply.status();
    const redisReply* list = (*reply)->element[1];
    for (size_t i = 0; i < list->elements; ++i) gone.push_back(list->element[i]->integer);
  }
  return gone;
}

Result<std::vector<AcctRow>> RedisStore::AcctRecords(const std::string& user, UnixMs since) {
  Result<Reply> reply = Command({"HVALS", Key("acct")});
  if (!reply.ok()) return reply.status();
  std::vector<AcctRow> out;
  const redisReply* list = reply->get();
  for (size_t i = 0; i < list->elements; ++i) {
    Result<AcctRow> r = AcctFromJson(std::string(list->element[i]->str, list->element[i]->len));
    if (!r.ok()) return r.status();
    if ((user.empty() || r->user == user) && r->ended_at >= since) out.push_back(std::move(*r));
  }
  std::sort(out.begin(), out.end(), [](const AcctRow& a, const AcctRow& b) { return a.id < b.id; });
  return out;
}

// The id counter: ids are given by INCRBY and never again, so every id above it is newer.
Result<JobId> RedisStore::LastId() {
  Result<Reply> reply = Command({"GET", Key("next_id")});
  if (!reply.ok()) return reply.status();
  const redisReply* r = reply->get();
  if (r->type == REDIS_REPLY_NIL) return JobId{0};
  if (r->type != REDIS_REPLY_STRING) return Status::Internal("last id: bad answer");
  return static_cast<JobId>(std::strtoll(r->str, nullptr, 10));
}

Result<UserFootprint> RedisStore::Footprint(const std::string& user) {
  Result<Reply> reply = Run(FootprintScript(), {user});
  if (!reply.ok()) return reply.status();
  const redisReply* r = reply->get();
  if (r->elements < 3) return Status::Internal("footprint: bad answer");
  UserFootprint out;
  out.waiting_jobs = r->element[1]->integer;
  out.stored_bytes = static_cast<uint64_t>(std::max<long long>(0, r->element[2]->integer));
  return out;
}

Status RedisStore::RecordPeak(JobId id, int attempt, uint64_t bytes) {
  return RunStatus(PeakScript(), {Num(id), Num(attempt), std::to_string(bytes)});
}

Status RedisStore::AddUsage(JobId id, int attempt, const AttemptUsage& add) {
  return RunStatus(
      UsageScript(),
      {Num(id), Num(attempt), std::to_string(add.held_gpu_ms), std::to_string(add.util_known_ms),
       std::to_string(add.busy_gpu_ms), std::to_string(add.mem_byte_s)});
}

Status RedisStore::CancelWaiting(JobId id, const std::string& reason) {
  return Acked(
      RunStatus(CancelWaitingScript(), {Num(id), FromCsv(Move::kCancelWaiting),
                                        StatesText(MoveFrom(Move::kCancelWaiting)), reason}));
}

Status RedisStore::Requeue(JobId id, const std::string& reason, UnixMs now) {
  return RunStatus(RequeueScript(), {Num(id), FromCsv(Move::kRequeue),
                                     StatesText(MoveFrom(Move::kRequeue)), reason, Num(now)});
}

Status RedisStore::MoveWaiting(JobId id, JobState from, JobState to, const std::string& reason,
                               UnixMs now) {
  if (!MoveAllowed(Move::kResolve, from, to) && !MoveAllowed(Move::kBlock, from, to)) {
    return Status::Invalid(fmt::format("dependencies cannot move a job from {} to {}",
                                       StateName(from), StateName(to)));
  }
  return RunStatus(MoveWaitingScript(), {Num(id), std::string(StateName(from)),
                                         std::string(StateName(to)), reason, Num(now)});
}

Status RedisStore::UpdateJob(JobId id, const JobSpec& spec, UnixMs not_before,
                             const std::string& reason, bool running) {
  std::vector<std::string> args = {Num(id), running ? "1" : "0", Num(not_before), reason};
  for (auto& [field, value] : ChangeableFields(spec, running)) {
    args.push_back(field);
    args.push_back(value);
  }
  return RunStatus(UpdateJobScript(), std::move(args));
}

Status RedisStore::SetReasons(std::span<const std::pair<JobId, std::string>> reasons) {
  if (reasons.empty()) return Status::Ok();
  std::vector<std::string> args = {fence_};
  for (const auto& [id, reason] : reasons) {
    args.push_back(Num(id));
    args.push_back(reason);
  }
  return RunStatus(SetReasonsScript(), std::move(args));
}

// --- Tokens ---

Status RedisStore::AddToken(const TokenRecord& t) {
  TRAINQ_RETURN_IF_ERROR(CheckTokenName(t.name));
  if (!IsTokenDigest(t.hash)) {
    return Status::Invalid("hash: expected a SHA-256 digest, 64 lowercase hex digits");
  }
  return RunStatus(AddTokenScript(),
                   {t.name, t.hash, std::string(RoleName(t.role)), t.user, Num(t.created_at),
                    Num(t.expires_at), Num(t.revoked_at), t.created_by, t.signature});
}

Result<std::vector<TokenRecord>> RedisStore::ListTokens() {
  Result<Reply> hashes = Command({"LRANGE", Key("tokens"), "0", "-1"});
  if (!hashes.ok()) return hashes.status();
  std::vector<TokenRecord> tokens;
  for (size_t i = 0; i < (*hashes)->elements; ++i) {
    Result<Reply> h =
        Command({"HGETALL", Key("token:" + std::string(Text((*hashes)->element[i])))});
    if (!h.ok()) return h.status();
    Result<TokenRecord> t = ReadToken(h->get());
    if (!t.ok()) return t.status();
    tokens.push_back(std::move(*t));
  }
  std::stable_sort(tokens.begin(), tokens.end(), [](const TokenRecord& a, const TokenRecord& b) {
    return a.created_at < b.created_at;
  });
  return tokens;
}

Status RedisStore::RevokeToken(const std::string& name, UnixMs now) {
  return RunStatus(RevokeTokenScript(), {name, Num(now)});
}

Result<std::optional<TokenRecord>> RedisStore::FindTokenByHash(const std::string& hash) {
  if (!IsTokenDigest(hash)) return std::optional<TokenRecord>();
  Result<Reply> h = Command({"HGETALL", Key("token:" + hash)});
  if (!h.ok()) return h.status();
  if ((*h)->elements == 0) return std::optional<TokenRecord>();
  Result<TokenRecord> t = ReadToken(h->get());
  if (!t.ok()) return t.status();
  return std::optional<TokenRecord>(std::move(*t));
}

}  // namespace trainq::redis
