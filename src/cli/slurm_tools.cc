// srun, scontrol and sbatch inside a `trainq sbatch` job: links to trainq that the job's PATH
// puts first (docs/workflow.md, "srun and scontrol"). srun starts a step's tasks on this node
// itself and asks this node's daemon to have the job's other nodes start theirs: each of those
// runs `srun --trainq-node-steps` as its part of the job, which takes the steps of its node
// from the daemon, runs them, sends their tasks' output for srun to write as its own, and
// reports how they ended.
#include "src/cli/slurm_tools.h"

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <deque>
#include <filesystem>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "src/cli/api_paths.h"
#include "src/cli/cli.h"
#include "src/cli/client.h"
#include "src/core/hostlist.h"
#include "src/core/json_codec.h"
#include "src/core/srun.h"
#include "src/core/words.h"
#include "src/os/permissions.h"
#include "src/os/process.h"
#include "src/os/system.h"

namespace trainq {

namespace {

using json = nlohmann::json;

volatile sig_atomic_t g_signal = 0;
void OnSignal(int sig) { g_signal = sig; }

EnvMap CurrentEnv() {
  EnvMap env;
  for (auto& [key, value] : CurrentEnvironment()) env.emplace(std::move(key), std::move(value));
  return env;
}

std::vector<std::string> SplitList(const std::string& text, char sep = ',') {
  std::vector<std::string> out;
  size_t start = 0;
  while (start < text.size()) {
    size_t comma = text.find(sep, start);
    if (comma == std::string::npos) comma = text.size();
    if (comma > start) out.push_back(text.substr(start, comma - start));
    start = comma + 1;
  }
  return out;
}

void Say(const std::string& line) { std::fprintf(stderr, "%s\n", TerminalSafe(line).c_str()); }

// The longest piece of a line kept waiting for its newline; a longer one goes on cut there.
constexpr size_t kMaxPiece = 64 << 10;

// Writes `text` (whole lines of task `rank`'s stream `fd`, or a last piece without a newline)
// to this process's stdout or stderr, with --label "RANK: " before each line.
void WriteLines(int rank, int fd, std::string_view text, bool label) {
  FILE* to = fd == 1 ? stdout : stderr;
  if (!label) {
    std::fwrite(text.data(), 1, text.size(), to);
  } else {
    size_t start = 0;
    while (start < text.size()) {
      size_t nl = text.find('\n', start);
      size_t stop = nl == std::string_view::npos ? text.size() : nl;
      std::fprintf(to, "%d: %.*s\n", rank, static_cast<int>(stop - start), text.data() + start);
      start = stop + 1;
    }
  }
  std::fflush(to);
}

// Where the output of tasks whose pipes srun reads goes.
class OutputSink {
 public:
  virtual ~OutputSink() = default;
  // Whole lines of task `rank`'s stream `fd` (1 or 2), or the stream's last bytes without a
  // newline, or a line cut at kMaxPiece.
  virtual void Lines(int rank, int fd, std::string_view text) = 0;
  // Whether more may come now; while not, the pipes are not read and the tasks wait to write.
  virtual bool Ready() const { return true; }
};

// srun's own stdout and stderr, with or without labels.
class StdioSink : public OutputSink {
 public:
  explicit StdioSink(bool label) : label_(label) {}
  void Lines(int rank, int fd, std::string_view text) override {
    WriteLines(rank, fd, text, label_);
  }

 private:
  bool label_;
};

// One task of this node: its process and, when its output is read, the pipes it comes through.
struct Task {
  int rank = 0;
  Child child;  // its pid; child.out and child.err when captured
  std::string pending[2];
  bool done = false;

