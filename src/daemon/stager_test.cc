// The stager on its seams: two stagers (a holder and the node that runs the job) in temporary
// state dirs, the network a function that routes each GET to the holder's Serve* methods, or
// fails as a dead holder would.
#include "src/daemon/stager.h"

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <charconv>
#include <fstream>
#include <future>
#include <map>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "src/os/crypto/token_crypto.h"
#include "src/os/proc_test_util.h"
#include "src/os/run_dir.h"
#include "src/os/system.h"
#include "src/os/users.h"

namespace trainq {
namespace {

using ::testing::HasSubstr;
using trainq::testing::TempDir;

void Write(const std::string& path, const std::string& data) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << data;
}

std::string Read(const std::string& path) {
  Result<std::string> text = ReadFile(path);
  return text.ok() ? *text : "(unreadable: " + text.status().message() + ")";
}

// The query of a target as the holder's route parses it.
std::map<std::string, std::string> QueryOf(const std::string& target) {
  std::map<std::string, std::string> out;
  size_t q = target.find('?');
  for (size_t at = q + 1; q != std::string::npos && at <= target.size();) {
    size_t end = std::min(target.find('&', at), target.size());
    std::string pair = target.substr(at, end - at);
    out[pair.substr(0, pair.find('='))] = pair.substr(pair.find('=') + 1);
    at = end + 1;
  }
  return out;
}

class StagerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(MakeDirs(dir_ / "src/sub").ok());
    Write(dir_ / "src/a.bin", std::string(300 << 10, 'a'));
    Write(dir_ / "src/sub/b.txt", "bee");
    ASSERT_TRUE(MakeDirs(dir_ / "work").ok());
    holder_ = MakeStager("n1");
    runner_ = MakeStager("n2");
  }

  std::unique_ptr<Stager> MakeStager(const std::string& node, uint64_t cap_bytes = 0,
                                     bool shared = false, int give_up_ms = 60000) {
    Stager::Parts p;
    p.node = node;
    p.cache_cap_bytes = cap_bytes;
    p.shared = shared;
    p.staged_dir = dir_ / (node + "/staged");
    p.cache_dir = dir_ / (node + "/cache");
    p.post = [](std::function<void()> fn) { fn(); };
    p.first_retry_ms = 1;
    p.give_up_ms = give_up_ms;
    return std::make_unique<Stager>(std::move(p));
  }

  // A job stored on n1 that stages SRC as `dst`, its manifest written as the client does.
  Job StagingJob(const std::string& dst) {
    Result<Manifest> m = MakeManifest(dir_ / "src", nullptr);
    EXPECT_TRUE(m.ok());
    std::string text = ManifestText(*m);
    Write(dir_ / "manifest", text);
    Job job;
    job.id = 7;
    job.spec.cwd = dir_ / "work";
    job.spec.signed_by = "n1";
    Transfer t;
    t.src = dir_ / "src";
    t.dst = dst;
    t.manifest = Sha256Hex(text);
    t.manifest_path = dir_ / "manifest";
    t.bytes = m->bytes;
    t.files = m->files;
    job.spec.transfers = {t};
    return job;
  }

  // What n2's GETs reach: n1's stager, unless `down` says the holder does not answer.
  Stager::PeerGet ToHolder(const Job& job) {
    return [this, job](const std::string& target) -> Result<std::string> {
      ++gets_;
      if (down_) return Status::Unavailable("connection refused");
      std::map<std::string, std::string> q = QueryOf(target);
      size_t index = 0;
      std::from_chars(q["i"].data(), q["i"].data() + q["i"].size(), index);
      if (q.count("manifest")) return holder_->ServeManifest(job, index);
      return ChunksOf(job, index, q["c"]);
    };
  }

  // The holder's answer to a GET of chunks (read on a thread of its own).
  Result<std::string> ChunksOf(const Job& job, size_t index, const std::string& hashes) {
    std::promise<Result<std::string>> answer;
    holder_->ServeChunks(job, index, hashes,
                         [&answer](Result<std::string> r) { answer.set_value(std::move(r)); });
    return answer.get_future().get();
  }

  // Starts staging `job` on n2; `woken` is set when it ends.
  void StartStaging(const Job& job, std::promise<void>& woken) {
    StagedPaths paths;
    std::string failure;
    ASSERT_EQ(runner_->Stage(
                  job, ToHolder(job), [&woken] { woken.set_value(); }, &paths, &failure),
              Stager::State::kStaging);
  }

  // What Stage says of `job` once its staging ended (woken).
  Stager::State StateAfter(const Job& job, StagedPaths* out, std::string* failure) {
    return runner_->Stage(
        job, ToHolder(job), [] {}, out, failure);
  }

  // Stages `job` on n2 until it is ready or failed.
  Stager::State StageToEnd(const Job& job, StagedPaths* out, std::string* failure) {
    for (;;) {
      std::promise<void> woken;
      Stager::State s = runner_->Stage(
          job, ToHolder(job), [&woken] { woken.set_value(); }, out, failure);
      if (s != Stager::State::kStaging) return s;
      woken.get_future().wait();
    }
  }

  TempDir dir_;
  std::unique_ptr<Stager> holder_, runner_;
  std::atomic<int> gets_ = 0;
  std::atomic<bool> down_ = false;
};

