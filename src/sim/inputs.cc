#include "src/sim/inputs.h"

#include <charconv>
#include <cmath>
#include <limits>
#include <map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace trainq::sim {

namespace {

// Collects problems; reports the first kMaxErrors and how many more there were.
class Errors {
 public:
  void Add(std::string message) {
    if (++count_ <= kMaxErrors) lines_.push_back(std::move(message));
  }
  bool empty() const { return count_ == 0; }
  Status ToStatus() const {
    std::string text = fmt::format("{}", fmt::join(lines_, "\n"));
    if (count_ > kMaxErrors) text += fmt::format("\n... and {} more", count_ - kMaxErrors);
    return Status::Invalid(text);
  }

 private:
  int count_ = 0;
  std::vector<std::string> lines_;
};

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

// One CSV line into fields; a field may be double-quoted ("" inside is a quote).
std::vector<std::string> SplitCsvLine(std::string_view line) {
  std::vector<std::string> fields(1);
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    char c = line[i];
    if (quoted && c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
      fields.back() += '"';
      ++i;
    } else if (c == '"') {
      quoted = !quoted;
    } else if (c == ',' && !quoted) {
      fields.emplace_back();
    } else {
      fields.back() += c;
    }
  }
  for (std::string& f : fields) f = std::string(Trim(f));
  return fields;
}

std::vector<std::string_view> Lines(std::string_view text) {
  std::vector<std::string_view> lines;
  while (!text.empty()) {
    size_t end = text.find('\n');
    lines.push_back(text.substr(0, end));
    if (end == std::string_view::npos) break;
    text.remove_prefix(end + 1);
  }
  return lines;
}

bool Blank(std::string_view line) { return Trim(line).empty(); }

std::optional<double> ToDouble(std::string_view s) {
  double v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size() || !std::isfinite(v))
    return std::nullopt;
  return v;
}