  UniqueFd& stream(int which) { return which == 0 ? child.out : child.err; }
};

// Starts a task: the command found on its own PATH, as a shell with its environment would,
// SLURM_TASK_PID its own pid, its output through pipes when `capture`.
Status StartTask(const std::vector<std::string>& argv, const EnvMap& env, const std::string& cwd,
                 Task& task, bool capture) {
  ChildSpec spec;
  spec.argv = argv;
  spec.env.emplace();
  for (const auto& [key, value] : env) spec.env->push_back(key + "=" + value);
  spec.search_path = env.contains("PATH") ? env.at("PATH") : "/usr/local/bin:/usr/bin:/bin";
  spec.cwd = cwd;
  spec.out = spec.err = capture ? ChildIo::kPipe : ChildIo::kInherit;
  spec.only_stdio = false;  // as Slurm's tasks, they get what srun was given
  spec.pid_variable = "SLURM_TASK_PID";
  spec.failure_prefix = fmt::format("srun: error: task {}", task.rank);
  Result<Child> child = StartChild(spec);
  if (!child.ok()) return child.status();
  task.child = std::move(*child);
  return Status::Ok();
}

// Reads what a task printed on stream `which` (0: stdout, 1: stderr) and hands `sink` its whole
// lines; `at_end`: everything, to the end of the stream.
void Pump(Task& t, int which, bool at_end, OutputSink& sink) {
  char buf[65536];
  std::string& p = t.pending[which];
  UniqueFd& fd = t.stream(which);
  for (;;) {
    Result<size_t> n = ReadSome(fd.get(), buf);
    if (n.ok() && *n > 0) p.append(buf, *n);
    if (!n.ok() || *n == 0 || !at_end) {
      if ((n.ok() && *n == 0) || (!n.ok() && at_end)) fd = UniqueFd();
      break;
    }
    if (p.size() >= kMaxPiece) {
      size_t nl = p.rfind('\n');
      size_t cut = nl == std::string::npos ? p.size() : nl + 1;
      sink.Lines(t.rank, which + 1, std::string_view(p).substr(0, cut));
      p.erase(0, cut);
    }
  }
  size_t nl = p.rfind('\n');
  size_t cut = !fd.valid() || (nl == std::string::npos && p.size() >= kMaxPiece)
                   ? p.size()
                   : (nl == std::string::npos ? 0 : nl + 1);
  if (cut > 0) sink.Lines(t.rank, which + 1, std::string_view(p).substr(0, cut));
  p.erase(0, cut);
}

// How a task ended, in srun's words.
std::string Ending(const ChildEnd& end) {
  if (end.signal != 0) return end.signal == SIGKILL ? "Killed" : ::strsignal(end.signal);
  return fmt::format("Exited with exit code {}", end.exit_code);
}

// The tasks of one node for one step: started, watched, stopped.
class LocalTasks {
 public:
  // `sink`: where the tasks' output goes, read from their pipes; null: they write to srun's own
  // stdout and stderr themselves.
  LocalTasks(const StepLayout& l, const SlurmAllocation& a, int node, int step, OutputSink* sink,
             bool kill_on_bad_exit)
      : layout_(l), alloc_(a), node_(node), step_(step), sink_(sink), kill_(kill_on_bad_exit) {}

  Status Start(const std::vector<std::string>& argv, const EnvMap& base, const std::string& cwd) {
    std::vector<std::string> gpus;
    auto it = base.find("CUDA_VISIBLE_DEVICES");
    if (it != base.end()) gpus = SplitList(it->second);
    int count = layout_.tasks[node_];
    if (layout_.gpus_per_task > 0 && count > 1 &&
        static_cast<size_t>(count * layout_.gpus_per_task) > gpus.size()) {
      return Status::Invalid(fmt::format(
          "srun: error: {} task(s) with --gpus-per-task={} need {} GPUs on node {}; the job "
          "holds {} there",
          count, layout_.gpus_per_task, count * layout_.gpus_per_task, alloc_.nodes[node_],
          gpus.size()));
    }
    for (int local = 0; local < count; ++local) {
      Task t;
      t.rank = layout_.first[node_] + local;
      EnvMap env = TaskEnv(base, layout_, alloc_, node_, local, step_, gpus);
      tasks_.push_back(std::move(t));
      Status st = StartTask(argv, env, cwd, tasks_.back(), sink_ != nullptr);
      if (!st.ok()) return Status::Io("srun: cannot start a task: " + st.message());
    }
    return Status::Ok();
  }

  bool Running() const {
    for (const Task& t : tasks_) {
      if (!t.done || t.child.out.valid() || t.child.err.valid()) return true;
    }
    return false;
  }

  // Waits up to `ms` for output or an end; true when a task failed just now.
  bool Step(int ms) {
    std::vector<int> fds;
    std::vector<std::pair<Task*, int>> owners;
    bool ready = sink_ != nullptr && sink_->Ready();
    for (Task& t : tasks_) {
      for (int w = 0; w < 2 && ready; ++w) {
        if (t.stream(w).valid()) {
          fds.push_back(t.stream(w).get());
          owners.emplace_back(&t, w);
        }
      }
    }
    if (fds.empty()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(std::min(ms, 20)));
    } else {
      for (size_t i : WaitReadable(fds, std::min(ms, 20))) {
        Pump(*owners[i].first, owners[i].second, false, *sink_);
      }
    }
    bool failed = false;
    for (Task& t : tasks_) {
      if (t.done) continue;
      std::optional<ChildEnd> end = ReapChild(t.child.pid, false);
      if (!end) continue;
      t.done = true;
      for (int w = 0; w < 2; ++w) {
        if (t.stream(w).valid()) Pump(t, w, true, *sink_);
      }
      int code = end->exit_code;
      std::string how = Ending(*end);
      if (code != 0) {
        failures_.push_back(
            fmt::format("srun: error: {}: task {}: {}", alloc_.nodes[node_], t.rank, how));
        Say(failures_.back());
        worst_ = std::max(worst_, code);
        failed = true;
      }
    }
    return failed;
  }

