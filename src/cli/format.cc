#include "src/cli/format.h"

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <optional>

#include <fmt/format.h>

#include "src/core/duration.h"
#include "src/core/words.h"
#include "trainq/size.h"

namespace trainq {

namespace {

std::string Bytes(const Reply& r, const char* key) {
  std::optional<uint64_t> b = r.OptUInt(key);
  return b ? FormatBytes(*b) : "-";
}

// "2026-11-22T10:00:01.123Z" -> "2026-11-22 10:00:01".
std::string ShortTime(const Reply& r, const char* key) {
  std::string t = r.Text(key);
  if (t.size() < 19) return t;
  t = t.substr(0, 19);
  t[10] = ' ';
  return t;
}

std::string JoinInts(const std::vector<Reply>& values) {
  std::vector<std::string> parts;
  for (const Reply& v : values) parts.push_back(std::to_string(v.AsInt()));
  return parts.empty() ? "-" : fmt::format("{}", fmt::join(parts, ","));
}

std::string CommandLine(const Reply& job) {
  std::vector<std::string> words;
  // A `trainq sbatch` job runs its script in a wrapper: the script and its arguments are what
  // the user submitted (show --json has the wrapper).
  if (job.Has("record") && job.Object("record").Has("sbatch")) {
    Reply sbatch = job.Object("record").Object("sbatch");
    words = {"sbatch", sbatch.Text("script")};
    for (const Reply& a : sbatch.ArrayOr("args")) words.push_back(a.AsStr());
  } else {
    for (const Reply& a : job.Array("command")) words.push_back(a.AsStr());
  }
  std::vector<std::string> parts;
  for (const std::string& word : words) {
    std::string s = TerminalSafe(word);
    bool plain = !s.empty() && s.find_first_of(" \t'\"$\\*?;&|<>()") == std::string::npos;
    parts.push_back(plain ? s : "'" + s + "'");
  }
  return parts.empty() ? "-" : fmt::format("{}", fmt::join(parts, " "));
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

std::string RequestSummary(const Reply& job) {
  int64_t n = job.OptInt("gpus").value_or(0);
  if (n == 0) return fmt::format("CPUx{}", job.OptInt("cpus").value_or(1));
  // An elastic job: its range, MIN:MAX.
  int64_t max = job.OptInt("max_gpus").value_or(0);
  std::string gpus = max > 0 ? fmt::format("{}:{}", n, max) : std::to_string(n);
  if (std::optional<double> pct = job.OptNum("mem_percent")) {
    return fmt::format("{}x{}%", gpus, *pct);
  }
  if (std::optional<uint64_t> mem = job.OptUInt("mem_bytes")) {
    return fmt::format("{}x{}", gpus, FormatBytes(*mem));
  }
  return fmt::format("{}xwhole", gpus);
}

std::optional<int64_t> IsoMs(const std::string& text) {
  // "2026-11-22T10:00:01.123Z", as the daemon writes times (UTC).
  struct tm t = {};
  int ms = 0;
  if (text.size() < 20 ||
      std::sscanf(text.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d.%3dZ", &t.tm_year, &t.tm_mon, &t.tm_mday,
                  &t.tm_hour, &t.tm_min, &t.tm_sec, &ms) < 6) {
    return std::nullopt;
  }
  t.tm_year -= 1900;
  t.tm_mon -= 1;
  return static_cast<int64_t>(::timegm(&t)) * 1000 + ms;
}

std::string AttemptDuration(const Reply& attempt, int64_t now_ms) {
  std::optional<int64_t> start = IsoMs(attempt.Text("started_at"));
  std::optional<int64_t> end = IsoMs(attempt.Text("ended_at"));
  if (!start) return "-";
  int64_t ms = (end ? *end : now_ms) - *start;
  // Whole seconds, as FormatDuration writes them; under one, "<1s".
  if (ms < 1000) return "<1s";
  return FormatDuration(ms / 1000 * 1000);
}

std::string JobsTable(const std::vector<Reply>& jobs, bool cluster, int64_t now_ms) {
  std::vector<std::string> header = {"ID",   "NAME",    "STATE", "PRIORITY",  "ASKS",
                                     "GPUS", "ATTEMPT", "USER",  "SUBMITTED", "INFO"};
  if (cluster) header.insert(header.begin() + 6, "NODE");
  std::vector<std::vector<std::string>> rows = {header};
  for (const Reply& job : jobs) {
    std::vector<Reply> attempts = job.ArrayOr("attempts");
    std::string state = job.Text("state");
    bool active = (state == "running" || state == "starting") && !attempts.empty();
    std::string info = job.Text("reason");
    std::string gpus = "-", node = "-";
    if (!attempts.empty()) {
      const Reply& last = attempts.back();
      gpus = JoinInts(last.ArrayOr("gpu_indices"));
      std::vector<std::string> nodes;
      for (const Reply& n : last.ArrayOr("nodes")) nodes.push_back(TerminalSafe(n.AsStr()));
      node = nodes.empty() ? last.Text("node") : fmt::format("{}", fmt::join(nodes, ","));
      // A CPU job has no GPU memory to peak.
      std::string peak = last.ArrayOr("gpu_indices").empty()
                             ? std::string()
                             : ", peak " + Bytes(last, "peak_mem_bytes");
      if (active) {
        info = fmt::format("running {}{}", AttemptDuration(last, now_ms), peak);
      } else if (last.Has("started_at") && last.Text("started_at") != "-") {
        info = fmt::format("ran {}{}", AttemptDuration(last, now_ms), peak);
        std::string why = last.Text("end_reason");
        if (state != "succeeded" && !why.empty() && why != "-") info += ", " + why;
      }
    }
    if (job.BoolOr("interactive", false)) info = "session: " + info;  // trainq shell
    std::vector<std::string> row = {job.Text("id"),
                                    job.Text("name"),
                                    state,
                                    job.Text("priority"),
                                    RequestSummary(job),
                                    gpus,
                                    job.Text("attempt"),
                                    job.Text("user"),
                                    ShortTime(job, "submitted_at"),
                                    info};
    if (cluster) row.insert(row.begin() + 6, node);
    rows.push_back(std::move(row));
  }
  return RenderTable(rows);
}

namespace {

std::string AttemptDetails(const Reply& a, int64_t now_ms) {
  std::string out = fmt::format("attempt {}: {}\n", a.Text("n"), a.Text("state"));
  out += fmt::format("  node {}  GPUs [{}]  reserved {} per GPU  peak {} per GPU\n", a.Text("node"),
                     JoinInts(a.ArrayOr("gpu_indices")), Bytes(a, "reserved_bytes"),
                     Bytes(a, "peak_mem_bytes"));
  out += fmt::format("  started {}  ended {}  ({}{})\n", a.Text("started_at"), a.Text("ended_at"),
                     a.Has("ended_at") && a.Text("ended_at") != "-" ? "ran " : "running ",
                     AttemptDuration(a, now_ms));
  out += fmt::format("  exit code {}  signal {}  out of memory {}\n", a.Text("exit_code"),
                     a.Text("signal"), a.BoolOr("oom", false) ? "yes" : "no");
  // What it did with its GPUs, as its node measured it (absent from an older daemon).
  if (a.Has("usage")) {
    Reply u = a.Object("usage");
    double held = u.OptNum("gpu_seconds_held").value_or(0);
    if (held > 0) {
      std::optional<double> util = u.OptNum("utilization_mean");
      std::optional<uint64_t> mem = u.OptUInt("memory_mean_bytes");
      out += fmt::format(
          "  GPU time held {:.2f} GPU-h, used {:.2f} GPU-h ({}), memory {} per GPU "
          "on average\n",
          held / 3600, u.OptNum("gpu_seconds_used").value_or(0) / 3600,
          util ? fmt::format("{:.0f}% utilisation", *util * 100)
               : std::string("utilisation unknown"),
          mem ? FormatBytes(*mem) : std::string("unknown"));
    }
  }
  std::string end_reason = a.Text("end_reason");
  if (!end_reason.empty() && end_reason != "-" &&
      end_reason != "exit code " + a.Text("exit_code")) {
    out += "  " + end_reason + "\n";
  }
  std::vector<Reply> parts = a.ArrayOr("parts");
  if (a.OptInt("master_port")) {
    out += parts.size() > 1
               ? fmt::format("  MASTER_PORT {} on node {}\n", a.Text("master_port"),
                             parts[0].Text("node"))
               : "  MASTER_ADDR 127.0.0.1  MASTER_PORT " + a.Text("master_port") + "\n";
  }
  if (parts.size() > 1) {
    // A gang: every node, its GPUs and its part of the log (trainq logs --node RANK).
    for (size_t r = 0; r < parts.size(); ++r) {
      out += fmt::format("  part {}: node {}  GPUs [{}]  log {}\n", r, parts[r].Text("node"),
                         JoinInts(parts[r].ArrayOr("gpu_indices")), parts[r].Text("log_path"));
    }
    return out;
  }
  out += "  log " + a.Text("log_path") + "\n";
  return out;
}

}  // namespace

// What ran (the run record, docs/workflow.md): code, host, GPU models, trainq's version.
std::string RecordDetails(const Reply& job) {
  if (!job.Has("record")) return "";
  Reply r = job.Object("record");
  std::string out;
  auto line = [&out](const std::string& k, const std::string& v) {
    out += fmt::format("{:<12} {}\n", k + ":", v);
  };
  if (r.Has("git")) {
    Reply git = r.Object("git");
    std::string commit = git.Text("commit");
    line("commit", fmt::format("{}{}{}", commit == "" ? "(none)" : commit,
                               git.Text("branch") == "-" || git.Text("branch").empty()
                                   ? ""
                                   : " on " + git.Text("branch"),
                               git.BoolOr("dirty", false) ? ", with uncommitted changes" : ""));
    if (git.Text("diff_path") != "-" && !git.Text("diff_path").empty()) {
      line("changes", git.Text("diff_path"));
    }
  }
  if (r.Has("snapshot")) {
    Reply s = r.Object("snapshot");
    line("snapshot", fmt::format("{} ({} files, {}) in {}", s.Text("id").substr(0, 12),
                                 s.Text("files"), FormatBytes(s.UInt("bytes")), s.Text("dir")));
    // Where outputs went: into the work tree through these, elsewhere into the snapshot's.
    std::vector<std::string> links;
    for (const Reply& l : s.ArrayOr("links")) {
      links.push_back(fmt::format("{} -> {}", l.Text("path"), l.Text("to")));
    }
    if (!links.empty()) line("linked", fmt::format("{}", fmt::join(links, ", ")));
    line("outputs", links.empty() ? "written in the snapshot's tree"
                                  : "in the linked paths go to the work tree; the rest to the "
                                    "snapshot's tree");
  }
  line("host", r.Text("host"));
  if (r.Has("gpu_models")) {
    std::vector<std::string> models;
    for (const Reply& m : r.ArrayOr("gpu_models")) models.push_back(m.AsText());
    line("gpu models", fmt::format("{}", fmt::join(models, ", ")));
  }
  line("trainq", r.Text("trainq_version"));
  return out;
}

// What travels with a job to another node and back (docs/cluster.md, "Code and data"), and
// who is told of its end.
std::string ShippingAndNoticeDetails(const Reply& job) {
  std::string out;
  auto line = [&out](const std::string& k, const std::string& v) {
    out += fmt::format("{:<12} {}\n", k + ":", v);
  };
  for (const Reply& t : job.ArrayOr("transfers")) {
    if (t.Text("kind") != "stage") continue;
    line("staged",
         fmt::format("{} as {} ({} file{}, {})", t.Text("src"), t.Text("dst"), t.Text("files"),
                     t.Text("files") == "1" ? "" : "s", FormatBytes(t.UInt("bytes"))));
  }
  std::vector<std::string> collect;
  for (const Reply& g : job.ArrayOr("collect")) collect.push_back(g.AsText());
  if (!collect.empty()) {
    std::string to = job.Text("collect_to");
    line("collect",
         fmt::format("{} into {} when an attempt on another node ends", fmt::join(collect, " "),
                     to == "-" || to.empty() ? "its directory here" : to));
  }
  // Where its end is told: "(hidden)" to all but its owner and admins.
  if (std::optional<std::string> url = job.OptStr("notify")) line("notify", TerminalSafe(*url));
  if (std::optional<std::string> mail = job.OptStr("mail")) line("mail", TerminalSafe(*mail));
  if (job.BoolOr("slurm", false))
    line("sbatch", "started with Slurm's variables (SLURM_JOB_ID, ...)");
  if (std::optional<int64_t> pid = job.OptInt("gate_pid")) {
    line("gate", fmt::format("no command: process {} holds the GPUs once placed", *pid));
  }
  if (job.BoolOr("interactive", false)) {
    line("session", job.BoolOr("no_log", false)
                        ? "interactive (trainq shell), transcript not kept (--no-log)"
                        : "interactive (trainq shell), transcript in the log");
  }
  return out;
}

std::string JobDetails(const Reply& job, int64_t now_ms) {
  std::string out;
  auto line = [&out](const std::string& k, const std::string& v) {
    out += fmt::format("{:<12} {}\n", k + ":", v);
  };
  line("job", job.Text("id"));
  line("name", job.Text("name"));
  line("state", job.Text("state"));
  line("reason", job.Text("reason"));
  line("command", CommandLine(job));
  line("cwd", job.Text("cwd"));
  int64_t cpus = job.OptInt("cpus").value_or(1);
  line("asks", RequestSummary(job) +
                   (cpus == 0 ? ", no CPU slot"
                              : fmt::format(", {} CPU slot{}", cpus, cpus == 1 ? "" : "s")));
  line("priority", job.Text("priority"));
  line("retries", job.Text("retries") + " (out-of-memory retries allowed)");
  line("user", job.Text("user"));
  line("submitted", job.Text("submitted_at"));
  if (job.BoolOr("submitted_held", false)) {
    line("held at submit", job.BoolOr("held", false) ? "yes (--hold); trainq release starts it"
                                                     : "yes (--hold), since released");
  }
  if (job.Has("not_before")) line("not before", job.Text("not_before"));
  if (std::vector<Reply> after = job.ArrayOr("after"); !after.empty()) {
    line("after", JoinInts(after));
  }
  if (std::vector<Reply> after = job.ArrayOr("after_any"); !after.empty()) {
    line("after any", JoinInts(after));
  }
  if (std::optional<int64_t> limit = job.OptInt("time_limit_ms")) {
    line("time limit", FormatDuration(*limit));
  }
  if (std::optional<uint64_t> limit = job.OptUInt("mem_limit_bytes")) {
    line("host mem limit", FormatBytes(*limit));
  }
  if (std::optional<int64_t> limit = job.OptInt("max_procs")) {
    line("max procs", std::to_string(*limit));
  }
  // How it is warned and stopped (docs/scheduling.md, "Preemption and requeue").
  std::vector<std::string> stop;
  if (std::optional<std::string> sig = job.OptStr("signal")) {
    stop.push_back(fmt::format("--signal {}", TerminalSafe(*sig)));
  }
  if (job.BoolOr("requeue", false)) stop.push_back("--requeue");
  if (job.Has("preemptible")) {
    stop.push_back(job.BoolOr("preemptible", false) ? "--preemptible" : "--no-preemptible");
  }
  if (std::optional<std::string> glob = job.OptStr("checkpoint")) {
    stop.push_back(fmt::format("--checkpoint {}", TerminalSafe(*glob)));
  }
  if (!stop.empty()) line("stops", fmt::format("{}", fmt::join(stop, " ")));
  auto names = [](const std::vector<Reply>& list) {
    std::vector<std::string> out;
    for (const Reply& r : list) out.push_back(TerminalSafe(r.AsStr()));
    return fmt::format("{}", fmt::join(out, ","));
  };
  if (std::vector<Reply> nodes = job.ArrayOr("nodes"); !nodes.empty()) line("nodes", names(nodes));
  if (std::vector<Reply> nodes = job.ArrayOr("exclude_nodes"); !nodes.empty()) {
    line("not on", names(nodes));
  }
  if (std::optional<std::string> type = job.OptStr("gpu_type"))
    line("gpu type", TerminalSafe(*type));
  if (std::optional<std::string> image = job.OptStr("image")) {
    std::vector<std::string> mounts;
    for (const Reply& m : job.ArrayOr("mounts")) mounts.push_back(TerminalSafe(m.AsStr()));
    std::vector<std::string> extras;
    if (!mounts.empty()) extras.push_back(fmt::format("mounts {}", fmt::join(mounts, ", ")));
    if (std::optional<uint64_t> shm = job.OptUInt("shm_size_bytes")) {
      extras.push_back(fmt::format("shm {}", FormatBytes(*shm)));
    }
    if (std::optional<std::string> dir = job.OptStr("container_workdir")) {
      extras.push_back(fmt::format("workdir {}", TerminalSafe(*dir)));
    }
    line("image", TerminalSafe(*image) +
                      (extras.empty() ? "" : fmt::format(" ({})", fmt::join(extras, "; "))));
  }
  if (std::vector<Reply> features = job.ArrayOr("constraints"); !features.empty()) {
    std::vector<std::string> shown;
    for (const Reply& r : features) shown.push_back(TerminalSafe(r.AsStr()));
    line("constraint", fmt::format("{}", fmt::join(shown, "&")));
  }
  if (int64_t max = job.OptInt("max_nodes").value_or(0); max > 0) {
    line("gang", fmt::format("{} to {} nodes (elastic), the GPUs above on each",
                             job.OptInt("num_nodes").value_or(1), max));
  } else if (int64_t n = job.OptInt("num_nodes").value_or(1); n > 1) {
    line("gang", fmt::format("{} nodes, the GPUs above on each", n));
  }
  if (std::optional<int64_t> group = job.OptInt("group")) {
    std::optional<int64_t> index = job.OptInt("array_index");
    line("group",
         fmt::format("{}{}", *group, index ? fmt::format(", array index {}", *index) : ""));
  }
  if (std::optional<int64_t> limit = job.OptInt("group_limit")) {
    line("group limit", fmt::format("at most {} of the group at once", *limit));
  }
  out += ShippingAndNoticeDetails(job);
  out += RecordDetails(job);
  for (const Reply& a : job.ArrayOr("attempts")) out += AttemptDetails(a, now_ms);
  return out;
}

std::string GpusTable(const Reply& doc) {
  std::vector<std::vector<std::string>> rows = {
      {"GPU", "NAME", "TOTAL", "USED", "RESERVED", "USABLE", "UTIL", "TRAINQ", "OTHERS"}};
  for (const Reply& g : doc.ArrayOr("gpus")) {
    std::vector<std::string> ours;
    for (const Reply& a : g.ArrayOr("attempts")) {
      int64_t job = a.Int("job");
      ours.push_back(fmt::format("{}.{}", job, a.Int("attempt")));
    }
    std::vector<std::string> others;
    for (const Reply& p : g.ArrayOr("other_processes")) {
      int64_t pid = p.Int("pid");
      others.push_back(fmt::format("pid {} ({})", pid, FormatBytes(p.UInt("used_bytes"))));
    }
    std::string util = g.Text("utilization");
    std::string closed = g.OptStr("closed").value_or("");
    rows.push_back({closed.empty() ? g.Text("index") : g.Text("index") + " (" + closed + ")",
                    g.Text("name"), Bytes(g, "memory_total"), Bytes(g, "memory_used"),
                    Bytes(g, "memory_reserved"), Bytes(g, "memory_usable"),
                    util == "-" ? "-" : util + "%",
                    ours.empty() ? "-" : fmt::format("{}", fmt::join(ours, " ")),
                    others.empty() ? "-" : fmt::format("{}", fmt::join(others, ", "))});
  }
  std::string out = RenderTable(rows);
  out += fmt::format("node {}: {} ({} of {} CPU slots used)\n", doc.Text("node"), doc.Text("probe"),
                     doc.Text("cpu_slots_used"), doc.Text("cpu_slots"));
  if (doc.BoolOr("paused", false)) {
    out += "paused: no job starts until trainq resume; running jobs go on\n";
  }
  if (std::optional<std::string> error = doc.OptStr("sample_error")) {
    int64_t age = doc.OptInt("sample_age_ms").value_or(0);
    out += fmt::format(
        "stale: GPU sampling fails ({}); the figures above are {} old, and no job starts on a "
        "GPU once they are {} old (gpu_stale_after)\n",
        *error, FormatDuration(age / 1000 * 1000),
        FormatDuration(doc.OptInt("stale_after_ms").value_or(0)));
  }
  return out;
}

namespace {

std::string ExplainGpus(const Reply& doc) {
  std::vector<std::vector<std::string>> rows = {{"GPU", "USABLE", "TOTAL", "JOBS", "FITS", "NOTE"}};
  std::vector<Reply> gpus = doc.ArrayOr("gpus");
  bool many_nodes = false;
  for (const Reply& g : gpus) many_nodes |= g.Text("node") != gpus[0].Text("node");
  for (const Reply& g : gpus) {
    std::string name = many_nodes ? g.Text("node") + "/" + g.Text("index") : g.Text("index");
    std::vector<Reply> job_ids = g.ArrayOr("jobs");
    std::string jobs = job_ids.empty() ? "" : JoinInts(job_ids);
    int64_t others = g.OptInt("other_processes").value_or(0);
    if (others > 0) jobs += fmt::format("{}+{} other", jobs.empty() ? "" : " ", others);
    std::string closed = g.OptStr("closed").value_or("");
    rows.push_back({name, Bytes(g, "memory_usable"), Bytes(g, "memory_total"),
                    jobs.empty() ? "-" : jobs, g.BoolOr("fits", false) ? "yes" : "no",
                    closed.empty() ? "-" : closed});
  }
  return RenderTable(rows);
}

}  // namespace

std::string ExplainReport(const Reply& doc) {
  std::string out = fmt::format("job {}: {}\n", doc.Text("job"), doc.Text("state"));
  out += fmt::format("reason: {}\n", doc.Text("reason"));
  // An elastic job's resizes, one line each.
  if (doc.Has("resizes")) {
    std::vector<Reply> list = doc.ArrayOr("resizes");
    out += list.empty() ? "resizes: none\n" : "resizes:\n";
    for (const Reply& r : list) {
      out += fmt::format("  attempt {}, {}: {}\n", r.Text("attempt"), r.OptStr("at").value_or("-"),
                         r.Text("what"));
    }
  }
  if (!doc.BoolOr("waiting", false)) return out;
  out += fmt::format("position: {} in line ({} ahead)\n", doc.Text("position"), doc.Text("ahead"));
  Reply fs = doc.Object("fair_share");
  std::string user = fs.OptStr("user").value_or("");
  out += fmt::format(
      "fair share: user {} holds {:.2f} decayed GPU-hours; rank {} of {} users "
      "waiting (fewest hours first)\n",
      user.empty() ? "-" : user, fs.OptNum("gpu_hours").value_or(0.0), fs.Text("rank"),
      fs.Text("users_waiting"));
  out += "GPUs:\n" + ExplainGpus(doc);
  std::vector<Reply> holds = doc.Array("holds");
  if (holds.empty()) {
    out += "held GPUs: none\n";
  } else {
    out += "held GPUs:\n";
    for (const Reply& h : holds) {
      out += fmt::format("  for job {}: node {} GPU {}{}\n", h.Text("job"), h.Text("node"),
                         JoinInts(h.ArrayOr("gpus")),
                         h.BoolOr("preempting", false) ? " (freed by a preemption)" : "");
    }
  }
  std::vector<Reply> candidates = doc.ArrayOr("preemption");
  if (candidates.empty()) return out + "preemption: no running job to consider\n";
  out += "preemption (running jobs as victims of this one):\n";
  for (const Reply& p : candidates) {
    out += fmt::format("  job {} ({}, priority {}): {}\n", p.Text("job"), p.Text("user"),
                       p.Text("priority"), p.Text("why"));
  }
  return out;
}

}  // namespace trainq
