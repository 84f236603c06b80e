// A fake daemon for the unit tests of the CLI's commands: it answers each request as the test
// scripted it, through the Client's Transport (src/cli/client.h), and keeps every request
// sent. A test runs a command (its Cmd function, or a whole command line through RunCli) and
// asserts what was sent, what was printed on stdout and stderr, and the exit code; no socket,
// no daemon, no sleep.
#pragma once

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "src/api/http.h"
#include "src/cli/cli.h"
#include "src/cli/client.h"
#include "src/core/endpoint.h"
#include "trainq/status.h"

namespace trainq::testing {

// Where the fake "listens": a fixed daemon, so the client never starts one.
inline constexpr const char* kFakeServer = "unix:/nonexistent/trainq-fake.sock";

// A refusal's body as the daemon sends it: {"error": {"code", "message"}}.
inline nlohmann::json ErrorJson(const std::string& code, const std::string& message) {
  return {{"error", {{"code", code}, {"message", message}}}};
}

class FakeDaemon {
 public:
  FakeDaemon() = default;
  FakeDaemon(const FakeDaemon&) = delete;
  FakeDaemon& operator=(const FakeDaemon&) = delete;

  // The answer to `method` `target` (the target as sent, query included): HTTP `status` with
  // `body` as JSON. Several answers to one request are given in turn, the last one again.
  FakeDaemon& On(const std::string& method, const std::string& target, int status,
                 const nlohmann::json& body) {
    HttpResponse r;
    r.status = status;
    r.body = body.dump();
    return Answer(method, target, std::move(r));
  }
  // A 200 whose body is bytes, not JSON (a log).
  FakeDaemon& OnBytes(const std::string& method, const std::string& target, std::string bytes) {
    HttpResponse r;
    r.body = std::move(bytes);
    r.content_type = "application/octet-stream";
    return Answer(method, target, std::move(r));
  }
  // The daemon's refusal, {"error": {"code", "message"}} with the code's HTTP status, as the
  // daemon's ErrorResponse sends it.
  FakeDaemon& OnError(const std::string& method, const std::string& target, const Status& st) {
    return On(method, target, HttpStatusFor(st.code()),
              ErrorJson(CodeName(st.code()), st.message()));
  }
  // A transport failure: kUnavailable (nothing was sent: no daemon listens) or kIo (the answer
  // was lost after the request went out).
  FakeDaemon& OnFailure(const std::string& method, const std::string& target, const Status& st) {
    answers_[Key(method, target)].push_back(st);
    return *this;
  }

  Transport transport() {
    return [this](const ClientRequest& request) { return Serve(request); };
  }
  // A client of this fake, as `--server unix:/...` would make it.
  Client MakeClient() {
    ServerChoice choice;
    choice.fixed = *ParseServerUrl(kFakeServer, "--server");
    choice.origin = "--server";
    return Client(std::move(choice), transport());
  }

  // Every request sent, in order.
  const std::vector<ClientRequest>& requests() const { return requests_; }
  // The requests sent to `method` `target`.
  std::vector<ClientRequest> Sent(const std::string& method, const std::string& target) const {
    std::vector<ClientRequest> out;
    for (const ClientRequest& r : requests_) {
      if (r.method == method && r.target == target) out.push_back(r);
    }
    return out;
  }
  // The JSON body of the only request to `method` `target` (null when there is not one).
  nlohmann::json BodyOf(const std::string& method, const std::string& target) const {
    std::vector<ClientRequest> sent = Sent(method, target);
    EXPECT_EQ(sent.size(), 1u) << method << " " << target;
    if (sent.size() != 1) return nullptr;
    return nlohmann::json::parse(sent[0].body, nullptr, false);
  }

 private:
  using Scripted = Result<HttpResponse>;

  static std::string Key(const std::string& method, const std::string& target) {
    return method + " " + target;
  }

  FakeDaemon& Answer(const std::string& method, const std::string& target, HttpResponse r) {
    answers_[Key(method, target)].push_back(std::move(r));
    return *this;
  }

  Result<HttpResponse> Serve(const ClientRequest& request) {
    requests_.push_back(request);
    auto it = answers_.find(Key(request.method, request.target));
    if (it == answers_.end() || it->second.empty()) {
      ADD_FAILURE() << "the fake daemon has no answer for " << Key(request.method, request.target);
      HttpResponse r;
      r.status = 500;
      r.body = ErrorJson("internal", "unscripted request").dump();
      return r;
    }
    Scripted answer = it->second.front();
    if (it->second.size() > 1) it->second.pop_front();
    return answer;
  }

  std::map<std::string, std::deque<Scripted>> answers_;
  std::vector<ClientRequest> requests_;
};

// What a command did: its exit code and what it printed.
struct Ran {
  int rc = -1;
  std::string out;  // stdout
  std::string err;  // stderr
};

// Runs `command` (returning an exit code) with stdout and stderr captured.
template <class F>
Ran Capture(F&& command) {
  std::fflush(nullptr);
  ::testing::internal::CaptureStdout();
  ::testing::internal::CaptureStderr();
  Ran ran;
  ran.rc = command();
  ran.out = ::testing::internal::GetCapturedStdout();
  ran.err = ::testing::internal::GetCapturedStderr();
  return ran;
}

// `trainq --server FAKE WORDS...` run whole (parsing, dispatch, the command) against `daemon`.
inline Ran RunTrainq(FakeDaemon& daemon, std::vector<std::string> words) {
  words.insert(words.begin(), {"trainq", "--server", kFakeServer});
  ScopedTestTransport transport(daemon.transport());
  std::vector<char*> argv;
  for (std::string& w : words) argv.push_back(w.data());
  return Capture([&] { return RunCli(static_cast<int>(argv.size()), argv.data()); });
}

// A job as GET /v1/jobs/ID answers it (the fields the CLI reads), `state` with no attempt.
inline nlohmann::json JobJson(int64_t id, const std::string& name, const std::string& state) {
  return {{"id", id},
          {"name", name},
          {"state", state},
          {"reason", state == "queued" ? "waiting for GPUs" : ""},
          {"command", {"python", "train.py"}},
          {"cwd", "/home/ada/proj"},
          {"gpus", 1},
          {"priority", 0},
          {"retries", 3},
          {"user", "ada"},
          {"submitted_at", "2026-01-02T10:00:00.000Z"},
          {"attempt", 0},
          {"attempts", nlohmann::json::array()}};
}

// An attempt of a job as the API lists it; `ended_at` "" while it runs.
inline nlohmann::json AttemptJson(int64_t n, const std::string& state, const std::string& ended_at,
                                  std::optional<int> exit_code) {
  nlohmann::json a = {{"n", n},
                      {"state", state},
                      {"node", "gpu1"},
                      {"gpu_indices", {0, 1}},
                      {"started_at", "2026-01-02T10:00:05.000Z"},
                      {"log_path", "/nonexistent/run/attempt-" + std::to_string(n) + ".log"},
                      {"peak_mem_bytes", 3ull << 30}};
  if (!ended_at.empty()) a["ended_at"] = ended_at;
  if (exit_code) a["exit_code"] = *exit_code;
  return a;
}

}  // namespace trainq::testing