  void Signal(int sig) {
    for (const Task& t : tasks_) {
      if (!t.done) (void)SendSignal(t.child.pid, sig);
    }
  }

  // Stops the rest after a task failed (-K): SIGTERM, then SIGKILL after 10 s.
  void StopRest() {
    if (!kill_ || stop_sent_) return;
    stop_sent_ = true;
    Say(
        fmt::format("srun: error: {}: tasks of step {}.{} stopped: another task failed "
                    "(--kill-on-bad-exit)",
                    alloc_.nodes[node_], alloc_.job_id, step_));
    Signal(SIGTERM);
    kill_at_ = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  }
  void Tick() {
    if (kill_at_ && std::chrono::steady_clock::now() >= *kill_at_) {
      Signal(SIGKILL);
      kill_at_.reset();
    }
  }

  int worst() const { return worst_; }
  const std::vector<std::string>& failures() const { return failures_; }

 private:
  const StepLayout& layout_;
  const SlurmAllocation& alloc_;
  int node_, step_;
  OutputSink* sink_;
  bool kill_;
  std::vector<Task> tasks_;
  std::vector<std::string> failures_;
  int worst_ = 0;
  bool stop_sent_ = false;
  std::optional<std::chrono::steady_clock::time_point> kill_at_;
};

// The parts of a step on the job's other nodes, as srun follows them through its daemon: how
// they end, and their tasks' output, which srun writes as its own (labelled with --label).
class RemoteParts {
 public:
  RemoteParts(Client* daemon, int64_t job, int step, const StepLayout& l, bool label)
      : daemon_(daemon), job_(job), step_(step), label_(label) {
    for (size_t i = 1; i < l.tasks.size(); ++i) {
      if (l.tasks[i] > 0) waiting_.push_back(static_cast<int>(i));
    }
  }
  bool Waiting() const { return !waiting_.empty() || more_; }
  int worst() const { return worst_; }

  // Stops the step on the other nodes (once).
  void Cancel() {
    if (daemon_ == nullptr || cancelled_ || waiting_.empty()) return;
    cancelled_ = true;
    (void)daemon_->CallRunning(
        "POST", api::JobPath(job_, "steps/cancel") + "?step=" + std::to_string(step_));
  }

  // Reads the other nodes' output and how their parts ended, every 200 ms at most (at once
  // while more output is held); true when one failed now. A daemon that stops answering ends
  // the step here (`local` is told to stop).
  bool Poll(LocalTasks* local) {
    auto now = std::chrono::steady_clock::now();
    if (!Waiting() || (!more_ && now - last_ < std::chrono::milliseconds(200))) return false;
    last_ = now;
    Result<json> r = daemon_->CallRunning(
        "GET", api::JobPath(job_, "steps") + fmt::format("?output={}&step={}", next_, step_));
    if (!r.ok()) {
      Say(fmt::format("srun: error: step {}.{}: this node's daemon does not answer: {}", job_,
                      step_, r.status().message()));
      local->Signal(SIGTERM);
      worst_ = std::max(worst_, 1);
      waiting_.clear();
      more_ = false;
      return false;
    }
    Write((*r)["output"]);
    return Ends((*r)["results"]);
  }

 private:
  // The pieces of output read, in the order the daemon took them.
  void Write(const json& output) {
    if (!output.is_object()) return;
    for (const json& p : output.value("pieces", json::array())) {
      if (p.is_object() && p["text"].is_string()) {
        WriteLines(p.value("task", 0), p.value("fd", 1) == 2 ? 2 : 1,
                   p["text"].get_ref<const std::string&>(), label_);
      }
    }
    next_ = output.value("next", next_);
    more_ = next_ < output.value("end", next_);
  }

  bool Ends(const json& done) {
    bool failed = false;
    for (auto it = waiting_.begin(); it != waiting_.end();) {
      std::string key = std::to_string(*it);
      if (!done.is_object() || !done.contains(key)) {
        ++it;
        continue;
      }
      const json& res = done[key];
      int code = res.value("exit", 1);
      for (const json& line : res.value("failures", json::array())) {
        if (line.is_string()) Say(line.get<std::string>());
      }
      if (code != 0) {
        worst_ = std::max(worst_, code);
        failed = true;
      }
      it = waiting_.erase(it);
    }
    return failed;
  }

  Client* daemon_;
  int64_t job_;
  int step_;
  bool label_;
  std::vector<int> waiting_;  // the nodes whose parts have not said how they ended
  int64_t next_ = 0;          // the number of the next piece of output to read
  bool more_ = false;         // the daemon holds output not read yet
  int worst_ = 0;
  bool cancelled_ = false;
  std::chrono::steady_clock::time_point last_{};
};

// A part's tasks' output on a node other than the first: written to the part's own stdout and
// stderr (its node's part of the job's log, labelled as srun labels it) and sent through this
// node's daemon to the step on the first node, where srun reads it. At most kPartWindow bytes
// wait here to be sent; past that the tasks' pipes are not read, so they wait to write.
class Forwarder : public OutputSink {
 public:
  Forwarder(Client& daemon, int64_t job, int step, int node, bool label, std::string node_name)
      : daemon_(daemon),
        job_(job),
        step_(step),
        node_(node),
        label_(label),
        node_name_(std::move(node_name)) {}

