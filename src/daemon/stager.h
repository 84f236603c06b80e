// The stager (docs/cluster.md, "Code and data"): what a job ships — its snapshot's tree, the
// directories that tree links to, its --stage sources — reaches the node that runs it.
// The node that stored the job (the holder) serves the manifests and chunks the client made
// at submit, read from the sources and checked against their names; another node fetches
// what its chunk cache lacks on a thread of its own, checks every chunk, and builds the job's
// copies in STATE/staged/JOB before the attempt starts there.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "src/daemon/agent.h"
#include "src/daemon/shipping.h"
#include "src/os/process.h"
#include "src/os/transfer.h"
#include "src/os/users.h"
#include "trainq/job.h"
#include "trainq/status.h"

namespace trainq {

class Stager final : public Shipping {
 public:
  struct Parts {
    std::string node;
    std::string staged_dir;  // STATE/staged: the jobs' copies
    std::string cache_dir;   // STATE/cache: the chunk cache
    uint64_t cache_cap_bytes = 0;
    bool shared = false;  // copies belong to the job's user
    // Runs `fn` on the event loop (the stager's results go there).
    std::function<void(std::function<void()>)> post;
    // A holder that does not answer is asked again after this, doubling up to 20 times it,
    // until it has not answered for give_up_ms (its daemon restarting takes seconds).
    int first_retry_ms = 500;
    int give_up_ms = 60000;
  };
  // GET of `target` from the holder, signed as this node: the body, or why not. Called on
  // the stager's thread.
  using PeerGet = std::function<Result<std::string>(const std::string& target)>;

  explicit Stager(Parts parts);
  ~Stager();  // stops the thread; a staging in progress resumes at the next start

  // Whether `job` must be staged before it runs on this node: it ships something and was
  // stored on another node.
  bool NeedsStaging(const Job& job) const;

  enum class State { kReady, kStaging, kFailed };
  // Where the job's copies are (kReady: `out`), or that they are being made (kStaging: started
  // now if not yet, with `get` reaching the holder, and `wake` posted to the loop at the end),
  // or why they cannot be (kFailed: `failure`, said once; the next call starts again).
  State Stage(const Job& job, PeerGet get, std::function<void()> wake, StagedPaths* out,
              std::string* failure);
  // "staging 3.1 GiB/12.3 GiB from node0, 95 MB/s", or "" when `id` is not being staged.
  std::string Progress(JobId id) const;
  // The job ended for good on this node: its files may leave the cache; its copies stay
  // (its outputs are in its tree) until it is cleaned.
  void Release(JobId id);
  // Releases every finished staging whose job is not among `active` (the jobs with attempts
  // on this node), and keeps their shared --stage copies.
  void Retain(const std::vector<Job>& active);
  // `trainq clean` forgot `job`: its copies here (STATE/staged/JOB, STATE/collected/JOB) go,
  // removed by a process of its user on a shared daemon.
  void Forget(const Job& job) override;
  // Ends the staging of `id` (if in progress) with `why`: its holder is gone for good.
  void Abandon(JobId id, const std::string& why);
  // The holder of every job being staged.
  std::map<JobId, std::string> Holders() const;
  // The manifests this node filled lately (a bounded list, newest last): placement prefers it
  // for jobs that ship them.
  std::vector<std::string> HeldManifests() const;
  // Progress() of every job being staged, for the node's heartbeat.
  std::map<JobId, std::string> AllProgress() const;

  // The holder's side, for a peer: transfer `index`'s manifest text, or the bytes of the
  // chunks named by `hashes` (comma-separated, at most kMaxChunksPerGet), concatenated and
  // each checked against its name, read on a thread of their own and given to `done` on the
  // loop. kNotFound / kConflict / kInvalid saying why not.
  Result<std::string> ServeManifest(const Job& job, size_t index) override;
  void ServeChunks(const Job& job, size_t index, std::string hashes, Answer done) override;
  static constexpr size_t kMaxChunksPerGet = 32;

  // --collect, the holder's side: copies back what attempt `n` of `job`, which ran on another
  // node, left matching its patterns, fetched with `get` from that node on the stager's
  // thread, then copied into its collect_to (or its cwd here) as its user. Once per attempt.
  void Collect(const Job& job, int n, PeerGet get);
  // --collect, the side of the node it ran on: the manifest of what attempt `n` of `job` left
  // matching its patterns in `cwd` (where it ran here), made on a thread of its own and given
  // to `done` on the loop; then the bytes of its chunks.
  void ServeOutputs(const Job& job, int n, const std::string& cwd, Answer done) override;
  void ServeOutputChunks(JobId id, int n, std::string hashes, Answer done) override;

