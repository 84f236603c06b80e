#include "src/cli/format.h"

#include <algorithm>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "src/core/duration.h"
#include "trainq/size.h"

namespace trainq {

using json = nlohmann::json;

namespace {

std::string Str(const json& j, const char* key) {
  if (!j.contains(key) || j[key].is_null()) return "-";
  if (j[key].is_string()) return j[key].get<std::string>();
  return j[key].dump();
}

std::string Bytes(const json& j, const char* key) {
  if (!j.contains(key) || !j[key].is_number_unsigned()) return "-";
  return FormatBytes(j[key].get<uint64_t>());
}

// "2026-11-22T10:00:01.123Z" -> "2026-11-22 10:00:01".
std::string ShortTime(const json& j, const char* key) {
  std::string t = Str(j, key);
  if (t.size() < 19) return t;
  t = t.substr(0, 19);
  t[10] = ' ';
  return t;
}

std::string JoinInts(const json& arr) {
  std::vector<std::string> parts;
  if (arr.is_array()) {
    for (const json& v : arr) parts.push_back(v.dump());
  }
  return parts.empty() ? "-" : fmt::format("{}", fmt::join(parts, ","));
}

std::string CommandLine(const json& job) {
  std::vector<std::string> parts;
  auto command = job.find("command");
  if (command == job.end() || !command->is_array()) return "-";
  for (const json& a : *command) {
    std::string s = a.get<std::string>();
    bool plain = !s.empty() && s.find_first_of(" \t'\"$\\*?;&|<>()") == std::string::npos;
    parts.push_back(plain ? s : "'" + s + "'");
  }
  return fmt::format("{}", fmt::join(parts, " "));
}

const json& Attempts(const json& job) {
  static const json kNone = json::array();
  auto it = job.find("attempts");
  return it != job.end() && it->is_array() ? *it : kNone;
}

const json* CurrentAttempt(const json& job) {
  const json& attempts = Attempts(job);
  return attempts.empty() ? nullptr : &attempts.back();
}

}  // namespace

std::string RenderTable(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width;
  for (const auto& row : rows) {
    width.resize(std::max(width.size(), row.size()), 0);
    for (size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
  }
  std::string out;
  for (const auto& row : rows) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      line += row[i];
      if (i + 1 < row.size()) line += std::string(width[i] - row[i].size() + 2, ' ');
    }
    out += line + "\n";
  }
  return out;
}

std::string RequestSummary(const json& job) {
  int gpus = job.value("gpus", 0);
  if (gpus == 0) return fmt::format("CPUx{}", job.value("cpus", 1));
  if (job.contains("mem_percent") && job["mem_percent"].is_number()) {
    return fmt::format("{}x{}%", gpus, job["mem_percent"].get<double>());
  }
  if (job.contains("mem_bytes") && job["mem_bytes"].is_number_unsigned()) {
    return fmt::format("{}x{}", gpus, FormatBytes(job["mem_bytes"].get<uint64_t>()));
  }
  return fmt::format("{}xwhole", gpus);
}

std::string JobsTable(const json& jobs) {
  std::vector<std::vector<std::string>> rows = {
      {"ID", "NAME", "STATE", "ASKS", "GPUS", "ATTEMPT", "USER", "SUBMITTED", "INFO"}};
  for (const json& job : jobs) {
    const json* a = CurrentAttempt(job);
    std::string state = Str(job, "state");
    bool active = state == "running" || state == "starting";
    std::string info = Str(job, "reason");
    if (active && a) info = "peak " + Bytes(*a, "peak_mem_bytes");
    rows.push_back({Str(job, "id"), Str(job, "name"), state, RequestSummary(job),
                    active && a ? JoinInts((*a)["gpu_indices"]) : "-", Str(job, "attempt"),
                    Str(job, "user"), ShortTime(job, "submitted_at"), info});
  }
  return RenderTable(rows);
}

std::string JobDetails(const json& job) {
  std::string out;
  auto line = [&out](const std::string& k, const std::string& v) {
    out += fmt::format("{:<12} {}\n", k + ":", v);
  };
  line("job", Str(job, "id"));
  line("name", Str(job, "name"));
  line("state", Str(job, "state"));
  line("reason", Str(job, "reason"));
  line("command", CommandLine(job));
  line("cwd", Str(job, "cwd"));
  line("asks", RequestSummary(job) + fmt::format(", {} CPU slot(s)", job.value("cpus", 1)));
  line("priority", Str(job, "priority"));
  line("retries", Str(job, "retries") + " (out-of-memory retries allowed)");
  line("user", Str(job, "user"));
  line("submitted", Str(job, "submitted_at"));
  if (job.contains("not_before") && !job["not_before"].is_null())
    line("not before", Str(job, "not_before"));
  for (const char* key : {"after", "after_any"}) {
    auto ids = job.find(key);
    if (ids != job.end() && ids->is_array() && !ids->empty()) {
      line(key == std::string("after") ? "after" : "after any", JoinInts(*ids));
    }
  }
  if (job.contains("time_limit_ms") && job["time_limit_ms"].is_number_integer()) {
    line("time limit", FormatDuration(job["time_limit_ms"].get<int64_t>()));
  }
  for (const json& a : Attempts(job)) {
    out += fmt::format("attempt {}: {}\n", Str(a, "n"), Str(a, "state"));
    out += fmt::format("  node {}  GPUs [{}]  reserved {} per GPU  peak {}\n", Str(a, "node"),
                       JoinInts(a["gpu_indices"]), Bytes(a, "reserved_bytes"),
                       Bytes(a, "peak_mem_bytes"));
    out += fmt::format("  started {}  ended {}\n", Str(a, "started_at"), Str(a, "ended_at"));
    out += fmt::format("  exit code {}  signal {}  out of memory {}\n", Str(a, "exit_code"),
                       Str(a, "signal"), a.value("oom", false) ? "yes" : "no");
    if (Str(a, "end_reason") != "-" && Str(a, "end_reason") != "exit code " + Str(a, "exit_code")) {
      out += "  " + Str(a, "end_reason") + "\n";
    }
    if (a.contains("master_port") && a["master_port"].is_number_integer()) {
      out += "  MASTER_ADDR 127.0.0.1  MASTER_PORT " + Str(a, "master_port") + "\n";
    }
    out += "  log " + Str(a, "log_path") + "\n";
  }
  return out;
}