TEST_F(StagerTest, OnlyAJobStoredElsewhereIsStaged) {
  Job job = StagingJob("data");
  EXPECT_TRUE(runner_->NeedsStaging(job));
  EXPECT_FALSE(holder_->NeedsStaging(job));
  job.spec.transfers.clear();
  EXPECT_FALSE(runner_->NeedsStaging(job));
}

TEST_F(StagerTest, AStagedCopyIsWhatTheSourceWasAndDstLinksToIt) {
  Job job = StagingJob("data");
  StagedPaths paths;
  std::string failure;
  ASSERT_EQ(StageToEnd(job, &paths, &failure), Stager::State::kReady) << failure;
  EXPECT_EQ(paths.cwd, "");  // no tree: it runs in its own cwd
  ASSERT_EQ(paths.links.size(), 1u);
  EXPECT_EQ(paths.links[0].first, dir_ / "work/data");
  EXPECT_EQ(Read(paths.links[0].second + "/sub/b.txt"), "bee");
  EXPECT_EQ(Read(paths.links[0].second + "/a.bin"), std::string(300 << 10, 'a'));
  EXPECT_THAT(paths.notice, HasSubstr("fetched 300.0 KiB of the job's 300.0 KiB from node n1"));
  // A second job with the same bytes fetches nothing, not even a chunk.
  Job again = job;
  again.id = 8;
  int before = gets_;
  ASSERT_EQ(StageToEnd(again, &paths, &failure), Stager::State::kReady) << failure;
  EXPECT_EQ(gets_ - before, 0);  // its manifest is known here already
  EXPECT_THAT(paths.notice, HasSubstr("fetched 0 B"));
}

TEST_F(StagerTest, JobsStagingTheSameBytesShareOneReadOnlyCopy) {
  Job job = StagingJob("data");
  StagedPaths first, second, third;
  std::string failure;
  ASSERT_EQ(StageToEnd(job, &first, &failure), Stager::State::kReady) << failure;
  ASSERT_EQ(first.links.size(), 1u);
  const std::string copy = first.links[0].second;
  struct stat before = {};
  ASSERT_EQ(::stat(copy.c_str(), &before), 0);
  EXPECT_EQ(before.st_mode & 07777, 0555u);
  EXPECT_EQ(::access((copy + "/sub").c_str(), W_OK), ::geteuid() == 0 ? 0 : -1);
  Job again = job;
  again.id = 8;
  ASSERT_EQ(StageToEnd(again, &second, &failure), Stager::State::kReady) << failure;
  ASSERT_EQ(second.links.size(), 1u);
  EXPECT_EQ(second.links[0].second, copy);
  struct stat after = {};
  ASSERT_EQ(::stat(copy.c_str(), &after), 0);
  EXPECT_EQ(after.st_ino, before.st_ino);  // the same copy, not made again
  // An entry gone from the copy: the next job gets it whole again.
  ASSERT_EQ(::chmod((copy + "/sub").c_str(), 0755), 0);
  ASSERT_EQ(::unlink((copy + "/sub/b.txt").c_str()), 0);
  Job third_job = job;
  third_job.id = 9;
  ASSERT_EQ(StageToEnd(third_job, &third, &failure), Stager::State::kReady) << failure;
  EXPECT_EQ(third.links[0].second, copy);
  EXPECT_EQ(Read(copy + "/sub/b.txt"), "bee");
  // A file added (root's jobs are not stopped by the mode): the next job's copy lacks it.
  Write(copy + "/sub/extra", "left by a job");
  Job fourth_job = job;
  fourth_job.id = 10;
  ASSERT_EQ(StageToEnd(fourth_job, &third, &failure), Stager::State::kReady) << failure;
  EXPECT_FALSE(FileExists(copy + "/sub/extra"));
  EXPECT_EQ(Read(copy + "/sub/b.txt"), "bee");
  Result<std::vector<std::string>> names =
      ListFiles(dir_ / "n2/staged/shared/" + std::to_string(::geteuid()));
  ASSERT_TRUE(names.ok());
  for (const std::string& name : *names) {
    EXPECT_EQ(name.find(".old"), std::string::npos) << name;  // the replaced ones are gone
  }
}