  void Lines(int rank, int fd, std::string_view text) override {
    WriteLines(rank, fd, text, label_);
    if (!forward_) return;
    if (queue_.empty()) progress_ = std::chrono::steady_clock::now();
    // The first node's daemon takes pieces of up to kMaxPiece: longer text goes in several,
    // cut after a line where one ends within it.
    while (!text.empty()) {
      size_t cut = text.size();
      if (cut > kMaxPiece) {
        size_t nl = text.rfind('\n', kMaxPiece - 1);
        cut = nl == std::string_view::npos ? kMaxPiece : nl + 1;
      }
      queue_.push_back(
          json{{"task", rank}, {"fd", fd}, {"text", std::string(text.substr(0, cut))}});
      bytes_ += cut;
      text.remove_prefix(cut);
    }
  }
  bool Ready() const override { return bytes_ < kPartWindow; }

  // Sends what waits: 250 ms after the last send (each send is a request the daemons pass on),
  // 50 ms after it while a whole chunk waits and the last send was taken. Returns whether the
  // step was cancelled, when an answer said so.
  std::optional<bool> Send() {
    auto now = std::chrono::steady_clock::now();
    auto wait = bytes_ >= kChunk && progress_ >= last_ ? std::chrono::milliseconds(50)
                                                       : std::chrono::milliseconds(250);
    if (queue_.empty() || now - last_ < wait) return std::nullopt;
    last_ = now;
    json body = {{"output", json::array()}};
    size_t size = 0;
    for (const json& p : queue_) {
      if (size > 0 && size + p["text"].get_ref<const std::string&>().size() > kChunk) break;
      size += p["text"].get_ref<const std::string&>().size();
      body["output"].push_back(p);
    }
    Result<json> r =
        daemon_.CallRunning("POST",
                            api::JobPath(job_, "steps/result") +
                                fmt::format("?at={}&rank={}&step={}", sent_, node_, step_),
                            DumpJson(body));
    if (r.ok()) {
      Taken(r->value("taken", sent_));
    } else if (r.status().code() != Code::kUnavailable) {
      GiveUp(r.status().message());  // the step is gone there (that daemon restarted)
    }
    if (!queue_.empty() && now - progress_ > std::chrono::seconds(60)) {
      GiveUp("none of it was taken for a minute");
    }
    if (!r.ok()) return std::nullopt;
    return r->value("cancelled", false);
  }