std::string GpusTable(const json& doc) {
  std::vector<std::vector<std::string>> rows = {
      {"GPU", "NAME", "TOTAL", "USED", "RESERVED", "USABLE", "UTIL", "TRAINQ", "OTHERS"}};
  for (const json& g : doc.value("gpus", json::array())) {
    std::vector<std::string> ours;
    for (const json& a : g["attempts"]) {
      ours.push_back(fmt::format("{}.{}", a["job"].get<int64_t>(), a["attempt"].get<int>()));
    }
    std::vector<std::string> others;
    for (const json& p : g["other_processes"]) {
      others.push_back(fmt::format("pid {} ({})", p["pid"].get<int64_t>(),
                                   FormatBytes(p["used_bytes"].get<uint64_t>())));
    }
    rows.push_back({Str(g, "index"), Str(g, "name"), Bytes(g, "memory_total"),
                    Bytes(g, "memory_used"), Bytes(g, "memory_reserved"), Bytes(g, "memory_usable"),
                    g["utilization"].is_null() ? "-" : Str(g, "utilization") + "%",
                    ours.empty() ? "-" : fmt::format("{}", fmt::join(ours, " ")),
                    others.empty() ? "-" : fmt::format("{}", fmt::join(others, ", "))});
  }
  std::string out = RenderTable(rows);
  out += fmt::format("node {}: {} ({} of {} CPU slots used)\n", Str(doc, "node"), Str(doc, "probe"),
                     Str(doc, "cpu_slots_used"), Str(doc, "cpu_slots"));
  return out;
}

namespace {

std::string ExplainGpus(const json& doc) {
  std::vector<std::vector<std::string>> rows = {{"GPU", "USABLE", "TOTAL", "JOBS", "FITS", "NOTE"}};
  bool many_nodes = false;
  for (const json& g : doc.value("gpus", json::array()))
    many_nodes |= g["node"] != doc["gpus"][0]["node"];
  for (const json& g : doc.value("gpus", json::array())) {
    std::string name = many_nodes ? Str(g, "node") + "/" + Str(g, "index") : Str(g, "index");
    std::string jobs = g["jobs"].empty() ? "" : JoinInts(g["jobs"]);
    int others = g.value("other_processes", 0);
    if (others > 0) jobs += fmt::format("{}+{} other", jobs.empty() ? "" : " ", others);
    rows.push_back({name, Bytes(g, "memory_usable"), Bytes(g, "memory_total"),
                    jobs.empty() ? "-" : jobs, g.value("fits", false) ? "yes" : "no",
                    g.value("closed", "").empty() ? "-" : Str(g, "closed")});
  }
  return RenderTable(rows);
}

}  // namespace

std::string ExplainReport(const json& doc) {
  std::string out = fmt::format("job {}: {}\n", Str(doc, "job"), Str(doc, "state"));
  out += fmt::format("reason: {}\n", Str(doc, "reason"));
  if (!doc.value("waiting", false)) return out;
  out += fmt::format("position: {} in line ({} ahead)\n", Str(doc, "position"), Str(doc, "ahead"));
  const json& fs = doc["fair_share"];
  out += fmt::format(
      "fair share: user {} holds {:.2f} decayed GPU-hours; rank {} of {} users "
      "waiting (fewest hours first)\n",
      fs.value("user", "").empty() ? "-" : Str(fs, "user"), fs.value("gpu_hours", 0.0),
      Str(fs, "rank"), Str(fs, "users_waiting"));
  out += "GPUs:\n" + ExplainGpus(doc);
  const json& holds = doc["holds"];
  if (holds.empty()) return out + "held GPUs: none\n";
  out += "held GPUs:\n";
  for (const json& h : holds) {
    out += fmt::format("  for job {}: node {} GPU {}\n", Str(h, "job"), Str(h, "node"),
                       JoinInts(h["gpus"]));
  }
  return out;
}

}  // namespace trainq
