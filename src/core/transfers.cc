#include "src/core/transfers.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace trainq {

using json = nlohmann::json;

namespace {

// `path` with "." and ".." parts resolved by name and no doubled or trailing '/'.
std::string Normalized(std::string_view path) {
  std::vector<std::string_view> parts;
  for (size_t start = 0; start <= path.size();) {
    size_t end = std::min(path.find('/', start), path.size());
    std::string_view part = path.substr(start, end - start);
    start = end + 1;
    if (part.empty() || part == ".") continue;
    if (part == "..") {
      if (!parts.empty()) parts.pop_back();
      continue;
    }
    parts.push_back(part);
  }
  std::string out;
  for (std::string_view p : parts) {
    out += '/';
    out += p;
  }
  return out.empty() ? "/" : out;
}

bool IsHex64(std::string_view s) {
  if (s.size() != 64) return false;
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

bool CleanPath(std::string_view p) {
  return !p.empty() && p.find('\0') == std::string_view::npos &&
         p.find(':') == std::string_view::npos;
}

}  // namespace

Result<StageArg> ParseStage(std::string_view text, const std::string& cwd, std::string_view field) {
  auto bad = [&](std::string_view why) {
    return Status::Invalid(fmt::format("{}: '{}' {}; expected {}", field, text, why, kStageForm));
  };
  size_t colon = text.find(':');
  std::string_view src = text.substr(0, colon);
  std::string_view dst = colon == std::string_view::npos ? "" : text.substr(colon + 1);
  if (src.empty()) return bad("has no SRC");
  if (colon != std::string_view::npos && dst.empty()) return bad("has an empty DST");
  if (dst.find(':') != std::string_view::npos) return bad("holds more than one ':'");
  if (text.find('\0') != std::string_view::npos) return bad("holds a NUL byte");
  StageArg out;
  out.src = Normalized(src.front() == '/' ? std::string(src) : cwd + "/" + std::string(src));
  if (out.src == "/") return bad("names the root directory");
  if (!dst.empty()) {
    out.dst = std::string(dst);
  } else if (std::string base = Normalized(cwd) + "/"; out.src.starts_with(base)) {
    out.dst = out.src.substr(base.size());
  } else {
    out.dst = out.src.substr(out.src.rfind('/') + 1);
  }
  if (Normalized(out.dst.front() == '/' ? out.dst : "/x/" + out.dst) == "/") {
    return bad("has a DST that names the root directory");
  }
  return out;
}

std::string_view TransferKindName(TransferKind kind) {
  switch (kind) {
    case TransferKind::kTree:
      return "tree";
    case TransferKind::kLink:
      return "link";
    case TransferKind::kStage:
      return "stage";
  }
  return "stage";
}

bool TransferKindFromName(std::string_view name, TransferKind* kind) {
  for (TransferKind k : {TransferKind::kTree, TransferKind::kLink, TransferKind::kStage}) {
    if (name == TransferKindName(k)) {
      *kind = k;
      return true;
    }
  }
  return false;
}

void CheckTransfers(const JobSpec& spec, std::vector<FieldError>& out) {
  if (spec.transfers.empty()) return;
  if (spec.transfers.size() > kMaxTransfers) {
    out.push_back({"--stage", fmt::format("{} transfers; at most {} --stage", spec.transfers.size(),
                                          kMaxStages)});
    return;
  }
  int trees = 0, links = 0;
  for (size_t i = 0; i < spec.transfers.size(); ++i) {
    const Transfer& t = spec.transfers[i];
    std::string what = fmt::format("transfers[{}]", i);
    trees += t.kind == TransferKind::kTree;
    links += t.kind == TransferKind::kLink;
    if (!CleanPath(t.src) || t.src.front() != '/') {
      out.push_back({what, fmt::format("src '{}' is not an absolute path without ':'", t.src)});
    }
    if (t.kind == TransferKind::kTree ? !t.dst.empty() : !CleanPath(t.dst)) {
      out.push_back({what, fmt::format("dst '{}': a tree has none; a stage or link has a path "
                                       "without ':'",
                                       t.dst)});
    }
    if (!IsHex64(t.manifest)) {
      out.push_back({what, "manifest is not a SHA-256 (64 lowercase hex digits)"});
    }
    if (!CleanPath(t.manifest_path) || t.manifest_path.front() != '/') {
      out.push_back({what, "manifest_path is not an absolute path without ':'"});
    }
  }
  if (trees > 1) out.push_back({"transfers", "more than one snapshot tree"});
  if (links > 0 && trees == 0) out.push_back({"transfers", "links without a snapshot tree"});
}

std::string TransfersToText(const std::vector<Transfer>& transfers) {
  if (transfers.empty()) return "";
  json doc = json::array();
  for (const Transfer& t : transfers) {
    doc.push_back({{"kind", TransferKindName(t.kind)},
                   {"src", t.src},
                   {"dst", t.dst},
                   {"manifest", t.manifest},
                   {"manifest_path", t.manifest_path},
                   {"bytes", t.bytes},
                   {"files", t.files}});
  }
  return doc.dump();
}

Result<std::vector<Transfer>> ParseTransfers(std::string_view text, std::string_view field) {
  std::vector<Transfer> out;
  json doc = json::parse(text, nullptr, false);
  if (!doc.is_array()) return Status::Invalid(fmt::format("{}: expected an array", field));
  for (size_t i = 0; i < doc.size(); ++i) {
    const json& v = doc[i];
    auto bad = [&](std::string_view key, std::string_view expected) {
      return Status::Invalid(fmt::format("{}[{}].{}: expected {}", field, i, key, expected));
    };
    Transfer t;
    if (!v.is_object()) return bad("", "an object");
    for (auto [key, value] :
         {std::pair{"src", &t.src}, std::pair{"dst", &t.dst}, std::pair{"manifest", &t.manifest},
          std::pair{"manifest_path", &t.manifest_path}}) {
      if (!v.contains(key) || !v[key].is_string()) return bad(key, "a string");
      *value = v[key].get<std::string>();
    }
    for (auto [key, value] : {std::pair{"bytes", &t.bytes}, std::pair{"files", &t.files}}) {
      if (!v.contains(key) || !v[key].is_number_unsigned()) return bad(key, "a count");
      *value = v[key].get<uint64_t>();
    }
    if (!v.contains("kind") || !v["kind"].is_string() ||
        !TransferKindFromName(v["kind"].get<std::string>(), &t.kind)) {
      return bad("kind", "\"tree\", \"link\" or \"stage\"");
    }
    out.push_back(std::move(t));
  }
  return out;
}

Result<std::vector<Transfer>> TransfersFromText(std::string_view text) {
  if (text.empty()) return std::vector<Transfer>{};
  Result<std::vector<Transfer>> out = ParseTransfers(text, "transfers");
  if (!out.ok()) {
    return Status::Internal(
        fmt::format("stored transfers are not what trainq writes ({})", out.status().message()));
  }
  return out;
}

void CheckCollect(const JobSpec& spec, std::vector<FieldError>& out) {
  if (spec.collect.size() > kMaxCollect) {
    out.push_back(
        {"--collect", fmt::format("{} patterns; at most {}", spec.collect.size(), kMaxCollect)});
  }
  for (const std::string& g : spec.collect) {
    bool up = g == ".." || g.starts_with("../") || g.find("/../") != std::string::npos ||
              g.ends_with("/..");
    if (g.empty() || g.front() == '/' || up || g.find('\0') != std::string::npos) {
      out.push_back({"--collect", fmt::format("'{}' is not a pattern of paths below the job's "
                                              "directory, like checkpoints/*.pt or metrics.json",
                                              g)});
      break;
    }
  }
  if (!spec.collect_to.empty() &&
      (spec.collect_to.front() != '/' || spec.collect_to.find('\0') != std::string::npos)) {
    out.push_back({"--collect-to", fmt::format("'{}' is not an absolute path", spec.collect_to)});
  } else if (!spec.collect_to.empty() && spec.collect.empty()) {
    out.push_back({"--collect-to", "says where --collect copies to; give --collect PATTERN"});
  }
}

std::string CollectToText(const JobSpec& spec) {
  if (spec.collect.empty()) return "";
  return json{{"globs", spec.collect}, {"to", spec.collect_to}}.dump();
}

Status CollectFromText(std::string_view text, JobSpec& spec) {
  spec.collect.clear();
  spec.collect_to.clear();
  if (text.empty()) return Status::Ok();
  json doc = json::parse(text, nullptr, false);
  if (!doc.is_object() || !doc.contains("globs") || !doc["globs"].is_array() ||
      !doc.contains("to") || !doc["to"].is_string()) {
    return Status::Internal(
        fmt::format("stored collect is not what trainq writes: {}", text.substr(0, 80)));
  }
  for (const json& g : doc["globs"]) {
    if (!g.is_string()) return Status::Internal("stored collect holds a pattern that is no text");
    spec.collect.push_back(g.get<std::string>());
  }
  spec.collect_to = doc["to"].get<std::string>();
  return Status::Ok();
}

std::string TransferDestination(const Transfer& t, const std::string& cwd) {
  return Normalized(t.dst.starts_with("/") ? t.dst : cwd + "/" + t.dst);
}

}  // namespace trainq