  // Sends everything that waits, before the part reports its end.
  void Flush() {
    while (!queue_.empty()) {
      (void)Send();
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }

 private:
  static constexpr size_t kPartWindow = 1 << 20;
  static constexpr size_t kChunk = 256 << 10;  // the most text one request sends

  void Taken(int64_t taken) {
    if (taken > sent_) progress_ = std::chrono::steady_clock::now();
    for (; sent_ < taken && !queue_.empty(); ++sent_) {
      bytes_ -= queue_.front()["text"].get_ref<const std::string&>().size();
      queue_.pop_front();
    }
  }

  // What waits stays in this node's part of the log only; so does the rest of the step's.
  void GiveUp(const std::string& why) {
    Say(
        fmt::format("srun: warning: {}: output of step {}.{} is not sent to the first node ({}); "
                    "it is in this node's part of the job's log",
                    node_name_, job_, step_, why));
    forward_ = false;
    queue_.clear();
    bytes_ = 0;
  }

  Client& daemon_;
  int64_t job_;
  int step_, node_;
  bool label_;
  std::string node_name_;
  bool forward_ = true;
  std::deque<json> queue_;  // pieces not taken yet, {"task", "fd", "text"}
  size_t bytes_ = 0;        // their text
  int64_t sent_ = 0;        // the number of queue_'s first piece
  std::chrono::steady_clock::time_point last_{};
  std::chrono::steady_clock::time_point progress_{};  // when a piece was last taken
};

void CatchSignals() {
  constexpr int kSignals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};
  trainq::CatchSignals(kSignals, OnSignal);
}

// The next step number of this job: a counter in the batch script's folder (TRAINQ_SLURM_DIR,
// the wrapper's), locked, as Slurm numbers a job's steps 0, 1, 2, ...
int NextStep() {
  std::string dir = GetEnv("TRAINQ_SLURM_DIR");
  if (dir.empty()) return 0;
  Result<int64_t> step = NextCounterValue(dir + "/steps");
  return step.ok() ? static_cast<int>(*step) : 0;
}

Result<Client> LocalDaemon() {
  Result<ServerChoice> choice = ChooseServer("", "");
  if (!choice.ok()) return choice.status();
  if (GetEnv("TRAINQ_SERVER").empty()) {
    return Status::Invalid(
        "srun: TRAINQ_SERVER is not set: a step on other nodes is started through this node's "
        "daemon, which a `trainq sbatch` job names there");
  }
  return Client(std::move(*choice));
}

json StepJson(const SrunOptions& o, const StepLayout& l, int step, const EnvMap& env,
              const std::string& cwd) {
  json doc = {{"step", step},       {"argv", o.command},
              {"env", env},         {"cwd", cwd},
              {"tasks", l.tasks},   {"first", l.first},
              {"ntasks", l.ntasks}, {"gpus_per_task", l.gpus_per_task},
              {"label", o.label},   {"kill_on_bad_exit", o.kill_on_bad_exit}};
  if (l.cpus_per_task) doc["cpus_per_task"] = *l.cpus_per_task;
  return doc;
}

int Srun(const std::vector<std::string>& args) {
  Result<SrunOptions> opts = ParseSrun(args);
  if (!opts.ok()) {
    Say(opts.status().message());
    return 2;
  }
  EnvMap env = CurrentEnv();
  Result<SlurmAllocation> alloc = AllocationFromEnv(env);
  if (!alloc.ok()) {
    Say(alloc.status().message());
    return 1;
  }
  if (alloc->node_id != 0) {
    Say("srun: error: a step starts from the batch script, on the job's first node; this task "
        "runs on node " +
        std::to_string(alloc->node_id));
    return 1;
  }
  Result<StepLayout> layout = LayOutStep(*opts, *alloc);
  if (!layout.ok()) {
    Say(layout.status().message());
    return 1;
  }
  if (!opts->quiet) {
    for (const std::string& w : opts->warnings) Say("srun: warning: " + w);
    for (const std::string& w : layout->warnings) Say("srun: Warning: " + w);
  }
  if (!opts->job_name.empty()) env["SLURM_JOB_NAME"] = opts->job_name;
  std::string cwd = opts->chdir.empty() ? CurrentDirectory() : opts->chdir;
  mode_t mask = CurrentUmask();
  env["SLURM_UMASK"] = fmt::format("{:04o}", static_cast<unsigned>(mask));
  int step = NextStep();
  bool elsewhere = false;  // tasks on other nodes: the step goes through this node's daemon
  for (size_t i = 1; i < layout->tasks.size(); ++i) elsewhere = elsewhere || layout->tasks[i] > 0;
  std::optional<Client> daemon;
  if (elsewhere) {
    Result<Client> c = LocalDaemon();
    if (!c.ok()) {
      Say(c.status().message());
      return 1;
    }
    daemon.emplace(std::move(*c));
    Result<json> r = daemon->CallRunning("POST", api::JobPath(std::stoll(alloc->job_id), "steps"),
                                         DumpJson(StepJson(*opts, *layout, step, env, cwd)));
    if (!r.ok()) {
      Say(fmt::format("srun: error: Unable to create step for job {}: {}", alloc->job_id,
                      r.status().message()));
      return 1;
    }
  }
  CatchSignals();
  StdioSink labelled(true);
  LocalTasks local(*layout, *alloc, 0, step, opts->label ? &labelled : nullptr,
                   opts->kill_on_bad_exit);
  if (Status st = local.Start(opts->command, env, cwd); !st.ok()) {
    Say(st.message());
    return 1;
  }
  RemoteParts remote(daemon ? &*daemon : nullptr, std::stoll(alloc->job_id), step, *layout,
                     opts->label);
  while (local.Running() || remote.Waiting()) {
    bool failed = local.Step(100);
    if (remote.Poll(&local)) failed = true;
    if (failed && opts->kill_on_bad_exit) {
      local.StopRest();
      remote.Cancel();
    }
    local.Tick();
    if (g_signal != 0) {
      local.Signal(g_signal);
      remote.Cancel();
      g_signal = 0;
    }
  }
  return std::max(remote.worst(), local.worst());
}

// Step `s` (as the first node's daemon gave it) on this node, part `node` of the job: its
// tasks run, their output forwarded to srun, and how they ended reported.
void RunNodeStep(Client& daemon, const SlurmAllocation& alloc, const EnvMap& own, const json& s,
                 int64_t job, int node) {
  int step = s.value("step", 0);
  StepLayout l;
  l.tasks = s.value("tasks", std::vector<int>{});
  l.first = s.value("first", std::vector<int>{});
  l.ntasks = s.value("ntasks", 0);
  l.gpus_per_task = s.value("gpus_per_task", 0);
  if (s.contains("cpus_per_task")) l.cpus_per_task = s.value("cpus_per_task", 1);
  if (l.tasks.size() != alloc.nodes.size() || l.first.size() != l.tasks.size()) return;
  for (size_t i = 0; i < l.tasks.size(); ++i) {
    if (l.tasks[i] > 0) l.step_nodes.push_back(alloc.nodes[i]);
  }
  // srun's environment, with what belongs to this node taken from this node's part.
  EnvMap base;
  json given = s.value("env", json::object());
  for (const auto& [key, value] : given.items()) {
    if (value.is_string() && !NodeSpecificVar(key)) base[key] = value.get<std::string>();
  }
  for (const auto& [key, value] : own) {
    if (NodeSpecificVar(key)) base[key] = value;
  }
  Forwarder output(daemon, job, step, node, s.value("label", false), alloc.nodes[node]);
  LocalTasks tasks(l, alloc, node, step, &output, s.value("kill_on_bad_exit", false));
  json result = json::object();
  int exit = 0;
  if (Status st = tasks.Start(s.value("argv", std::vector<std::string>{}), base,
                              s.value("cwd", std::string()));
      !st.ok()) {
    Say(st.message());
    exit = 1;
    result["failures"] = {fmt::format("{} (node {})", st.message(), alloc.nodes[node])};
  } else {
    auto asked = std::chrono::steady_clock::now();
    while (tasks.Running()) {
      if (tasks.Step(100)) tasks.StopRest();
      tasks.Tick();
      if (g_signal != 0) {
        tasks.Signal(g_signal);
        g_signal = 0;
      }
      // Each answer to sent output says whether the step was cancelled; without output to
      // send, the step is asked every 500 ms.
      std::optional<bool> cancelled = output.Send();
      auto now = std::chrono::steady_clock::now();
      if (cancelled) {
        asked = now;
      } else if (now - asked > std::chrono::milliseconds(500)) {
        asked = now;
        Result<json> st = daemon.CallRunning(
            "GET", api::JobPath(job, "steps") + fmt::format("?step={}&rank={}", step, node));
        if (st.ok()) cancelled = st->value("cancelled", false);
      }
      if (cancelled.value_or(false)) tasks.Signal(SIGTERM);
    }
    exit = std::min(tasks.worst(), 255);
    result["failures"] = tasks.failures();
  }
  // srun reads the output before the end: its lines come before srun's word of a failure.
  output.Flush();
  std::string target =
      api::JobPath(job, "steps/result") + fmt::format("?exit={}&rank={}&step={}", exit, node, step);
  for (int tries = 0;; ++tries) {
    Result<json> sent = daemon.CallRunning("POST", target, DumpJson(result));
    if (sent.ok() || tries == 20) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
}

// A part of the job on a node other than the first: runs the steps that give this node tasks
// until the batch script ends.
int NodeSteps() {
  EnvMap own = CurrentEnv();
  Result<SlurmAllocation> alloc = AllocationFromEnv(own);
  if (!alloc.ok()) {
    Say(alloc.status().message());
    return 1;
  }
  Result<Client> c = LocalDaemon();
  if (!c.ok()) {
    Say(c.status().message());
    return 1;
  }
  Client& daemon = *c;
  CatchSignals();
  int64_t job = std::stoll(alloc->job_id);
  int node = alloc->node_id;
  int after = -1;
  auto unreachable_since = std::chrono::steady_clock::now();
  bool unreachable = false;
  for (;;) {
    if (g_signal != 0) return 128 + g_signal;
    Result<json> r = daemon.CallRunning(
        "GET", api::JobPath(job, "steps") + fmt::format("?rank={}&after={}", node, after));
    if (!r.ok()) {
      // The first node's daemon may restart: wait a minute for it before giving up.
      if (!unreachable) unreachable_since = std::chrono::steady_clock::now();
      unreachable = true;
      if (std::chrono::steady_clock::now() - unreachable_since > std::chrono::seconds(60)) {
        Say(fmt::format("srun: error: node {}: the job's steps cannot be read for a minute: {}",
                        alloc->nodes[node], r.status().message()));
        return 1;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
      continue;
    }
    unreachable = false;
    if (r->value("ended", false)) return 0;
    if (!r->contains("step") || !(*r)["step"].is_object()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      continue;
    }
    const json& s = (*r)["step"];
    after = s.value("step", 0);
    RunNodeStep(daemon, *alloc, own, s, job, node);
  }
}

// The batch script of a job on several nodes ended: its parts on the other nodes end too.
int StepsDone() {
  Result<Client> c = LocalDaemon();
  std::string id = GetEnv("SLURM_JOB_ID");
  if (!c.ok() || id.empty()) return 0;
  (void)c->CallRunning("POST", api::JobPath(std::stoll(id), "steps/done"));
  return 0;
}

// trainq's own command line, in this process.
int RunTrainq(std::vector<std::string> words) {
  std::vector<char*> ptrs;
  for (std::string& w : words) ptrs.push_back(w.data());
  ptrs.push_back(nullptr);
  return RunCli(static_cast<int>(words.size()), ptrs.data());
}

// `scancel --signal SIG [--batch] ID...` (-s SIG, -b; --signal=SIG): what a job's trap runs to
// signal itself or its steps. Anything else says what to use.
int Scancel(const std::vector<std::string>& args) {
  std::string signal;
  bool batch = false;
  std::vector<std::string> ids;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if ((a == "--signal" || a == "-s") && i + 1 < args.size()) {
      signal = args[++i];
    } else if (a.starts_with("--signal=")) {
      signal = a.substr(9);
    } else if (a.starts_with("-s") && a.size() > 2) {
      signal = a.substr(2);
    } else if (a == "--batch" || a == "-b") {
      batch = true;
    } else if (a == "--full" || a == "-f" || a == "--quiet" || a == "-Q" || a == "-v") {
      continue;  // the whole job is what trainq signals anyway
    } else if (!a.starts_with("-")) {
      ids.push_back(a);  // ids and lists, as trainq cancel takes them
    } else {
      signal.clear();
      break;
    }
  }
  if (signal.empty() || ids.empty()) {
    Say("scancel: trainq covers `scancel --signal SIG [--batch] ID` only; to stop a job use "
        "trainq cancel ID");
    return 1;
  }
  std::vector<std::string> words = {"trainq", "cancel", "--signal", signal};
  if (batch) words.push_back("--batch");
  words.insert(words.end(), ids.begin(), ids.end());
  return RunTrainq(words);
}

int Scontrol(const std::vector<std::string>& args) {
  auto usage = [] {
    Say("scontrol: trainq covers `scontrol show hostnames [LIST]`, `show hostname [LIST]`, "
        "`show hostlist LIST`, `show hostlistsorted LIST`, `requeue ID`, `hold ID` and "
        "`release ID`");
    return 1;
  };
  if (args.empty()) return usage();
  const std::string& verb = args[0];
  // PyTorch Lightning's SLURMEnvironment runs `scontrol requeue $SLURM_JOB_ID` once it saved
  // its checkpoint: the running job stops and is queued again under its id.
  // `scontrol hold|uhold|release ID...`: trainq hold and trainq release (a user's hold and an
  // admin's are one in trainq).
  std::string command = verb == "requeue"                   ? "requeue"
                        : verb == "hold" || verb == "uhold" ? "hold"
                        : verb == "release"                 ? "release"
                                                            : "";
  if (verb == "requeuehold") {
    Say("scontrol: requeuehold is not covered; trainq requeue ID, then trainq hold ID");
    return 1;
  }
  if (!command.empty()) {
    std::vector<std::string> words = {"trainq", command};
    for (size_t i = 1; i < args.size(); ++i) {
      if (args[i].starts_with("-")) continue;  // -v, --quiet: nothing to say differently
      words.push_back(args[i]);                // ids and lists, as trainq takes them
    }
    if (words.size() == 2) {
      Say(fmt::format("scontrol: {} needs a job id (scontrol {} ID...)", TerminalSafe(verb),
                      TerminalSafe(verb)));
      return 1;
    }
    return RunTrainq(words);
  }
  if (verb != "show") {
    std::string instead = verb == "update"
                              ? "trainq update ID (a waiting job's --priority, --gpus, --time, ...)"
                          : verb == "cancel" ? "trainq cancel ID"
                                             : "trainq --help";
    Say(fmt::format("scontrol: {} is not covered by trainq's scontrol; use {}", TerminalSafe(verb),
                    instead));
    return 1;
  }
  if (args.size() < 2) return usage();
  const std::string& what = args[1];
  // Several lists may follow: `scontrol show hostname n1 n2` is n1,n2.
  std::string list;
  for (size_t i = 2; i < args.size(); ++i) list += (list.empty() ? "" : ",") + args[i];
  if (what == "hostname" || what == "hostnames") {
    if (args.size() == 2) list = GetEnv("SLURM_NODELIST");
    if (list.empty()) {
      Say("scontrol: error: host list is empty (give a node list, or run it in a job, where "
          "SLURM_NODELIST is set)");
      return 1;
    }
    Result<std::vector<std::string>> names = ExpandHostlist(list);
    if (!names.ok()) {
      Say("scontrol: error: " + names.status().message());
      return 1;
    }
    for (const std::string& n : *names) std::printf("%s\n", n.c_str());
    return 0;
  }
  if (what == "hostlist" || what == "hostlistsorted") {
    if (list.empty()) return usage();
    Result<std::vector<std::string>> names = ExpandHostlist(list);
    if (!names.ok()) {
      Say("scontrol: error: " + names.status().message());
      return 1;
    }
    if (what == "hostlistsorted") std::sort(names->begin(), names->end());
    std::printf("%s\n", CompressHostlist(*names).c_str());
    return 0;
  }
  if (what == "job" || what == "jobs") {
    Say("scontrol: show job is not covered by trainq's scontrol; use trainq show ID (--json)");
    return 1;
  }
  return usage();
}

}  // namespace

namespace {

// srun --pty inside an allocation (a session's shell, salloc's): an interactive step. Its one
// task is this process, on this terminal, with the step's variables, as Slurm's runs on the
// allocation's first node; more tasks, or a node other than this one, cannot share a terminal.
int PtyStep(const std::vector<std::string>& args) {
  Result<SrunOptions> opts = ParseSrun(args);
  if (!opts.ok()) {
    Say(opts.status().message());
    return 2;
  }
  if (opts->ntasks.value_or(1) != 1 || opts->nodes.value_or(1) != 1 ||
      opts->ntasks_per_node.value_or(1) != 1) {
    Say("srun: error: --pty runs one task on one terminal: drop -n, -N and --ntasks-per-node, or "
        "run the step without --pty");
    return 1;
  }
  EnvMap env = CurrentEnv();
  Result<SlurmAllocation> alloc = AllocationFromEnv(env);
  if (!alloc.ok()) {
    Say(alloc.status().message());
    return 1;
  }
  SrunOptions one = *opts;
  one.ntasks = 1;
  Result<StepLayout> layout = LayOutStep(one, *alloc);
  if (!layout.ok()) {
    Say(layout.status().message());
    return 1;
  }
  if (alloc->node_id != 0 || layout->tasks.empty() || layout->tasks[0] != 1) {
    Say("srun: error: --pty runs its task here, on the allocation's first node; -w or -x moved "
        "it elsewhere");
    return 1;
  }
  auto gpus = env.find("CUDA_VISIBLE_DEVICES");
  std::vector<std::string> node_gpus =
      gpus == env.end() ? std::vector<std::string>{} : SplitList(gpus->second);
  EnvMap task = TaskEnv(env, *layout, *alloc, 0, 0, NextStep(), node_gpus);
  if (!opts->job_name.empty()) task["SLURM_JOB_NAME"] = opts->job_name;
  for (const auto& [k, v] : task) ::setenv(k.c_str(), v.c_str(), 1);
  if (!opts->chdir.empty()) {
    std::error_code err;
    std::filesystem::current_path(opts->chdir, err);
    if (err) {
      Say(fmt::format("srun: error: --chdir {}: {}", opts->chdir, err.message()));
      return 1;
    }
  }
  Result<std::string> path = FindOnPath(opts->command[0]);
  if (!path.ok()) {
    Say(fmt::format("srun: error: {}: {}", opts->command[0], path.status().message()));
    return 127;
  }
  std::vector<std::string> argv = opts->command;
  argv[0] = *path;
  Status st = ExecReplace(argv);
  Say("srun: error: " + st.message());
  return 126;
}

}  // namespace

int RunSrun(const std::vector<std::string>& args) {
  if (!args.empty() && args[0] == "--trainq-node-steps") return NodeSteps();
  if (!args.empty() && args[0] == "--trainq-steps-done") return StepsDone();
  auto pty = std::find(args.begin(), args.end(), "--pty");
  // Only srun's own options count: a --pty after the command is the command's.
  bool own = pty != args.end() &&
             std::none_of(args.begin(), pty, [](const std::string& a) { return a == "--"; });
  if (own && GetEnv("SLURM_JOB_ID").empty()) {
    std::vector<std::string> words = {"trainq", "salloc"};
    for (auto it = args.begin(); it != args.end(); ++it) {
      if (it != pty) words.push_back(*it);
    }
    return RunTrainq(words);
  }
  if (own) {
    std::vector<std::string> rest(args.begin(), pty);
    rest.insert(rest.end(), pty + 1, args.end());
    return PtyStep(rest);
  }
  return Srun(args);
}

std::optional<int> RunSlurmTool(int argc, char** argv) {
  std::string_view self = argc > 0 ? argv[0] : "";
  self = self.substr(self.rfind('/') + 1);
  std::vector<std::string> args(argv + (argc > 0 ? 1 : 0), argv + argc);
  if (self == "srun") return RunSrun(args);
  if (self == "salloc") {
    std::vector<std::string> words = {"trainq", "salloc"};
    words.insert(words.end(), args.begin(), args.end());
    return RunTrainq(words);
  }
  if (self == "scontrol") return Scontrol(args);
  if (self == "sbatch") {
    std::vector<std::string> words = {"trainq", "sbatch"};
    words.insert(words.end(), args.begin(), args.end());
    return RunTrainq(words);
  }
  if (self == "scancel") return Scancel(args);
  if (self == "squeue" || self == "sinfo" || self == "sacct") {
    std::string instead = self == "squeue"  ? "trainq ls (--json for scripts)"
                          : self == "sinfo" ? "trainq nodes"
                                            : "trainq show ID";
    Say(fmt::format("{} is not part of trainq; use {}", self, instead));
    return 1;
  }
  return std::nullopt;
}

}  // namespace trainq