TEST_F(StagerTest, AnIdleSharedCopyGoesWhenTheCacheIsOverItsCap) {
  runner_ = MakeStager("n2", /*cap_bytes=*/1);
  Job job = StagingJob("data");
  StagedPaths paths;
  std::string failure;
  ASSERT_EQ(StageToEnd(job, &paths, &failure), Stager::State::kReady) << failure;
  const std::string copy = paths.links[0].second;
  EXPECT_TRUE(FileExists(copy + "/a.bin"));  // its job holds it
  runner_->Retain({});                       // that job is over
  Write(dir_ / "src/sub/c.txt", "sea");      // other bytes, another manifest
  Job other = StagingJob("data");
  other.id = 10;
  ASSERT_EQ(StageToEnd(other, &paths, &failure), Stager::State::kReady) << failure;
  EXPECT_NE(paths.links[0].second, copy);
  EXPECT_FALSE(FileExists(copy));
  EXPECT_EQ(Read(paths.links[0].second + "/sub/c.txt"), "sea");
}

TEST_F(StagerTest, OnASharedDaemonAUsersCopiesAreTheirsAndRemovedByThem) {
  if (::geteuid() != 0) GTEST_SKIP() << "a shared daemon runs as root";
  Result<UserInfo> nobody = LookupUserByName("nobody");
  ASSERT_TRUE(nobody.ok()) << nobody.status().message();
  // The user reaches the state dir, as on a shared daemon.
  ASSERT_EQ(::chmod(dir_.path().c_str(), 0711), 0);
  ASSERT_TRUE(MakeDirs(dir_ / "n2").ok());
  ASSERT_EQ(::chmod((dir_ / "n2").c_str(), 0711), 0);
  runner_ = MakeStager("n2", 0, /*shared=*/true);
  Job job = StagingJob("data");
  job.spec.user = "nobody";
  StagedPaths paths;
  std::string failure;
  ASSERT_EQ(StageToEnd(job, &paths, &failure), Stager::State::kReady) << failure;
  struct stat st = {};
  ASSERT_EQ(::stat(paths.links[0].second.c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, static_cast<uid_t>(nobody->uid));
  // Nothing is left where trees are built.
  EXPECT_TRUE(ListFiles(dir_ / "n2/staged/.new")->empty());
  // Its own copies are removed by a process of the user: what root planted there stays.
  std::string own = dir_ / "n2/staged/7";
  ASSERT_TRUE(MakeDirs(own + "/roots").ok());
  Write(own + "/roots/f", "root's");
  Write(own + "/mine", "the user's");
  ASSERT_EQ(::chown((own + "/mine").c_str(), nobody->uid, nobody->gid), 0);
  runner_->Forget(job);
  for (int i = 0; i < 200 && FileExists(own + "/mine"); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_FALSE(FileExists(own + "/mine"));
  EXPECT_TRUE(FileExists(own + "/roots/f"));
}

TEST_F(StagerTest, ASourceChangedSinceTheSubmitFailsTheStaging) {
  Job job = StagingJob("data");
  Write(dir_ / "src/a.bin", std::string(300 << 10, 'z'));
  StagedPaths paths;
  std::string failure;
  ASSERT_EQ(StageToEnd(job, &paths, &failure), Stager::State::kFailed);
  EXPECT_THAT(failure, HasSubstr("changed since it was staged"));
}

TEST_F(StagerTest, AHolderThatDoesNotAnswerIsWaitedForUntilAbandoned) {
  Job job = StagingJob("data");
  down_ = true;
  std::promise<void> woken;
  StartStaging(job, woken);
  while (runner_->Progress(job.id).find("does not answer") == std::string::npos) {
    std::this_thread::yield();
  }
  EXPECT_THAT(runner_->Progress(job.id), HasSubstr("waits for node n1, which holds it"));
  EXPECT_EQ(runner_->Holders(), (std::map<JobId, std::string>{{7, "n1"}}));
  runner_->Abandon(job.id, "node n1 is lost");
  woken.get_future().wait();
  StagedPaths paths;
  std::string failure;
  ASSERT_EQ(StateAfter(job, &paths, &failure), Stager::State::kFailed);
  EXPECT_EQ(failure, "node n1 is lost");
}

TEST_F(StagerTest, AHolderSilentPastTheLimitEndsTheStaging) {
  runner_ = MakeStager("n2", 0, false, /*give_up_ms=*/30);
  Job job = StagingJob("data");
  down_ = true;
  std::promise<void> woken;
  StartStaging(job, woken);
  woken.get_future().wait();
  StagedPaths paths;
  std::string failure;
  ASSERT_EQ(StateAfter(job, &paths, &failure), Stager::State::kFailed);
  EXPECT_THAT(failure, HasSubstr("node n1, which holds it, did not answer for"));
  EXPECT_THAT(failure, HasSubstr("connection refused"));
  EXPECT_GT(gets_, 1);  // asked again before it gave up
}

TEST_F(StagerTest, ACertificateRefusedEndsTheStagingAtTheFirstTry) {
  Job job = StagingJob("data");
  std::promise<void> woken;
  StagedPaths paths;
  std::string failure;
  auto refused = [this](const std::string&) -> Result<std::string> {
    ++gets_;
    return Status::Permission("the TLS certificate of n1 does not verify");
  };
  ASSERT_EQ(runner_->Stage(
                job, refused, [&woken] { woken.set_value(); }, &paths, &failure),
            Stager::State::kStaging);
  woken.get_future().wait();
  ASSERT_EQ(StateAfter(job, &paths, &failure), Stager::State::kFailed);
  EXPECT_THAT(failure, HasSubstr("does not verify"));
  EXPECT_EQ(gets_, 1);
}

TEST_F(StagerTest, AHolderBackAfterAPauseServesTheRest) {
  Job job = StagingJob("data");
  down_ = true;
  std::promise<void> woken;
  StartStaging(job, woken);
  while (gets_ < 2) std::this_thread::yield();
  down_ = false;
  woken.get_future().wait();
  StagedPaths paths;
  std::string failure;
  ASSERT_EQ(StateAfter(job, &paths, &failure), Stager::State::kReady) << failure;
  EXPECT_EQ(Read(paths.links[0].second + "/sub/b.txt"), "bee");
}

TEST_F(StagerTest, TheHolderServesOnlyTheSubmittedManifestAndItsChunks) {
  Job job = StagingJob("data");
  EXPECT_TRUE(holder_->ServeManifest(job, 0).ok());
  EXPECT_EQ(holder_->ServeManifest(job, 1).status().code(), Code::kNotFound);
  EXPECT_EQ(ChunksOf(job, 0, std::string(64, 'f')).status().code(), Code::kNotFound);
  EXPECT_EQ(ChunksOf(job, 0, "../../etc/passwd").status().code(), Code::kInvalid);
  EXPECT_EQ(ChunksOf(job, 1, std::string(64, 'f')).status().code(), Code::kNotFound);
  Write(dir_ / "manifest", "{}");  // rewritten since the submit
  Job other = job;
  other.spec.transfers[0].manifest = std::string(64, '0');
  EXPECT_EQ(holder_->ServeManifest(other, 0).status().code(), Code::kConflict);
  EXPECT_EQ(Stager::CheckAtSubmit(other.spec).code(), Code::kInvalid);
}

TEST_F(StagerTest, CheckAtSubmitNamesAManifestThatIsNotHere) {
  Job job = StagingJob("data");
  EXPECT_TRUE(Stager::CheckAtSubmit(job.spec).ok());
  job.spec.transfers[0].manifest_path = dir_ / "elsewhere";
  Status st = Stager::CheckAtSubmit(job.spec);
  EXPECT_EQ(st.code(), Code::kInvalid);
  EXPECT_THAT(st.message(), HasSubstr("--stage"));
  EXPECT_THAT(st.message(), HasSubstr("submit from the machine that holds"));
}

}  // namespace
}  // namespace trainq