std::optional<int64_t> ToInt(std::string_view s) {
  int64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

// A CSV table: columns by name, rows with their 1-based line numbers.
struct Table {
  std::map<std::string, size_t, std::less<>> columns;
  std::vector<std::pair<int, std::vector<std::string>>> rows;

  const std::string* Field(const std::vector<std::string>& row, std::string_view name) const {
    auto it = columns.find(name);
    if (it == columns.end() || it->second >= row.size()) return nullptr;
    return &row[it->second];
  }
};

Result<Table> ReadTable(std::string_view text, std::string_view file,
                        std::initializer_list<std::string_view> required) {
  std::vector<std::string_view> lines = Lines(text);
  size_t header = 0;
  while (header < lines.size() && Blank(lines[header])) ++header;
  if (header == lines.size()) {
    return Status::Invalid(
        fmt::format("{}: empty; expected a CSV header line naming the columns "
                    "({})",
                    file, fmt::join(required, ", ")));
  }
  Table table;
  std::vector<std::string> names = SplitCsvLine(lines[header]);
  for (size_t i = 0; i < names.size(); ++i) table.columns.emplace(names[i], i);
  Errors errors;
  for (std::string_view name : required) {
    if (!table.columns.count(name)) {
      errors.Add(fmt::format("{}:{}: header: no column '{}'; the header must name {}", file,
                             header + 1, name, fmt::join(required, ", ")));
    }
  }
  if (!errors.empty()) return errors.ToStatus();
  for (size_t i = header + 1; i < lines.size(); ++i) {
    if (!Blank(lines[i])) table.rows.emplace_back(static_cast<int>(i + 1), SplitCsvLine(lines[i]));
  }
  return table;
}

// Reads one field of a row, reporting problems as "file:line: field: ...".
class RowReader {
 public:
  RowReader(const Table& t, const std::vector<std::string>& row, std::string_view file, int line,
            Errors& errors)
      : t_(t), row_(row), file_(file), line_(line), errors_(errors) {}

  // nullopt for an empty or absent field.
  std::optional<std::string> Text(std::string_view name) const {
    const std::string* f = t_.Field(row_, name);
    if (f == nullptr || f->empty()) return std::nullopt;
    return *f;
  }

  std::optional<double> Number(std::string_view name, double min, double max,
                               std::string_view form) {
    std::optional<std::string> s = Text(name);
    if (!s) return std::nullopt;
    std::optional<double> v = ToDouble(*s);
    if (!v || *v < min || *v > max) {
      Bad(name, *s, form);
      return std::nullopt;
    }
    return v;
  }

  std::optional<int64_t> Integer(std::string_view name, int64_t min, int64_t max,
                                 std::string_view form) {
    std::optional<std::string> s = Text(name);
    if (!s) return std::nullopt;
    std::optional<int64_t> v = ToInt(*s);
    if (!v || *v < min || *v > max) {
      Bad(name, *s, form);
      return std::nullopt;
    }
    return v;
  }

  void Missing(std::string_view name, std::string_view form) {
    errors_.Add(fmt::format("{}:{}: {}: empty; expected {}", file_, line_, name, form));
  }

  void Bad(std::string_view name, std::string_view value, std::string_view form) {
    errors_.Add(
        fmt::format("{}:{}: {}: '{}' is not valid; expected {}", file_, line_, name, value, form));
  }

 private:
  const Table& t_;
  const std::vector<std::string>& row_;
  std::string_view file_;
  int line_;
  Errors& errors_;
};

constexpr double kMaxSeconds = 1e12;  // ~31,700 years: far beyond any trace, safe in ms
constexpr std::string_view kSecondsForm = "seconds, a number >= 0 (e.g. 3600 or 12.5)";
constexpr std::string_view kGpusForm = "a whole number of GPUs from 0 to 100000";
constexpr std::string_view kFractionForm =
    "the share of each GPU, a number from 0 to 1 (0 only with gpus = 0, below 1 only with "
    "gpus <= 1)";
constexpr std::string_view kGibForm = "GiB, a number > 0 and <= 65536 (e.g. 16 or 79.6)";
constexpr std::string_view kMilliForm = "millicores, a whole number from 0 to 100000000";
constexpr std::string_view kMibForm = "MiB, a whole number from 0 to 1000000000";
constexpr std::string_view kWallForm = "a date and time like 2017-11-01 00:02:12";

int64_t ToMs(double seconds) { return static_cast<int64_t>(std::llround(seconds * 1000.0)); }

uint64_t GibBytes(double gib) { return static_cast<uint64_t>(std::llround(gib * double(kGiB))); }

void ReadFraction(RowReader& r, TraceJob& job) {
  std::optional<double> fraction = r.Number("gpu_fraction", 0.0, 1.0, kFractionForm);
  if (!fraction) {
    if (!r.Text("gpu_fraction")) r.Missing("gpu_fraction", kFractionForm);
    return;
  }
  int milli = static_cast<int>(std::lround(*fraction * 1000.0));
  if (job.gpus == 0) {
    job.gpu_milli = 0;
    return;
  }
  if (milli <= 0 || (milli < 1000 && job.gpus > 1)) {
    r.Bad("gpu_fraction", *r.Text("gpu_fraction"), kFractionForm);
    return;
  }
  job.gpu_milli = milli;
}

TraceJob ReadJob(RowReader& r) {
  TraceJob job;
  job.id = r.Text("job_id").value_or("");
  if (job.id.empty()) r.Missing("job_id", "a job name");
  std::optional<double> submit = r.Number("submit_s", 0, kMaxSeconds, kSecondsForm);
  if (!submit && !r.Text("submit_s")) r.Missing("submit_s", kSecondsForm);
  job.submit_ms = ToMs(submit.value_or(0));
  if (auto d = r.Number("duration_s", 0, kMaxSeconds, kSecondsForm)) job.duration_ms = ToMs(*d);
  std::optional<int64_t> gpus = r.Integer("gpus", 0, 100000, kGpusForm);
  if (!gpus && !r.Text("gpus")) r.Missing("gpus", kGpusForm);
  job.gpus = static_cast<int>(gpus.value_or(0));
  ReadFraction(r, job);
  if (auto gib = r.Number("gpu_mem_gib", 1e-6, 65536, kGibForm)) job.gpu_mem_bytes = GibBytes(*gib);
  job.user = r.Text("user").value_or(r.Text("vc").value_or(""));
  if (auto cpu = r.Integer("cpu_milli", 0, 100'000'000, kMilliForm)) job.cpu_milli = int(*cpu);
  if (auto mib = r.Integer("memory_mib", 0, 1'000'000'000, kMibForm))
    job.host_mem_bytes = uint64_t(*mib) * kMiB;
  if (std::optional<std::string> when = r.Text("submit_time")) {
    job.submit_wall_ms = ParseWallTimeMs(*when);
    if (!job.submit_wall_ms) r.Bad("submit_time", *when, kWallForm);
  }
  return job;
}

// Decisions name nodes, so a name must mean one node.
Status CheckUniqueNames(const std::vector<NodeSpec>& nodes, std::string_view file) {
  std::map<std::string_view, size_t> seen;
  Errors errors;
  for (size_t i = 0; i < nodes.size(); ++i) {
    auto [it, fresh] = seen.emplace(nodes[i].name, i);
    if (!fresh) {
      errors.Add(
          fmt::format("{}: node '{}' appears more than once (nodes {} and {}); names must "
                      "be unique",
                      file, nodes[i].name, it->second + 1, i + 1));
    }
  }
  return errors.empty() ? Status::Ok() : errors.ToStatus();
}

Result<double> CheckDefaultGib(double gib) {
  if (!(gib > 0 && gib <= 65536)) {
    return Status::Invalid(fmt::format("default GPU memory: {} GiB; expected {}", gib, kGibForm));
  }
  return gib;
}

// Days from 1970-01-01 to y-m-d in the proleptic Gregorian calendar (H. Hinnant's
// days_from_civil).
int64_t DaysFromCivil(int64_t y, int64_t m, int64_t d) {
  y -= m <= 2 ? 1 : 0;
  int64_t era = (y >= 0 ? y : y - 399) / 400;
  int64_t yoe = y - era * 400;
  int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

int DaysInMonth(int64_t y, int64_t m) {
  static constexpr int kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
  return m == 2 && leap ? 29 : kDays[m - 1];
}

// A fixed-width run of digits at `pos`, followed by `sep` unless it is '\0'.
std::optional<int64_t> Digits(std::string_view s, size_t pos, size_t width, char sep) {
  if (pos + width > s.size()) return std::nullopt;
  if (sep != '\0' && (pos + width >= s.size() || s[pos + width] != sep)) return std::nullopt;
  int64_t v = 0;
  for (size_t i = pos; i < pos + width; ++i) {
    if (s[i] < '0' || s[i] > '9') return std::nullopt;
    v = v * 10 + (s[i] - '0');
  }
  return v;
}

}  // namespace

std::optional<int64_t> ParseWallTimeMs(std::string_view text) {
  text = Trim(text);
  std::optional<int64_t> y = Digits(text, 0, 4, '-'), mo = Digits(text, 5, 2, '-');
  std::optional<int64_t> d = Digits(text, 8, 2, '\0');
  if (!y || !mo || !d || *mo < 1 || *mo > 12 || *d < 1 || *d > DaysInMonth(*y, *mo))
    return std::nullopt;
  int64_t h = 0, mi = 0, sec = 0;
  if (text.size() > 10) {
    if (text[10] != ' ' && text[10] != 'T') return std::nullopt;
    std::optional<int64_t> hh = Digits(text, 11, 2, ':'), mm = Digits(text, 14, 2, '\0');
    if (!hh || !mm || *hh > 23 || *mm > 59) return std::nullopt;
    h = *hh, mi = *mm;
    if (text.size() > 16) {
      std::optional<int64_t> ss = Digits(text, 17, 2, '\0');
      if (text[16] != ':' || !ss || *ss > 59 || text.size() != 19) return std::nullopt;
      sec = *ss;
    }
  } else if (text.size() != 10) {
    return std::nullopt;
  }
  return ((DaysFromCivil(*y, *mo, *d) * 24 + h) * 60 + mi) * 60000 + sec * 1000;
}

Result<std::vector<TraceJob>> ParseTrace(std::string_view text, std::string_view file) {
  Result<Table> table =
      ReadTable(text, file, {"job_id", "submit_s", "duration_s", "gpus", "gpu_fraction"});
  if (!table.ok()) return table.status();
  Errors errors;
  std::vector<TraceJob> jobs;
  jobs.reserve(table->rows.size());
  for (const auto& [line, row] : table->rows) {
    RowReader r(*table, row, file, line, errors);
    jobs.push_back(ReadJob(r));
  }
  if (!errors.empty()) return errors.ToStatus();
  return jobs;
}

Result<std::vector<NodeSpec>> ParseNodesCsv(std::string_view text, std::string_view file,
                                            double default_gpu_mem_gib) {
  Result<double> default_gib = CheckDefaultGib(default_gpu_mem_gib);
  if (!default_gib.ok()) return default_gib.status();
  Result<Table> table = ReadTable(text, file, {"node_id", "gpus"});
  if (!table.ok()) return table.status();
  Errors errors;
  std::vector<NodeSpec> nodes;
  for (const auto& [line, row] : table->rows) {
    RowReader r(*table, row, file, line, errors);
    NodeSpec node;
    node.name = r.Text("node_id").value_or("");
    if (node.name.empty()) r.Missing("node_id", "a node name");
    std::optional<int64_t> gpus =
        r.Integer("gpus", 0, 1024, "a whole number of GPUs from 0 to 1024");
    if (!gpus && !r.Text("gpus")) r.Missing("gpus", "a whole number of GPUs from 0 to 1024");
    node.gpus = static_cast<int>(gpus.value_or(0));
    node.gpu_mem_bytes =
        GibBytes(r.Number("gpu_mem_gib", 1e-6, 65536, kGibForm).value_or(*default_gib));
    node.cpu_milli =
        static_cast<int>(r.Integer("cpu_milli", 0, 100'000'000, kMilliForm).value_or(0));
    node.host_mem_bytes =
        uint64_t(r.Integer("memory_mib", 0, 1'000'000'000, kMibForm).value_or(0)) * kMiB;
    nodes.push_back(std::move(node));
  }
  if (!errors.empty()) return errors.ToStatus();
  if (nodes.empty())
    return Status::Invalid(fmt::format("{}: no nodes; expected one row per node", file));
  TRAINQ_RETURN_IF_ERROR(CheckUniqueNames(nodes, file));
  return nodes;
}

namespace {

constexpr std::string_view kJsonForm =
    R"({"nodes": [{"name": "a", "gpus": 8, "gpu_mem_gib": 32, "cpu_milli": 96000, )"
    R"("memory_mib": 786432, "count": 4}]} (only name and gpus are required))";

// A whole number in [min, max] at `key`, or `fallback` when the key is absent.
std::optional<int64_t> JsonInt(const nlohmann::json& j, const char* key, int64_t min, int64_t max,
                               int64_t fallback) {
  if (!j.contains(key)) return fallback;
  const nlohmann::json& v = j[key];
  if (!v.is_number_integer()) return std::nullopt;
  int64_t n =
      v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(max) ? max + 1 : v.get<int64_t>();
  if (n < min || n > max) return std::nullopt;
  return n;
}

std::optional<NodeSpec> JsonNode(const nlohmann::json& j, double default_gib, int64_t& count) {
  if (!j.is_object() || !j.contains("name") || !j["name"].is_string()) return std::nullopt;
  NodeSpec node;
  node.name = j["name"].get<std::string>();
  std::optional<int64_t> gpus = j.contains("gpus") ? JsonInt(j, "gpus", 0, 1024, 0) : std::nullopt;
  std::optional<int64_t> cpu = JsonInt(j, "cpu_milli", 0, 100'000'000, 0);
  std::optional<int64_t> mib = JsonInt(j, "memory_mib", 0, 1'000'000'000, 0);
  std::optional<int64_t> n = JsonInt(j, "count", 1, 100000, 1);
  double gib = default_gib;
  if (j.contains("gpu_mem_gib")) {
    const nlohmann::json& g = j["gpu_mem_gib"];
    if (!g.is_number() || !(g.get<double>() > 0 && g.get<double>() <= 65536)) return std::nullopt;
    gib = g.get<double>();
  }
  if (node.name.empty() || !gpus || !cpu || !mib || !n) return std::nullopt;
  node.gpus = static_cast<int>(*gpus);
  node.gpu_mem_bytes = GibBytes(gib);
  node.cpu_milli = static_cast<int>(*cpu);
  node.host_mem_bytes = uint64_t(*mib) * kMiB;
  count = *n;
  return node;
}

}  // namespace

Result<std::vector<NodeSpec>> ParseNodesJson(std::string_view text, std::string_view file,
                                             double default_gpu_mem_gib) {
  Result<double> default_gib = CheckDefaultGib(default_gpu_mem_gib);
  if (!default_gib.ok()) return default_gib.status();
  nlohmann::json doc = nlohmann::json::parse(text, nullptr, false);
  if (doc.is_discarded() || !doc.is_object() || !doc.contains("nodes") ||
      !doc["nodes"].is_array()) {
    return Status::Invalid(fmt::format("{}: not a node list; expected {}", file, kJsonForm));
  }
  Errors errors;
  std::vector<NodeSpec> nodes;
  const nlohmann::json& list = doc["nodes"];
  for (size_t i = 0; i < list.size(); ++i) {
    int64_t count = 1;
    std::optional<NodeSpec> node = JsonNode(list[i], *default_gib, count);
    if (!node) {
      errors.Add(fmt::format("{}: nodes[{}]: not a valid node; expected {}", file, i, kJsonForm));
      continue;
    }
    if (nodes.size() + size_t(count) > 1'000'000) {
      errors.Add(fmt::format("{}: nodes[{}]: count: more than 1000000 nodes in all", file, i));
      break;
    }
    bool one = !list[i].contains("count");
    for (int64_t k = 0; k < count; ++k) {
      nodes.push_back(*node);
      if (!one) nodes.back().name = fmt::format("{}-{}", node->name, k);
    }
  }
  if (!errors.empty()) return errors.ToStatus();
  if (nodes.empty())
    return Status::Invalid(fmt::format("{}: no nodes; expected {}", file, kJsonForm));
  TRAINQ_RETURN_IF_ERROR(CheckUniqueNames(nodes, file));
  return nodes;
}

namespace {

constexpr std::string_view kShorthandForm =
    "NODESxGPUS[:MEM] groups joined by '+', e.g. 8x8:32GiB or 4x8:80GiB+2x4 (MEM in GiB)";

std::optional<std::pair<int64_t, int64_t>> GroupCounts(std::string_view counts) {
  size_t x = counts.find('x');
  if (x == std::string_view::npos) return std::nullopt;
  std::optional<int64_t> n = ToInt(counts.substr(0, x));
  std::optional<int64_t> g = ToInt(counts.substr(x + 1));
  if (!n || !g || *n < 1 || *n > 100000 || *g < 0 || *g > 1024) return std::nullopt;
  return std::pair(*n, *g);
}

std::optional<double> GroupGib(std::string_view mem) {
  for (std::string_view unit : {"GiB", "G"}) {
    if (mem.size() > unit.size() && mem.ends_with(unit)) {
      mem.remove_suffix(unit.size());
      break;
    }
  }
  std::optional<double> gib = ToDouble(mem);
  if (!gib || !(*gib > 0 && *gib <= 65536)) return std::nullopt;
  return gib;
}

}  // namespace

bool LooksLikeShorthand(std::string_view text) {
  return !text.empty() && text.find('/') == std::string_view::npos &&
         text.find('.') == std::string_view::npos && text.find('x') != std::string_view::npos &&
         text.front() >= '0' && text.front() <= '9';
}

Result<std::vector<NodeSpec>> ParseNodesShorthand(std::string_view text,
                                                  double default_gpu_mem_gib) {
  Result<double> default_gib = CheckDefaultGib(default_gpu_mem_gib);
  if (!default_gib.ok()) return default_gib.status();
  std::vector<NodeSpec> nodes;
  std::string_view rest = text;
  while (true) {
    size_t plus = rest.find('+');
    std::string_view group = rest.substr(0, plus);
    size_t colon = group.find(':');
    auto counts = GroupCounts(group.substr(0, colon));
    std::optional<double> gib = *default_gib;
    if (colon != std::string_view::npos) gib = GroupGib(group.substr(colon + 1));
    if (!counts || !gib || nodes.size() + size_t(counts->first) > 1'000'000) {
      return Status::Invalid(
          fmt::format("--nodes: '{}' is not valid; expected {}", text, kShorthandForm));
    }
    for (int64_t i = 0; i < counts->first; ++i) {
      nodes.push_back(
          {fmt::format("n{}", nodes.size()), int(counts->second), GibBytes(*gib), 0, 0});
    }
    if (plus == std::string_view::npos) break;
    rest.remove_prefix(plus + 1);
  }
  return nodes;
}

Result<std::vector<uint64_t>> ParseSeeds(std::string_view text) {
  constexpr std::string_view kForm = "a seed, a range or a list, e.g. 42, 42-51 or 1,5,9";
  std::vector<uint64_t> seeds;
  for (std::string_view rest = text;;) {
    size_t comma = rest.find(',');
    std::string_view part = Trim(rest.substr(0, comma));
    size_t dash = part.find('-');
    std::optional<int64_t> lo = ToInt(part.substr(0, dash));
    std::optional<int64_t> hi = dash == std::string_view::npos ? lo : ToInt(part.substr(dash + 1));
    if (!lo || !hi || *lo < 0 || *hi < *lo || *hi - *lo >= 10000 || seeds.size() > 10000) {
      return Status::Invalid(fmt::format("--seeds: '{}' is not valid; expected {}", text, kForm));
    }
    for (int64_t s = *lo; s <= *hi; ++s) seeds.push_back(uint64_t(s));
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  return seeds;
}

}  // namespace trainq::sim
