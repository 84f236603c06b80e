// StartChild, the one runner of children the caller waits for, and RunCommand on top of it.
// Everything the child touches is made before fork: after it the child only makes system
// calls, so a multithreaded daemon may call it too.
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "src/os/child_setup.h"
#include "src/os/process.h"
#include "src/os/system.h"

extern char** environ;

namespace trainq {
namespace {

enum ChildStartStep : int { kChildFds = 1, kChildChdir, kChildExec };

std::vector<std::string> CallerEnvironment() {
  std::vector<std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) env.emplace_back(*e);
  return env;
}

// Where argv[0] may be: itself when it names a path, else each directory of `search_path`.
std::vector<std::string> Candidates(const std::string& name, const std::string& search_path) {
  if (name.find('/') != std::string::npos || search_path.empty()) return {name};
  std::vector<std::string> out;
  for (size_t start = 0; start <= search_path.size();) {
    size_t colon = search_path.find(':', start);
    if (colon == std::string::npos) colon = search_path.size();
    std::string dir = search_path.substr(start, colon - start);
    out.push_back((dir.empty() ? "." : dir) + "/" + name);
    start = colon + 1;
  }
  return out;
}

// What the child runs with, and the fds it installs (-1: keeps its own).
struct ChildPlan {
  CStringArray argv;
  CStringArray envp;
  CStringArray candidates;
  char* pid_digits = nullptr;  // inside envp: room for the child's pid
  int fds[3] = {-1, -1, -1};
  std::string chdir_message;  // "PREFIX: chdir to DIR: "
  std::string exec_message;   // "PREFIX: execve(): ARGV0: "
};

constexpr size_t kPidRoom = 20;

ChildPlan PlanOf(const ChildSpec& spec) {
  ChildPlan plan;
  plan.argv = CStringArray(spec.argv);
  std::vector<std::string> env = spec.env ? *spec.env : CallerEnvironment();
  std::string prefix = spec.pid_variable + "=";
  if (!spec.pid_variable.empty()) {
    std::erase_if(env, [&](const std::string& e) { return e.starts_with(prefix); });
    env.push_back(prefix + std::string(kPidRoom, '\0'));
  }
  plan.envp = CStringArray(std::move(env));
  if (!spec.pid_variable.empty()) {
    char* const* e = plan.envp.data();
    while (e[1] != nullptr) ++e;
    plan.pid_digits = *e + prefix.size();
  }
  std::vector<std::string> where = Candidates(spec.argv[0], spec.search_path);
  plan.candidates = CStringArray(std::move(where));
  plan.chdir_message = spec.failure_prefix + ": chdir to " + spec.cwd + ": ";
  plan.exec_message = spec.failure_prefix + ": execve(): " + spec.argv[0] + ": ";
  return plan;
}

void WriteNumber(char* out, int64_t n) {
  char digits[kPidRoom];
  int len = 0;
  do {
    digits[len++] = static_cast<char>('0' + n % 10);
    n /= 10;
  } while (n > 0 && len < static_cast<int>(kPidRoom) - 1);
  for (int i = 0; i < len; ++i) out[i] = digits[len - 1 - i];
  out[len] = '\0';
}

void WriteText(const char* text) { (void)!::write(2, text, std::strlen(text)); }

// The child's failure, as the spec asks it told: through the report pipe, or on its stderr.
[[noreturn]] void Failed(const ChildPlan& plan, int report, int step, int err, int code) {
  if (report >= 0) child::Fail(report, step, err, code);
  WriteText(step == kChildChdir ? plan.chdir_message.c_str() : plan.exec_message.c_str());
  WriteText(::strerrordesc_np(err));
  WriteText("\n");
  ::_exit(code);
}

[[noreturn]] void RunChild(const ChildPlan& plan, const ChildSpec& spec, int report) {
  child::ResetSignals();
  if (!child::InstallFds(plan.fds, 3, spec.only_stdio)) Failed(plan, report, kChildFds, errno, 126);
  if (plan.pid_digits != nullptr) WriteNumber(plan.pid_digits, ::getpid());
  if (!spec.cwd.empty() && ::chdir(spec.cwd.c_str()) != 0) {
    Failed(plan, report, kChildChdir, errno, 1);
  }
  int found = ENOENT;
  for (char* const* c = plan.candidates.data(); *c != nullptr; ++c) {
    ::execve(*c, plan.argv.data(), plan.envp.data());
    if (errno != ENOENT && errno != ENOTDIR) found = errno;
  }
  Failed(plan, report, kChildExec, found, found == ENOENT ? 127 : 126);
}

// Sets up `io` as the child's fd `i`: `theirs` is what the child gets, `ours` what the caller
// keeps (a pipe's other end).
Status Stream(ChildIo io, int i, UniqueFd& theirs, UniqueFd& ours, const UniqueFd& out) {
  if (io == ChildIo::kNull) {
    theirs.Reset(::open("/dev/null", O_RDWR | O_CLOEXEC));
    if (!theirs.valid()) return ErrnoStatus("open /dev/null", errno);
  } else if (io == ChildIo::kPipe) {
    Result<CloexecPipe> p = MakeCloexecPipe();
    if (!p.ok()) return p.status();
    theirs = std::move(i == 0 ? p->read : p->write);
    ours = std::move(i == 0 ? p->write : p->read);
  } else if (io == ChildIo::kStdout && out.valid()) {
    theirs.Reset(::fcntl(out.get(), F_DUPFD_CLOEXEC, 0));
    if (!theirs.valid()) return ErrnoStatus("dup", errno);
  }
  return Status::Ok();
}

Status StartFailure(const ChildSpec& spec, const ChildFailure& f) {
  if (f.step == kChildChdir)
    return ErrnoStatus("cannot run " + spec.argv[0] + " in " + spec.cwd, f.err);
  if (f.step == kChildFds) return ErrnoStatus("cannot run " + spec.argv[0] + ": set up fds", f.err);
  return ErrnoStatus("cannot run " + spec.argv[0], f.err);
}

}  // namespace

