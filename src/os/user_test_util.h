// A real local user for the tests of running jobs as their submitter: made with useradd,
// removed with userdel when the object goes. Tests run as root; elsewhere (or without
// useradd) `ok()` is false with the reason in `why()`, and the test skips.
#pragma once

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "src/os/system.h"

namespace trainq::testing {

class TestUser {
 public:
  // A user named tq<pid>u<n> with its own group and, when `extra_group`, a second group
  // tq<pid>g<n> it belongs to. Its home directory is recorded but not created.
  explicit TestUser(bool extra_group = false) {
    static std::atomic<int> counter{0};
    std::string n = std::to_string(::getpid()) + "x" + std::to_string(counter++);
    name_ = "tq" + n + "u";
    if (::geteuid() != 0) {
      why_ = "needs root (useradd)";
      return;
    }
    if (extra_group) {
      if (!Run({"/usr/sbin/groupadd", "tq" + n + "g"})) return;
      group_ = "tq" + n + "g";
    }
    std::vector<std::string> add = {"/usr/sbin/useradd", "-M", "-U",     "-d",
                                    "/home/" + name_,    "-s", "/bin/sh"};
    if (!group_.empty()) add.insert(add.end(), {"-G", group_});
    add.push_back(name_);
    created_ = Run(add);
  }
  ~TestUser() {
    if (created_) Run({"/usr/sbin/userdel", name_});
    if (!group_.empty()) Run({"/usr/sbin/groupdel", group_});
  }
  TestUser(const TestUser&) = delete;
  TestUser& operator=(const TestUser&) = delete;

  bool ok() const { return created_; }
  const std::string& why() const { return why_; }
  const std::string& name() const { return name_; }
  const std::string& group() const { return group_; }  // the second group, if any

 private:
  // useradd and friends refuse while another holds /etc/passwd's lock (tests run in
  // parallel): tried again for a while.
  bool Run(const std::vector<std::string>& argv) {
    for (int attempt = 0; attempt < 50; ++attempt) {
      Result<CommandOutput> out = RunCommand(argv);
      if (!out.ok()) {
        why_ = out.status().ToString();
        return false;
      }
      if (out->exit_code == 0) return true;
      why_ = argv[0] + ": " + out->output;
      if (out->output.find("lock") == std::string::npos) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }

  std::string name_;
  std::string group_;
  std::string why_;
  bool created_ = false;
};

}  // namespace trainq::testing
