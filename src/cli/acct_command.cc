// `trainq acct` (Slurm's sacct): each job's wait, run time, GPUs, GPU-hours and peak, and
// each user's totals, from GET /v1/acct.
#include <chrono>
#include <cstdio>
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "src/cli/api_paths.h"
#include "src/cli/commands.h"
#include "src/cli/format.h"
#include "src/cli/reply.h"
#include "src/core/duration.h"
#include "src/core/json_codec.h"
#include "src/core/words.h"
#include "trainq/size.h"

namespace trainq {

namespace {

using json = nlohmann::json;

std::string Ms(const Reply& row, const char* key) {
  int64_t ms = row.OptInt(key).value_or(0);
  return FormatDuration(ms / 1000 * 1000);
}

std::string Num(const Reply& row, const char* key) {
  return std::to_string(row.OptInt(key).value_or(0));
}

std::string Hours(const Reply& row, const char* key) {
  return fmt::format("{:.2f}", row.OptNum(key).value_or(0.0));
}

std::string Word(const Reply& row, const char* key) {
  return TerminalSafe(row.OptStr(key).value_or(""));
}

// GPU-hours weighted by utilisation, with the mean utilisation: "0.74 (62%)"; "-" when the
// probe never knew it (no GPU, or GPUs whose utilisation is unknown).
std::string Used(const Reply& row) {
  std::optional<double> u = row.OptNum("utilization");
  if (!u) return "-";
  return fmt::format("{:.2f} ({:.0f}%)", row.OptNum("gpu_hours_used").value_or(0.0), *u * 100);
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
  // Read through Reply: a field of another type (a daemon of another version) is reported,
  // naming it, where nlohmann's value() would throw.
  Reply reply(*r);
  std::vector<std::vector<std::string>> rows = {{"ID", "USER", "NAME", "STATE", "SUBMITTED", "WAIT",
                                                 "ELAPSED", "GPUS", "GPU-HOURS", "USED", "PEAK/GPU",
                                                 "ATTEMPTS", "END"}};
  for (const Reply& j : reply.ArrayOr("jobs")) {
    uint64_t peak = j.OptUInt("peak_bytes_per_gpu").value_or(0);
    rows.push_back({Num(j, "id"), Word(j, "user"), Word(j, "name"), Word(j, "state"),
                    Time(j.OptInt("submitted_at").value_or(0)), Ms(j, "wait_ms"),
                    Ms(j, "elapsed_ms"), Num(j, "gpus"), Hours(j, "gpu_hours"), Used(j),
                    peak > 0 ? FormatBytes(peak) : "-", Num(j, "attempts"), Word(j, "end")});
  }
  std::string out = RenderTable(rows);
  std::vector<std::vector<std::string>> users = {{"USER", "JOBS", "SUCCEEDED", "FAILED",
                                                  "CANCELLED", "RUNNING", "GPU-HOURS", "USED",
                                                  "ELAPSED"}};
  for (const Reply& u : reply.ArrayOr("users")) {
    users.push_back({Word(u, "user"), Num(u, "jobs"), Num(u, "succeeded"), Num(u, "failed"),
                     Num(u, "cancelled"), Num(u, "running"), Hours(u, "gpu_hours"),
                     Hours(u, "gpu_hours_used"), Ms(u, "elapsed_ms")});
  }
  out += '\n';  // not "\n" + ...: GCC 12 -O3 warns of a false overlap (-Wrestrict)
  out += RenderTable(users);
  if (!reply.ok()) return Fail(reply.status());
  std::fputs(out.c_str(), stdout);
  return 0;
}

}  // namespace trainq