Result<Child> StartChild(const ChildSpec& spec) {
  if (spec.argv.empty()) return Status::Invalid("StartChild: empty command");
  ChildPlan plan = PlanOf(spec);
  Child child;
  UniqueFd theirs[3];
  ChildIo ios[3] = {spec.in, spec.out, spec.err};
  UniqueFd* ours[3] = {&child.in, &child.out, &child.err};
  for (int i = 0; i < 3; ++i) {
    // stderr to stdout: wherever stdout went, a pipe or the caller's own.
    const UniqueFd& out = theirs[1];
    if (i == 2 && ios[2] == ChildIo::kStdout && !out.valid()) {
      plan.fds[2] = 1;
      continue;
    }
    TRAINQ_RETURN_IF_ERROR(Stream(ios[i], i, theirs[i], *ours[i], out));
    plan.fds[i] = theirs[i].valid() ? theirs[i].get() : -1;
  }
  std::optional<CloexecPipe> report;
  if (spec.failure_prefix.empty()) {
    Result<CloexecPipe> p = MakeCloexecPipe();
    if (!p.ok()) return p.status();
    report = std::move(*p);
  }
  pid_t pid = ::fork();
  if (pid < 0) return ErrnoStatus("fork", errno);
  if (pid == 0) RunChild(plan, spec, report ? report->write.get() : -1);
  child.pid = pid;
  if (!report) return child;
  report->write = UniqueFd();
  if (std::optional<ChildFailure> failed = ReadChildReport(report->read.get())) {
    (void)ReapChild(pid, true);
    return StartFailure(spec, *failed);
  }
  return child;
}

std::optional<ChildEnd> ReapChild(int64_t pid, bool block) {
  int status = 0;
  pid_t r;
  do {
    r = ::waitpid(static_cast<pid_t>(pid), &status, block ? 0 : WNOHANG);
  } while (r < 0 && errno == EINTR);
  if (r != pid) return std::nullopt;
  if (WIFSIGNALED(status)) return ChildEnd{128 + WTERMSIG(status), WTERMSIG(status)};
  return ChildEnd{WEXITSTATUS(status), 0};
}

Result<CommandOutput> RunCommand(const std::vector<std::string>& argv, std::string_view input) {
  ChildSpec spec;
  spec.argv = argv;
  spec.in = input.empty() ? ChildIo::kNull : ChildIo::kPipe;
  spec.out = ChildIo::kPipe;
  spec.err = ChildIo::kStdout;
  Result<Child> child = StartChild(spec);
  if (!child.ok()) return child.status();
  for (size_t done = 0; done < input.size();) {
    ssize_t n = ::write(child->in.get(), input.data() + done, input.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // the command stopped reading: its exit code says why
    done += static_cast<size_t>(n);
  }
  child->in = UniqueFd();
  CommandOutput out;
  char buf[4096];
  for (;;) {
    Result<size_t> n = ReadSome(child->out.get(), buf);
    if (!n.ok() || *n == 0) break;
    out.output.append(buf, *n);
  }
  std::optional<ChildEnd> end = ReapChild(child->pid, true);
  out.exit_code = end ? end->exit_code : 1;
  return out;
}

}  // namespace trainq