  // Whether what attempt `n` of job `id` left elsewhere came back here (or nothing matched).
  bool Collected(JobId id, int n) const;
  // Checks at submit, on the node that stores the job, what the client says it ships: each
  // source is a directory or a regular file, each manifest is here and is what its hash says,
  // made from its source. Both are opened with OpenUserFile, as `as` when given (a shared
  // daemon's caller). Reads up to 256 MiB per manifest: call it off the loop. kInvalid naming
  // the option.
  static Status CheckAtSubmit(const JobSpec& spec, const UserInfo* as = nullptr);

 private:
  struct Work;
  using Sources = std::shared_ptr<const std::map<std::string, ChunkSource>>;
  void Loop(std::stop_token stop);
  Status Run(Work& w);
  Status RunCollect(Work& w);
  // Who the copies of a job belong to: its user on a shared daemon, else this daemon's.
  Result<RunAs> OwnerOf(const JobSpec& spec) const;
  std::string CollectedDir() const;  // STATE/collected: what comes back, before the user copies it
  Result<std::string> GetWithRetry(Work& w, const std::string& target);
  std::shared_ptr<const Manifest> KnownManifest(const std::string& sha) const;
  void RememberManifest(const std::string& sha, const Manifest& m);
  // The job's copies; `shared[i]`: transfer i's shared copy is ready already.
  Result<StagedPaths> Build(Work& w, const std::vector<Manifest>& manifests, const RunAs& owner,
                            const std::vector<bool>& shared);
  // --stage copies, shared by a user's jobs on this node (STATE/staged/shared/UID/MANIFEST).
  std::string SharedCopy(uid_t uid, const std::string& manifest) const;
  Status Share(const Manifest& m, const std::string& manifest, uid_t uid, gid_t gid);
  bool Untouched(const Manifest& m, const std::string& path) const;
  std::set<std::string> SharedCopiesOf(const Job& job) const;
  // Removes the shared copies no job here uses (on the stager's thread).
  void RemoveIdleSharedCopies();
  // A fresh path named `name` in STATE/staged/.new, a directory only this daemon reaches:
  // every tree is built there, then renamed into place.
  Result<std::string> Building(const std::string& name) const;
  // Removes `path`, which `owner` may change: by a process of that user on a shared daemon.
  void RemoveAsOwner(const std::string& path, const RunAs& owner) const;
  Result<Sources> SourcesOf(const Job& job, size_t index);

  Parts p_;
  std::unique_ptr<ChunkCache> cache_;
  Status cache_status_;

  mutable std::mutex mu_;
  std::condition_variable_any wake_;
  std::deque<std::shared_ptr<Work>> queue_;
  std::deque<std::string> held_;  // HeldManifests()
  // The manifests fetched lately, by hash (a hash names its text: never stale).
  std::deque<std::pair<std::string, std::shared_ptr<const Manifest>>> manifests_;
  std::map<JobId, std::shared_ptr<Work>> work_;  // by job: queued, running, or done
  std::set<std::string> active_copies_;          // the shared copies of the jobs Retain keeps
  uint64_t removed_ = 0;                         // shared copies replaced (their old names)
  std::map<std::string, int64_t> made_;          // shared copy -> its ctime once made here
  // --collect: the attempts collected or being collected here (holder).
  std::set<std::pair<JobId, int>> collects_;
  // What the threads that read off the loop share with the stager: the sources of what this
  // node offers back (--collect, the worker's side; filled by ServeOutputs' threads).
  struct Detached {
    std::mutex mu;
    bool closed = false;  // the stager is gone: a thread ending later posts nothing
    std::map<std::pair<JobId, int>, Sources> sources;
  };
  std::shared_ptr<Detached> detached_ = std::make_shared<Detached>();
  // Reads and checks the chunks named by `hashes` from `sources` on a thread of its own, and
  // gives the bytes to `done` on the loop.
  void ReadOffLoop(Sources sources, std::string hashes, JobId id,
                   std::function<void(Result<std::string>)> done);
  // The holder's chunk sources by manifest hash (the loop's only).
  std::map<std::string, std::shared_ptr<const std::map<std::string, ChunkSource>>> sources_;
  std::stop_token stop_;  // the thread's (set before it reads anything)
  std::jthread thread_;
};

}  // namespace trainq
