#include "src/daemon/stager.h"

#include <algorithm>
#include <chrono>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "src/core/duration.h"
#include "src/core/transfers.h"
#include "src/daemon/cluster_key.h"
#include "src/os/crypto/token_crypto.h"
#include "src/os/fd.h"
#include "src/os/permissions.h"
#include "src/os/process.h"
#include "src/os/run_dir.h"
#include "src/os/system.h"
#include "src/os/user_file.h"
#include "src/os/users.h"
#include "trainq/size.h"

namespace trainq {

namespace {

using Steady = std::chrono::steady_clock;

constexpr uint64_t kMaxManifestBytes = 256ull << 20;
constexpr size_t kMaxHeld = 256;  // manifests a node reports holding
// Manifests kept parsed: a job shipping what an earlier one shipped asks for none of them.
constexpr size_t kKnownManifests = 32;
constexpr size_t kMaxGetBytes = 8u << 20;

// The manifest text the holder keeps for `t`, opened as OpenUserFile does (as `as`, when given:
// the client wrote it in its user's store), bounded, and checked against the hash the job's
// (signed) record names.
Result<std::string> ManifestTextOf(const Transfer& t, const UserInfo* as = nullptr) {
  Result<std::string> text = ReadUserFile(t.manifest_path, kMaxManifestBytes, as);
  if (!text.ok()) {
    std::string why = text.status().code() == Code::kInvalid
                          ? fmt::format("; a manifest is a regular file of at most {}",
                                        FormatBytes(kMaxManifestBytes))
                          : "";
    return Status(text.status().code(), "manifest " + text.status().message() + why);
  }
  Sha256 h;
  h.Add(*text);
  if (h.HexDigest() != t.manifest) {
    return Status::Conflict(
        fmt::format("manifest {} is not the one the job was submitted with (its SHA-256 differs)",
                    t.manifest_path));
  }
  return text;
}

bool IsHex64(std::string_view s) {
  return s.size() == 64 && s.find_first_not_of("0123456789abcdef") == std::string_view::npos;
}

std::string Rate(uint64_t bytes, Steady::duration took) {
  double s = std::chrono::duration<double>(took).count();
  if (s <= 0.05) return "";
  return fmt::format(", {}/s", FormatBytes(static_cast<uint64_t>(static_cast<double>(bytes) / s)));
}

}  // namespace

struct Stager::Work {
  Job job;
  PeerGet get;
  std::function<void()> wake;
  Steady::time_point started = Steady::now();
  // Under mu_:
  bool done = false;
  Status status;
  StagedPaths paths;
  ChunkCache::Progress progress;
  std::string pin;
  std::string waiting;               // why the holder is being waited for ("" while it answers)
  std::string abandon;               // set by Abandon: the staging ends with this
  std::condition_variable_any poke;  // Abandon wakes a retry's wait
  int collect = 0;                   // the attempt whose outputs come back (Collect); 0: a staging
};

Stager::Stager(Parts parts) : p_(std::move(parts)) {
  Result<std::unique_ptr<ChunkCache>> cache = ChunkCache::Open(p_.cache_dir, p_.cache_cap_bytes);
  if (cache.ok()) {
    cache_ = std::move(*cache);
  } else {
    cache_status_ = cache.status();
    spdlog::warn("chunk cache {}: {}; jobs shipped from other nodes cannot run here", p_.cache_dir,
                 cache.status().message());
  }
  thread_ = std::jthread([this](std::stop_token stop) {
    stop_ = stop;
    Loop(stop);
  });
}

Stager::~Stager() {
  {
    std::lock_guard lock(detached_->mu);
    detached_->closed = true;
  }
  thread_.request_stop();
  wake_.notify_all();
}

bool Stager::NeedsStaging(const Job& job) const {
  return !job.spec.transfers.empty() && !job.spec.signed_by.empty() &&
         job.spec.signed_by != p_.node;
}

Stager::State Stager::Stage(const Job& job, PeerGet get, std::function<void()> wake,
                            StagedPaths* out, std::string* failure) {
  std::lock_guard lock(mu_);
  if (auto it = work_.find(job.id); it != work_.end()) {
    Work& w = *it->second;
    if (!w.done) return State::kStaging;
    if (w.status.ok()) {
      *out = w.paths;
      return State::kReady;
    }
    *failure = w.status.message();
    work_.erase(it);
    return State::kFailed;
  }
  auto w = std::make_shared<Work>();
  w->job = job;
  w->get = std::move(get);
  w->wake = std::move(wake);
  w->pin = fmt::format("job {}", job.id);
  work_[job.id] = w;
  queue_.push_back(w);
  wake_.notify_all();
  return State::kStaging;
}

std::string Stager::Progress(JobId id) const {
  std::lock_guard lock(mu_);
  auto it = work_.find(id);
  if (it == work_.end() || it->second->done) return "";
  const Work& w = *it->second;
  const ChunkCache::Progress& p = w.progress;
  if (!w.waiting.empty()) {
    return fmt::format("staging {}/{} to {}: waits for {}",
                       FormatBytes(p.bytes_present + p.bytes_fetched), FormatBytes(p.bytes_total),
                       p_.node, w.waiting);
  }
  if (p.bytes_total == 0) {
    return fmt::format("staging from {}: reading what it ships", w.job.spec.signed_by);
  }
  return fmt::format("staging {}/{} to {} from {}{}",
                     FormatBytes(p.bytes_present + p.bytes_fetched), FormatBytes(p.bytes_total),
                     p_.node, w.job.spec.signed_by,
                     Rate(p.bytes_fetched, Steady::now() - w.started));
}

void Stager::Release(JobId id) {
  std::lock_guard lock(mu_);
  auto it = work_.find(id);
  if (it == work_.end() || !it->second->done) return;
  if (cache_) cache_->Unpin(it->second->pin);
  work_.erase(it);
}

void Stager::Retain(const std::vector<Job>& jobs) {
  std::set<JobId> active;
  std::set<std::string> copies;
  for (const Job& job : jobs) {
    active.insert(job.id);
    copies.merge(SharedCopiesOf(job));
  }
  std::lock_guard lock(mu_);
  active_copies_ = std::move(copies);
  for (auto it = work_.begin(); it != work_.end();) {
    if (it->second->done && !active.count(it->first)) {
      if (cache_) cache_->Unpin(it->second->pin);
      it = work_.erase(it);
    } else {
      ++it;
    }
  }
}

std::shared_ptr<const Manifest> Stager::KnownManifest(const std::string& sha) const {
  std::lock_guard lock(mu_);
  for (const auto& [known, m] : manifests_) {
    if (known == sha) return m;
  }
  return nullptr;
}

void Stager::RememberManifest(const std::string& sha, const Manifest& m) {
  std::lock_guard lock(mu_);
  manifests_.emplace_back(sha, std::make_shared<const Manifest>(m));
  if (manifests_.size() > kKnownManifests) manifests_.pop_front();
}

std::vector<std::string> Stager::HeldManifests() const {
  std::lock_guard lock(mu_);
  return {held_.begin(), held_.end()};
}

std::map<JobId, std::string> Stager::AllProgress() const {
  std::vector<JobId> ids;
  {
    std::lock_guard lock(mu_);
    for (const auto& [id, w] : work_) {
      if (!w->done) ids.push_back(id);
    }
  }
  std::map<JobId, std::string> out;
  for (JobId id : ids) {
    if (std::string p = Progress(id); !p.empty()) out[id] = std::move(p);
  }
  return out;
}

void Stager::Loop(std::stop_token stop) {
  while (!stop.stop_requested()) {
    std::shared_ptr<Work> w;
    {
      std::unique_lock lock(mu_);
      if (!wake_.wait(lock, stop, [this] { return !queue_.empty(); })) return;
      w = queue_.front();
      queue_.pop_front();
    }
    Status st = !cache_ ? cache_status_ : w->collect > 0 ? RunCollect(*w) : Run(*w);
    if (!st.ok()) {
      spdlog::warn("job {}: {} failed: {}", w->job.id,
                   w->collect > 0 ? fmt::format("collecting attempt {}", w->collect)
                                  : "staging from " + w->job.spec.signed_by,
                   st.message());
    }
    {
      std::lock_guard lock(mu_);
      w->done = true;
      w->status = st;
    }
    if (cache_) {
      // Files the copies link stay on disk after the cache lets them go.
      if (p_.cache_cap_bytes > 0 && cache_->bytes() > p_.cache_cap_bytes) {
        RemoveIdleSharedCopies();
      }
      cache_->Trim();
    }
    p_.post(w->wake);
  }
}

// `w.get`, sent again while the holder does not answer (a refusal is final), after a wait that
// doubles up to 20 times the first and then stays, until the stager stops, the staging is
// abandoned (its holder judged lost) or the holder has not answered for give_up_ms: the job
// waits meanwhile, its reason saying so.
Result<std::string> Stager::GetWithRetry(Work& w, const std::string& target) {
  int wait = p_.first_retry_ms;
  auto since = std::chrono::steady_clock::now();
  for (int tries = 1;; ++tries) {
    Result<std::string> got = w.get(target);
    std::unique_lock lock(mu_);
    if (got.ok() || got.status().code() != Code::kUnavailable) {
      w.waiting.clear();
      return got;
    }
    auto silent = std::chrono::steady_clock::now() - since;
    if (silent >= std::chrono::milliseconds(p_.give_up_ms)) {
      w.waiting.clear();
      return Status::Unavailable(fmt::format(
          "node {}, which holds it, did not answer for {} ({} tries): {}", w.job.spec.signed_by,
          FormatDuration(p_.give_up_ms), tries, got.status().message()));
    }
    w.waiting = fmt::format("node {}, which holds it, does not answer ({} tries): {}",
                            w.job.spec.signed_by, tries, got.status().message());
    w.poke.wait_for(lock, stop_, std::chrono::milliseconds(wait),
                    [&] { return !w.abandon.empty(); });
    if (!w.abandon.empty()) return Status::Unavailable(w.abandon);
    if (stop_.stop_requested()) return got;
    wait = std::min(wait * 2, 20 * p_.first_retry_ms);
  }
}

void Stager::Abandon(JobId id, const std::string& why) {
  std::lock_guard lock(mu_);
  auto it = work_.find(id);
  if (it == work_.end() || it->second->done) return;
  it->second->abandon = why;
  it->second->poke.notify_all();
}

std::map<JobId, std::string> Stager::Holders() const {
  std::lock_guard lock(mu_);
  std::map<JobId, std::string> out;
  for (const auto& [id, w] : work_) {
    if (!w->done) out[id] = w->job.spec.signed_by;
  }
  return out;
}

Status Stager::Run(Work& w) {
  const JobSpec& spec = w.job.spec;
  std::vector<Manifest> manifests;
  uint64_t total = 0;
  for (size_t i = 0; i < spec.transfers.size(); ++i) {
    if (std::shared_ptr<const Manifest> known = KnownManifest(spec.transfers[i].manifest)) {
      total += known->bytes;
      manifests.push_back(*known);
      continue;
    }
    std::string target = CanonicalTarget(fmt::format("/v1/jobs/{}/transfer", w.job.id),
                                         {{"i", std::to_string(i)}, {"manifest", "1"}});
    Result<std::string> text = GetWithRetry(w, target);
    if (!text.ok()) return text.status();
    Sha256 h;
    h.Add(*text);
    if (h.HexDigest() != spec.transfers[i].manifest) {
      return Status::Io(fmt::format("the manifest of {} from {} is not the one submitted",
                                    spec.transfers[i].src, spec.signed_by));
    }
    Result<Manifest> m = ParseManifest(*text);
    if (!m.ok()) return m.status();
    total += m->bytes;
    RememberManifest(spec.transfers[i].manifest, *m);
    manifests.push_back(std::move(*m));
  }
  ChunkCache::Progress done;  // of the transfers already filled
  done.bytes_total = total;
  Result<RunAs> owner = OwnerOf(spec);
  if (!owner.ok()) return owner.status();
  // A --stage copy this user's jobs share here, whole and unchanged: nothing to fill or link.
  std::vector<bool> shared(manifests.size(), false);
  for (size_t i = 0; i < manifests.size(); ++i) {
    const Transfer& t = spec.transfers[i];
    std::string copy = SharedCopy(owner->uid, t.manifest);
    if (t.kind == TransferKind::kStage && Untouched(manifests[i], copy) &&
        cache_->Linked(manifests[i], copy, w.pin)) {
      shared[i] = true;
      done.bytes_present += manifests[i].bytes;
    }
  }
  for (size_t i = 0; i < manifests.size(); ++i) {
    if (shared[i]) continue;
    auto fetch = [&](const std::vector<ChunkRef>& chunks) -> Result<std::string> {
      std::string names;
      for (const ChunkRef& c : chunks) names += (names.empty() ? "" : ",") + c.hash;
      return GetWithRetry(w, CanonicalTarget(fmt::format("/v1/jobs/{}/transfer", w.job.id),
                                             {{"c", names}, {"i", std::to_string(i)}}));
    };
    ChunkCache::Progress last;
    auto progress = [&](const ChunkCache::Progress& p) {
      last = p;
      std::lock_guard lock(mu_);
      w.progress = done;
      w.progress.bytes_present += p.bytes_present;
      w.progress.bytes_fetched += p.bytes_fetched;
      w.progress.bytes_refetched += p.bytes_refetched;
    };
    TRAINQ_RETURN_IF_ERROR(cache_->Fill(manifests[i], w.pin, fetch, progress));
    done.bytes_present += manifests[i].bytes - std::min(manifests[i].bytes, last.bytes_fetched);
    done.bytes_fetched += last.bytes_fetched;
    done.bytes_refetched += last.bytes_refetched;
  }
  Result<StagedPaths> paths = Build(w, manifests, *owner, shared);
  if (!paths.ok()) return paths.status();
  std::lock_guard lock(mu_);
  for (const Transfer& t : spec.transfers) {
    if (std::find(held_.begin(), held_.end(), t.manifest) != held_.end()) continue;
    held_.push_back(t.manifest);
    if (held_.size() > kMaxHeld) held_.pop_front();
  }
  const ChunkCache::Progress& p = done;
  paths->notice = fmt::format(
      "trainq: node {} fetched {} of the job's {} from node {} ({} were here already{})", p_.node,
      FormatBytes(p.bytes_fetched), FormatBytes(total), spec.signed_by,
      FormatBytes(total > p.bytes_fetched ? total - p.bytes_fetched : 0),
      p.bytes_refetched > 0
          ? fmt::format("; {} fetched again after a failed check", FormatBytes(p.bytes_refetched))
          : "");
  w.paths = std::move(*paths);
  return Status::Ok();
}

// The job's copies in STATE/staged/JOB/INDEX, each made once (under a temporary name, then
// renamed), owned by the job's user on a shared daemon.
Result<RunAs> Stager::OwnerOf(const JobSpec& spec) const {
  RunAs as{static_cast<uid_t>(EffectiveUid()), static_cast<gid_t>(EffectiveGid()), {}};
  if (!p_.shared) return as;
  Result<UserInfo> user = LookupUserByName(spec.user);
  if (!user.ok()) return user.status();
  as.uid = static_cast<uid_t>(user->uid);
  as.gid = static_cast<gid_t>(user->gid);
  for (int64_t g : GroupList(spec.user, user->gid)) as.groups.push_back(static_cast<gid_t>(g));
  return as;
}

Result<StagedPaths> Stager::Build(Work& w, const std::vector<Manifest>& manifests,
                                  const RunAs& owner, const std::vector<bool>& shared) {
  const JobSpec& spec = w.job.spec;
  uid_t uid = owner.uid;
  gid_t gid = owner.gid;
  TRAINQ_RETURN_IF_ERROR(MakeDirs(p_.staged_dir));
  (void)ChangeMode(p_.staged_dir, 0711);
  std::string dir = fmt::format("{}/{}", p_.staged_dir, w.job.id);
  TRAINQ_RETURN_IF_ERROR(MakeDir(dir, 0700));
  TRAINQ_RETURN_IF_ERROR(ChangeOwner(dir, uid, gid));
  StagedPaths out;
  for (size_t i = 0; i < manifests.size(); ++i) {
    const Transfer& t = spec.transfers[i];
    std::string copy = fmt::format("{}/{}", dir, i);
    if (t.kind == TransferKind::kStage) {
      if (!shared[i]) TRAINQ_RETURN_IF_ERROR(Share(manifests[i], t.manifest, uid, gid));
      continue;
    }
    if (t.kind == TransferKind::kTree) {
      std::string rel = spec.cwd.starts_with(t.src) ? spec.cwd.substr(t.src.size()) : "";
      out.cwd = copy + rel;
    }
    if (LstatFacts(copy).exists) continue;  // made for an earlier attempt
    Manifest m = manifests[i];
    if (t.kind == TransferKind::kTree) {
      // The links to the work tree it ships become links to their copies (the shim makes them).
      std::erase_if(m.entries, [&](const ManifestEntry& e) {
        return e.kind == 'l' &&
               std::any_of(spec.transfers.begin(), spec.transfers.end(), [&](const Transfer& l) {
                 return l.kind == TransferKind::kLink && l.dst == e.path;
               });
      });
    }
    Result<std::string> temp = Building(fmt::format("{}-{}", w.job.id, i));
    if (!temp.ok()) return temp.status();
    TRAINQ_RETURN_IF_ERROR(cache_->Materialize(m, *temp, uid, gid));
    TRAINQ_RETURN_IF_ERROR(RenameFile(*temp, copy));
  }
  for (const Transfer& t : spec.transfers) {
    if (t.kind == TransferKind::kStage) {
      out.links.emplace_back(TransferDestination(t, out.cwd.empty() ? spec.cwd : out.cwd),
                             SharedCopy(uid, t.manifest));
    }
  }
  for (size_t i = 0; i < manifests.size(); ++i) {
    const Transfer& t = spec.transfers[i];
    if (t.kind != TransferKind::kLink) continue;
    for (size_t k = 0; k < manifests.size(); ++k) {
      if (spec.transfers[k].kind != TransferKind::kTree) continue;
      out.links.emplace_back(fmt::format("{}/{}/{}", dir, k, t.dst), fmt::format("{}/{}", dir, i));
    }
  }
  return out;
}

std::string Stager::SharedCopy(uid_t uid, const std::string& manifest) const {
  return fmt::format("{}/shared/{}/{}", p_.staged_dir, uid, manifest);
}

// A --stage copy is made once per user and manifest on a node and shared by that user's jobs
// that stage the same bytes (as Ray shares a working_dir package per node): a job whose data
// is here already starts without linking each file again. It is read-only (directories 0555,
// files 0444), in STATE/staged/shared/UID (0700, the user's). Remade when a file it links was
// rebuilt in the cache or an entry is gone; an idle one goes when the cache is over its cap.
Status Stager::Share(const Manifest& m, const std::string& manifest, uid_t uid, gid_t gid) {
  std::string path = SharedCopy(uid, manifest);
  if (Untouched(m, path) && cache_->Linked(m, path)) return Status::Ok();
  std::string base = p_.staged_dir + "/shared";
  std::string mine = fmt::format("{}/{}", base, uid);
  TRAINQ_RETURN_IF_ERROR(MakeDirs(mine));
  (void)ChangeMode(base, 0711);
  TRAINQ_RETURN_IF_ERROR(ChangeMode(mine, 0700));
  TRAINQ_RETURN_IF_ERROR(ChangeOwner(mine, uid, gid));
  Result<std::string> temp = Building(fmt::format("shared-{}-{}", uid, manifest));
  if (!temp.ok()) return temp.status();
  TRAINQ_RETURN_IF_ERROR(cache_->Materialize(m, *temp, uid, gid));
  for (const ManifestEntry& e : m.entries) {
    if (e.kind != 'd') continue;
    TRAINQ_RETURN_IF_ERROR(ChangeMode(*temp + "/" + e.path, 0555));
  }
  if (IsDirectory(*temp)) TRAINQ_RETURN_IF_ERROR(ChangeMode(*temp, 0555));
  // A running job reaches the copy by its path: the new one takes the place of the old at
  // once, and what the old linked is the same bytes (or what a rebuild replaced).
  std::string old = fmt::format("{}.old-{}", path, ++removed_);
  Status moved = RenameFile(path, old);
  if (!moved.ok() && moved.code() != Code::kNotFound) return moved;
  TRAINQ_RETURN_IF_ERROR(RenameFile(*temp, path));
  if (moved.ok()) RemoveAsOwner(old, RunAs{uid, gid, {}});
  if (PathFacts made = LstatFacts(path); made.exists) {
    std::lock_guard lock(mu_);
    made_[path] = made.ctime_ns;
  }
  return Status::Ok();
}

// Whether no directory of the shared copy at `path` changed since this daemon made it: the
// copy's own directory is as the last chmod of its making left it, and every directory in it
// older (an entry added, removed or renamed, a mode changed, moves its ctime). A copy made
// before a restart is made again once.
bool Stager::Untouched(const Manifest& m, const std::string& path) const {
  int64_t made = 0;
  {
    std::lock_guard lock(mu_);
    auto it = made_.find(path);
    if (it == made_.end()) return false;
    made = it->second;
  }
  PathFacts copy = LstatFacts(path);
  if (!copy.exists || copy.ctime_ns != made) return false;
  for (const ManifestEntry& e : m.entries) {
    if (e.kind != 'd') continue;
    PathFacts dir = LstatFacts(path + "/" + e.path);
    if (!dir.exists || dir.ctime_ns > made) return false;
  }
  return true;
}

Result<std::string> Stager::Building(const std::string& name) const {
  std::string area = p_.staged_dir + "/.new";
  TRAINQ_RETURN_IF_ERROR(MakeDirs(area));
  TRAINQ_RETURN_IF_ERROR(ChangeMode(area, 0700));
  std::string path = area + "/" + name;
  RemoveTree(path);  // a crash's leftover: no user ever reached it
  return path;
}

void Stager::RemoveAsOwner(const std::string& path, const RunAs& owner) const {
  if (!p_.shared || EffectiveUid() != 0 || owner.uid == 0) return RemoveTree(path);
  // What a user owns is removed by a process of that user: root walking a tree its owner
  // can change meanwhile (a directory swapped for a link) could be led anywhere.
  Status st =
      SpawnDetached({"/bin/sh", "-c", "chmod -R u+w -- \"$1\" 2>/dev/null; rm -rf -- \"$1\"",
                     "trainq-remove", path},
                    {"PATH=/usr/bin:/bin", "LC_ALL=C"}, owner);
  if (!st.ok()) spdlog::warn("removing {}: {}", path, st.message());
}

void Stager::Forget(const Job& job) {
  Result<RunAs> owner = OwnerOf(job.spec);
  if (!owner.ok()) return;
  for (const std::string& dir : {fmt::format("{}/{}", p_.staged_dir, job.id),
                                 fmt::format("{}/{}", CollectedDir(), job.id)}) {
    if (FileExists(dir)) RemoveAsOwner(dir, *owner);
  }
}

std::set<std::string> Stager::SharedCopiesOf(const Job& job) const {
  std::set<std::string> out;
  if (!NeedsStaging(job)) return out;
  Result<RunAs> owner = OwnerOf(job.spec);
  if (!owner.ok()) return out;
  for (const Transfer& t : job.spec.transfers) {
    if (t.kind == TransferKind::kStage) out.insert(SharedCopy(owner->uid, t.manifest));
  }
  return out;
}

void Stager::RemoveIdleSharedCopies() {
  std::set<std::string> used;
  {
    std::lock_guard lock(mu_);
    used = active_copies_;
    for (const auto& [id, w] : work_) used.merge(SharedCopiesOf(w->job));
  }
  auto entries = [](const std::string& dir) {
    Result<std::vector<std::string>> names = ListEntries(dir);
    return names.ok() ? std::move(*names) : std::vector<std::string>();
  };
  std::vector<std::pair<std::string, RunAs>> idle;
  std::string base = p_.staged_dir + "/shared";
  for (const std::string& user : entries(base)) {
    std::string dir = base + "/" + user;
    PathFacts facts = LstatFacts(dir);
    if (facts.symlink || !facts.directory) continue;
    RunAs owner{static_cast<uid_t>(facts.uid), static_cast<gid_t>(facts.gid), {}};
    for (const std::string& copy : entries(dir)) {
      if (used.count(dir + "/" + copy) == 0) idle.emplace_back(dir + "/" + copy, owner);
    }
  }
  for (const auto& [path, owner] : idle) RemoveAsOwner(path, owner);
}

Result<std::string> Stager::ServeManifest(const Job& job, size_t index) {
  if (index >= job.spec.transfers.size()) {
    return Status::NotFound(fmt::format("job {} ships {} trees; there is no {}", job.id,
                                        job.spec.transfers.size(), index));
  }
  return ManifestTextOf(job.spec.transfers[index]);
}

Result<Stager::Sources> Stager::SourcesOf(const Job& job, size_t index) {
  const Transfer& t = job.spec.transfers[index];
  if (auto it = sources_.find(t.manifest); it != sources_.end()) return it->second;
  Result<std::string> text = ManifestTextOf(t);
  if (!text.ok()) return text.status();
  Result<Manifest> m = ParseManifest(*text);
  if (!m.ok()) return m.status();
  if (sources_.size() >= 64) sources_.erase(sources_.begin());
  auto sources = std::make_shared<const std::map<std::string, ChunkSource>>(ChunkSources(*m));
  sources_[t.manifest] = sources;
  return sources;
}

namespace {

// The bytes of the chunks named by `hashes` (comma-separated), each read from `sources` and
// checked against its name.
Result<std::string> ChunksFrom(const std::map<std::string, ChunkSource>& sources,
                               std::string_view hashes, JobId id) {
  std::string out;
  out.reserve(kMaxGetBytes);
  size_t count = 0;
  for (size_t start = 0; start <= hashes.size();) {
    size_t end = std::min(hashes.find(',', start), hashes.size());
    std::string_view hash = hashes.substr(start, end - start);
    start = end + 1;
    if (!IsHex64(hash) || ++count > Stager::kMaxChunksPerGet) {
      return Status::Invalid(fmt::format(
          "c: expected up to {} chunk names (SHA-256, 64 lowercase hex digits), comma-separated",
          Stager::kMaxChunksPerGet));
    }
    auto it = sources.find(std::string(hash));
    if (it == sources.end()) {
      return Status::NotFound(fmt::format("job {} offers no chunk {}", id, hash));
    }
    Result<std::string> bytes = ReadChunk(it->second, it->first);
    if (!bytes.ok()) return bytes.status();
    out += *bytes;
    if (out.size() > 4 * kMaxGetBytes) break;
  }
  return out;
}

}  // namespace

void Stager::ReadOffLoop(Sources sources, std::string hashes, JobId id,
                         std::function<void(Result<std::string>)> done) {
  // Reading and checking up to 8 MiB takes milliseconds the loop owes everyone else.
  std::thread([shared = detached_, post = p_.post, sources = std::move(sources),
               hashes = std::move(hashes), id, done = std::move(done)]() mutable {
    Result<std::string> bytes = ChunksFrom(*sources, hashes, id);
    // Under the mutex: the stager (and the loop `post` reaches) outlives a post it lets in.
    std::lock_guard lock(shared->mu);
    if (shared->closed) return;
    post([done = std::move(done), bytes = std::move(bytes)]() mutable { done(std::move(bytes)); });
  }).detach();
}

void Stager::ServeChunks(const Job& job, size_t index, std::string hashes,
                         std::function<void(Result<std::string>)> done) {
  if (index >= job.spec.transfers.size()) {
    return done(Status::NotFound(fmt::format("job {} has no transfer {}", job.id, index)));
  }
  Result<Sources> sources = SourcesOf(job, index);
  if (!sources.ok()) return done(sources.status());
  ReadOffLoop(std::move(*sources), std::move(hashes), job.id, std::move(done));
}

void Stager::ServeOutputs(const Job& job, int n, const std::string& cwd,
                          std::function<void(Result<std::string>)> done) {
  // A root daemon offers only the files the job's user owns: what the job made, never what
  // a link swapped in meanwhile leads to.
  std::optional<uid_t> owner;
  if (p_.shared && EffectiveUid() == 0) {
    Result<RunAs> as = OwnerOf(job.spec);
    if (!as.ok()) return done(as.status());
    owner = as->uid;
  }
  // Checkpoints may be many GiB: hashed off the loop, by a thread that owns what it uses.
  std::thread([shared = detached_, post = p_.post, id = job.id, n, cwd, patterns = job.spec.collect,
               owner, done = std::move(done)]() mutable {
    Result<Manifest> m = MakeManifestOfMatches(cwd, patterns, {}, owner);
    Result<std::string> text = m.ok() ? Result<std::string>(ManifestText(*m)) : m.status();
    std::lock_guard lock(shared->mu);
    if (shared->closed) return;
    if (m.ok()) {
      shared->sources[{id, n}] =
          std::make_shared<const std::map<std::string, ChunkSource>>(ChunkSources(*m));
    }
    post([done = std::move(done), text = std::move(text)]() mutable { done(std::move(text)); });
  }).detach();
}

void Stager::ServeOutputChunks(JobId id, int n, std::string hashes,
                               std::function<void(Result<std::string>)> done) {
  Sources sources;
  {
    std::lock_guard lock(detached_->mu);
    auto it = detached_->sources.find({id, n});
    if (it == detached_->sources.end()) {
      return done(Status::NotFound(fmt::format(
          "job {} attempt {}: ask for the manifest of what it left first (manifest=1)", id, n)));
    }
    sources = it->second;
  }
  ReadOffLoop(std::move(sources), std::move(hashes), id, std::move(done));
}

void Stager::Collect(const Job& job, int n, PeerGet get) {
  std::lock_guard lock(mu_);
  if (!collects_.insert({job.id, n}).second || Collected(job.id, n)) return;
  auto w = std::make_shared<Work>();
  w->job = job;
  w->get = std::move(get);
  w->wake = [] {};
  w->collect = n;
  w->pin = fmt::format("collect {} {}", job.id, n);
  queue_.push_back(w);
  wake_.notify_all();
}

bool Stager::Collected(JobId id, int n) const {
  return FileExists(fmt::format("{}/{}/{}", CollectedDir(), id, n));
}

std::string Stager::CollectedDir() const {
  return p_.staged_dir.substr(0, p_.staged_dir.rfind('/')) + "/collected";
}

Status Stager::RunCollect(Work& w) {
  const JobSpec& spec = w.job.spec;
  std::string base = fmt::format("/v1/jobs/{}/outputs", w.job.id);
  std::string attempt = std::to_string(w.collect);
  Result<std::string> text =
      GetWithRetry(w, CanonicalTarget(base, {{"attempt", attempt}, {"manifest", "1"}}));
  if (!text.ok()) return text.status();
  Result<Manifest> m = ParseManifest(*text);
  if (!m.ok()) return m.status();
  std::string to = spec.collect_to.empty() ? spec.cwd : spec.collect_to;
  if (m->entries.empty()) {
    spdlog::info("job {} attempt {}: nothing matched --collect {}", w.job.id, w.collect,
                 fmt::join(spec.collect, " "));
    // Done all the same: the marker says so (Collect, ClusterMode::CollectPending).
    return MakeDirs(fmt::format("{}/{}/{}", CollectedDir(), w.job.id, w.collect));
  }
  auto fetch = [&](const std::vector<ChunkRef>& chunks) -> Result<std::string> {
    std::string names;
    for (const ChunkRef& c : chunks) names += (names.empty() ? "" : ",") + c.hash;
    return GetWithRetry(w, CanonicalTarget(base, {{"attempt", attempt}, {"c", names}}));
  };
  Status filled = cache_->Fill(*m, w.pin, fetch, nullptr);
  if (!filled.ok()) {
    cache_->Unpin(w.pin);
    return filled;
  }
  Result<RunAs> owner = OwnerOf(spec);
  if (!owner.ok()) return owner.status();
  uid_t uid = owner->uid;
  gid_t gid = owner->gid;
  std::optional<RunAs> as;
  if (p_.shared) as = *owner;
  // Built here first (links to the cache), then copied by the user's own process: the daemon
  // never writes into a user's directories.
  std::string dir = fmt::format("{}/{}", CollectedDir(), w.job.id);
  std::string copy = fmt::format("{}/{}", dir, w.collect);
  TRAINQ_RETURN_IF_ERROR(MakeDirs(dir));
  (void)ChangeMode(CollectedDir(), 0711);
  TRAINQ_RETURN_IF_ERROR(ChangeMode(dir, 0700));
  TRAINQ_RETURN_IF_ERROR(ChangeOwner(dir, uid, gid));
  // Made where no user reaches, then moved into the user's directory: a tree is never built
  // as root inside a directory its user can change.
  Result<std::string> temp = Building(fmt::format("collect-{}-{}", w.job.id, w.collect));
  if (!temp.ok()) return temp.status();
  Status made = cache_->Materialize(*m, *temp, uid, gid);
  cache_->Unpin(w.pin);
  if (!made.ok()) return made;
  TRAINQ_RETURN_IF_ERROR(RenameFile(*temp, copy));
  spdlog::info("job {} attempt {}: collecting {} file{} ({}) into {}", w.job.id, w.collect,
               m->files, m->files == 1 ? "" : "s", FormatBytes(m->bytes), to);
  return SpawnDetached(
      // tar, not cp: a directory of the copy lands in a link to a directory already there
      // (a snapshot's checkpoints/), where cp refuses to replace the link.
      {"/bin/sh", "-c",
       "mkdir -p -- \"$2\" && tar -C \"$1\" --mode=u+w -cf - . | "
       "tar -C \"$2\" --keep-directory-symlink --no-same-owner -xf -",
       "trainq-collect", copy, to},
      {"PATH=/usr/bin:/bin", "LC_ALL=C"}, as);
}

namespace {

// A source is what the client's walk took it for: a directory or a regular file, not a link.
Status CheckSource(const Transfer& t, const std::string& what, const UserInfo* as) {
  Result<UniqueFd> fd = OpenUserFile(t.src, FileWant::kRegularOrDirectory, as);
  if (fd.ok()) return Status::Ok();
  return Status::Invalid(fmt::format("{}: {}; a {} source is a directory or a regular file", what,
                                     fd.status().message(), what));
}

}  // namespace

Status Stager::CheckAtSubmit(const JobSpec& spec, const UserInfo* as) {
  // A manifest's hash names its text: once it parsed and matched, it does so again. The text
  // is still read and hashed (it may be gone), but a large one is not parsed at every submit.
  static std::mutex mu;
  static std::deque<std::string> checked;
  for (const Transfer& t : spec.transfers) {
    std::string what = t.kind == TransferKind::kStage ? "--stage" : "--snapshot";
    TRAINQ_RETURN_IF_ERROR(CheckSource(t, what, as));
    Result<std::string> text = ManifestTextOf(t, as);
    if (!text.ok()) {
      return Status::Invalid(fmt::format(
          "{}: {}; submit from the machine that holds {} (its trainq makes the manifest there)",
          what, text.status().message(), t.src));
    }
    std::string key = fmt::format("{} {} {} {}", t.manifest, t.bytes, t.files, t.src);
    {
      std::lock_guard lock(mu);
      if (std::find(checked.begin(), checked.end(), key) != checked.end()) continue;
    }
    Result<Manifest> m = ParseManifest(*text);
    if (!m.ok()) return Status::Invalid(fmt::format("{}: {}", what, m.status().message()));
    if (m->root != t.src || m->bytes != t.bytes || m->files != t.files) {
      return Status::Invalid(
          fmt::format("{}: the manifest {} describes {} ({} files, {}), not {} as submitted", what,
                      t.manifest_path, m->root, m->files, FormatBytes(m->bytes), t.src));
    }
    std::lock_guard lock(mu);
    checked.push_back(std::move(key));
    if (checked.size() > kKnownManifests) checked.pop_front();
  }
  return Status::Ok();
}

}  // namespace trainq
