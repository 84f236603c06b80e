// `trainq acct` (Slurm's sacct): each job's wait, run time, GPUs, GPU-hours and peak, and
// each user's totals, from GET /v1/acct.
#include <chrono>
#include <cstdio>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "src/cli/api_paths.h"
#include "src/cli/commands.h"
#include "src/cli/format.h"
#include "src/core/duration.h"
#include "src/core/json_codec.h"
#include "src/core/words.h"
#include "trainq/size.h"

namespace trainq {

namespace {

using json = nlohmann::json;

std::string Ms(const json& row, const char* key) {
  int64_t ms = row.value(key, int64_t{0});
  return FormatDuration(ms / 1000 * 1000);
}

// GPU-hours weighted by utilisation, with the mean utilisation: "0.74 (62%)"; "-" when the
// probe never knew it (no GPU, or GPUs whose utilisation is unknown).
std::string Used(const json& row) {
  const json& u = row.contains("utilization") ? row["utilization"] : json();
  if (!u.is_number()) return "-";
  return fmt::format("{:.2f} ({:.0f}%)", row.value("gpu_hours_used", 0.0), u.get<double>() * 100);
}

std::string Time(int64_t ms) {
  if (ms <= 0) return "-";
  std::time_t t = static_cast<std::time_t>(ms / 1000);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", std::gmtime(&t));
  return buf;
}

}  // namespace

int CmdAcct(Client& client, const AcctArgs& args) {
  std::string query;
  if (!args.user.empty() && args.all_users) {
    return Fail(Status::Invalid("--user and --all-users: give one of them"));
  }
  if (!args.user.empty()) {
    if (args.user.find_first_of("&=%# /") != std::string::npos) {
      return Fail(Status::Invalid("--user: '" + TerminalSafe(args.user) + "' is not a user name"));
    }
    query += "user=" + args.user + "&";
  }
  if (args.all_users) query += "all=1&";
  if (!args.since.empty()) {
    Result<int64_t> ms = ParseDurationMs(args.since, "--since");
    if (!ms.ok()) return Fail(ms.status());
    int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                      std::chrono::system_clock::now().time_since_epoch())
                      .count();
    query += fmt::format("since={}&", std::max<int64_t>(0, now - *ms));
  }
  if (!query.empty()) query.pop_back();
  Result<json> r = client.Call("GET", api::AcctPath(query));
  if (!r.ok()) return Fail(r.status());
  if (args.json) {
    std::printf("%s\n", DumpJson(*r, 2).c_str());
    return 0;
  }
  std::vector<std::vector<std::string>> rows = {{"ID", "USER", "NAME", "STATE", "SUBMITTED", "WAIT",
                                                 "ELAPSED", "GPUS", "GPU-HOURS", "USED", "PEAK/GPU",
                                                 "ATTEMPTS", "END"}};
  for (const json& j : r->value("jobs", json::array())) {
    uint64_t peak = j.value("peak_bytes_per_gpu", uint64_t{0});
    rows.push_back({std::to_string(j.value("id", int64_t{0})), TerminalSafe(j.value("user", "")),
                    TerminalSafe(j.value("name", "")), j.value("state", ""),
                    Time(j.value("submitted_at", int64_t{0})), Ms(j, "wait_ms"),
                    Ms(j, "elapsed_ms"), std::to_string(j.value("gpus", 0)),
                    fmt::format("{:.2f}", j.value("gpu_hours", 0.0)), Used(j),
                    peak > 0 ? FormatBytes(peak) : "-", std::to_string(j.value("attempts", 0)),
                    TerminalSafe(j.value("end", ""))});
  }
  std::string out = RenderTable(rows);
  std::vector<std::vector<std::string>> users = {{"USER", "JOBS", "SUCCEEDED", "FAILED",
                                                  "CANCELLED", "RUNNING", "GPU-HOURS", "USED",
                                                  "ELAPSED"}};
  for (const json& u : r->value("users", json::array())) {
    users.push_back({TerminalSafe(u.value("user", "")), std::to_string(u.value("jobs", 0)),
                     std::to_string(u.value("succeeded", 0)), std::to_string(u.value("failed", 0)),
                     std::to_string(u.value("cancelled", 0)), std::to_string(u.value("running", 0)),
                     fmt::format("{:.2f}", u.value("gpu_hours", 0.0)),
                     fmt::format("{:.2f}", u.value("gpu_hours_used", 0.0)), Ms(u, "elapsed_ms")});
  }
  out += "\n" + RenderTable(users);
  std::fputs(out.c_str(), stdout);
  return 0;
}

}  // namespace trainq
