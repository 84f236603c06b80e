#include "src/core/stop_spec.h"

#include <csignal>
#include <cstring>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "src/core/words.h"

namespace trainq {

using json = nlohmann::json;

namespace {

constexpr std::string_view kForm =
    "expected [B:]SIG[@SECONDS]: SIG a signal name (USR1, SIGUSR1, TERM) or number 1-31, "
    "SECONDS 0-65535 before the end (60 when left out), B: to signal only the batch shell";

bool Digits(std::string_view s) {
  if (s.empty() || s.size() > 9) return false;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

int SignalByName(std::string_view name) {
  std::string upper;
  for (char c : name) upper += static_cast<char>(c >= 'a' && c <= 'z' ? c - 'a' + 'A' : c);
  std::string_view n = upper;
  if (n.starts_with("SIG")) n.remove_prefix(3);
  for (int sig = 1; sig < 32; ++sig) {
    const char* abbrev = sigabbrev_np(sig);
    if (abbrev != nullptr && n == abbrev) return sig;
  }
  return 0;
}

}  // namespace

Result<SignalOption> ParseSignalOption(std::string_view text, std::string_view field) {
  auto bad = [&](std::string_view why) {
    return Status::Invalid(
        fmt::format("{}: '{}' {}; {}", field, TerminalSafe(text.substr(0, 64)), why, kForm));
  };
  SignalOption out;
  std::string_view rest = text;
  if (rest.starts_with("B:") || rest.starts_with("b:")) {
    out.batch_only = true;
    rest.remove_prefix(2);
  } else if (rest.size() > 1 && rest[1] == ':') {
    return bad("has a prefix trainq does not take (R: signals at a reservation's end)");
  }
  size_t at = rest.find('@');
  std::string_view sig = rest.substr(0, at);
  if (at != std::string_view::npos) {
    std::string_view secs = rest.substr(at + 1);
    if (!Digits(secs) || std::stoll(std::string(secs)) > kMaxSignalLeadSeconds) {
      return bad("has no lead of 0 to 65535 seconds after @");
    }
    out.lead_ms = std::stoll(std::string(secs)) * 1000;
  }
  if (sig.empty()) return bad("names no signal");
  if (Digits(sig)) {
    long long n = std::stoll(std::string(sig));
    out.signal = n >= 1 && n <= 31 ? static_cast<int>(n) : 0;
  } else {
    out.signal = SignalByName(sig);
  }
  if (out.signal == 0) return bad("is not a signal");
  if (out.signal == SIGKILL || out.signal == SIGSTOP) {
    return bad(fmt::format("names SIG{}, which no program can catch to save its work",
                           sigabbrev_np(out.signal)));
  }
  return out;
}

std::string ShortSignalName(int sig) {
  const char* abbrev = sig > 0 ? sigabbrev_np(sig) : nullptr;
  return abbrev ? std::string(abbrev) : fmt::format("signal {}", sig);
}

std::string FormatSignalOption(const StopSpec& stop) {
  if (stop.signal == 0) return "";
  return fmt::format("{}{}@{}", stop.batch_only ? "B:" : "", ShortSignalName(stop.signal),
                     stop.lead_ms / 1000);
}

std::string StopToText(const StopSpec& stop) {
  if (stop == StopSpec{}) return "";
  return json{{"signal", stop.signal},
              {"lead_ms", stop.lead_ms},
              {"batch_only", stop.batch_only},
              {"requeue", stop.requeue},
              {"preemptible", stop.preemptible ? json(*stop.preemptible) : json(nullptr)},
              {"checkpoint", stop.checkpoint}}
      .dump();
}

Status StopFromText(std::string_view text, StopSpec& stop) {
  stop = StopSpec{};
  if (text.empty()) return Status::Ok();
  json doc = json::parse(text, nullptr, false);
  auto bad = [&] {
    return Status::Internal(
        fmt::format("stored stop is not what trainq writes: {}", TerminalSafe(text.substr(0, 80))));
  };
  if (!doc.is_object()) return bad();
  try {
    stop.signal = doc.at("signal").get<int>();
    stop.lead_ms = doc.at("lead_ms").get<int64_t>();
    stop.batch_only = doc.at("batch_only").get<bool>();
    stop.requeue = doc.at("requeue").get<bool>();
    const json& p = doc.at("preemptible");
    if (!p.is_null()) stop.preemptible = p.get<bool>();
    stop.checkpoint = doc.at("checkpoint").get<std::string>();
  } catch (const json::exception&) {
    return bad();
  }
  return Status::Ok();
}

std::string CheckpointGlobProblem(std::string_view glob) {
  auto bad = [&](std::string_view why) {
    return fmt::format(
        "'{}' {}; expected a glob(3) pattern relative to the job's directory, such as "
        "'checkpoints/*.ckpt'",
        TerminalSafe(glob.substr(0, 64)), why);
  };
  if (glob.empty()) return bad("is empty");
  if (glob.size() > 1024) return bad("is longer than 1024 bytes");
  if (glob.starts_with("/")) return bad("is absolute");
  if (glob.find('\0') != std::string_view::npos) return bad("holds a NUL byte");
  for (size_t start = 0; start <= glob.size();) {
    size_t end = std::min(glob.find('/', start), glob.size());
    if (glob.substr(start, end - start) == "..") return bad("leaves the job's directory (..)");
    start = end + 1;
  }
  return "";
}

}  // namespace trainq
