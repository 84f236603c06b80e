#include "src/daemon/cluster_key.h"

#include <cctype>
#include <charconv>

#include <fmt/format.h>

#include "src/core/auth.h"
#include "src/core/job_field_text.h"
#include "src/core/stop_spec.h"
#include "src/core/transfers.h"
#include "src/os/crypto/token_crypto.h"
#include "src/os/fd.h"
#include "src/os/permissions.h"
#include "src/os/run_dir.h"
#include "src/os/system.h"
#include "src/store/store.h"

namespace trainq {

namespace {

// Each field as its length, ':' and its bytes: unambiguous whatever the bytes are.
void Field(std::string& out, std::string_view text) {
  out += std::to_string(text.size());
  out += ':';
  out += text;
}

constexpr std::string_view kMakeOne = "trainqd --new-cluster-key FILE";

}  // namespace

std::string SignedJobText(const JobSpec& spec, const std::string& node) {
  std::string out = "trainq job v2\n";
  Field(out, node);
  // Every row kJobFields signs, named, in table order: a field added to the table is signed
  // unless its row says why not.
  ForEachJobField([&](const auto& field) {
    if (!field.info.signed_ || field.info.codec == FieldCodec::kInCollect) return;
    Field(out, field.info.name);
    std::optional<std::string> text = FieldText(field, spec);
    if (text) {
      Field(out, *text);
    } else {
      out += '~';  // unset; no length starts with '~'
    }
  });
  return out;
}

std::string SignedJobTextV1(const JobSpec& spec, const std::string& node) {
  std::string out = "trainq job v1\n";
  Field(out, node);
  Field(out, spec.user);
  out += std::to_string(spec.command.size()) + "\n";
  for (const std::string& arg : spec.command) Field(out, arg);
  out += std::to_string(spec.env.size()) + "\n";
  for (const auto& [name, value] : spec.env) {
    Field(out, name);
    Field(out, value);
  }
  Field(out, spec.cwd);
  Field(out, spec.notify_url);
  Field(out, spec.mail);
  Field(out, spec.slurm_env ? "1" : "0");
  Field(out, std::to_string(spec.gate_pid));
  Field(out, std::to_string(spec.gate_ticks));
  // Host limits: removing them in Redis would let a job take the whole machine.
  Field(out, std::to_string(spec.mem_limit_bytes));
  Field(out, std::to_string(spec.max_procs));
  // What is shipped to a node and from where: a node reads the sources named here for its
  // peers. Absent from a job without any, so older signatures hold.
  if (!spec.transfers.empty()) Field(out, TransfersToText(spec.transfers));
  // Where outputs are copied, as the job's user, on the node that stored it.
  if (!spec.collect.empty()) Field(out, CollectToText(spec));
  // The signal a node sends the job's processes, and the glob its shim reads in the job's
  // directory.
  if (spec.stop != StopSpec{}) Field(out, StopToText(spec.stop));
  return out;
}

std::string CanonicalTarget(const std::string& path,
                            const std::map<std::string, std::string>& query) {
  std::string out = path;
  char sep = '?';
  for (const auto& [key, value] : query) {
    out += sep;
    out += key;
    out += '=';
    out += value;
    sep = '&';
  }
  return out;
}

Result<ClusterKey> ClusterKey::Load(const std::string& path, std::string_view option) {
  Result<UniqueFd> fd = OpenToRead(path, /*follow_links=*/false);
  if (!fd.ok()) {
    return Status::Invalid(fmt::format(
        "{}: cannot read {} ({}); every node of a cluster needs the same key: make one with "
        "'{}' on one node and copy it to the others (docs/cluster.md)",
        option, path, fd.status().message(), kMakeOne));
  }
  PathFacts st = FdFacts(fd->get());
  if (!st.exists) return Status::Io(fmt::format("stat {}: cannot read what it is", path));
  if (st.uid != EffectiveUid() || (st.mode & 077) != 0) {
    return Status::Invalid(fmt::format(
        "{}: {} must be owned by uid {} and readable by no one else (mode 0600); it is uid {} "
        "mode {:04o}",
        option, path, EffectiveUid(), st.uid, st.mode & 07777));
  }
  std::string secret(4096, '\0');
  Result<size_t> n = ReadSome(fd->get(), secret);
  if (!n.ok()) return n.status();
  secret.resize(*n);
  while (!secret.empty() && std::isspace(static_cast<unsigned char>(secret.back()))) {
    secret.pop_back();
  }
  if (secret.size() < kMinBytes) {
    return Status::Invalid(
        fmt::format("{}: {} holds {} bytes; a cluster key has at least {} (make one with '{}')",
                    option, path, secret.size(), kMinBytes, kMakeOne));
  }
  return ClusterKey(std::move(secret));
}

Status ClusterKey::Create(const std::string& path) {
  Result<std::string> hex = RandomHex(32);
  if (!hex.ok()) return hex.status();
  Status st = CreateNewFile(path, *hex + "\n");
  if (st.code() == Code::kConflict) {
    return Status::Conflict(fmt::format(
        "{} exists; a cluster key is made once and copied to every node (remove it first "
        "to make a new one, then copy the new one to every node)",
        path));
  }
  return st;
}

void ClusterKey::Sign(JobSpec& spec, const std::string& node) const {
  spec.signed_by = node;
  spec.signature = HmacSha256Hex(secret_, SignedJobText(spec, node));
}

Status ClusterKey::Verify(JobId id, const JobSpec& spec) const {
  if (spec.signature.empty()) {
    return Status::Permission(fmt::format(
        "job {}: its record in the store carries no signature of a trainq node; refused to run "
        "it (was it written into Redis by something other than trainq?)",
        id));
  }
  // A job an earlier trainq signed (v1) still runs after an upgrade, unless it names a
  // container image: v1 did not cover the container, so Redis could have added one.
  bool v1 =
      !spec.container.on() &&
      SameDigest(spec.signature, HmacSha256Hex(secret_, SignedJobTextV1(spec, spec.signed_by)));
  if (!v1 &&
      !SameDigest(spec.signature, HmacSha256Hex(secret_, SignedJobText(spec, spec.signed_by)))) {
    return Status::Permission(fmt::format(
        "job {}: its record in the store does not match the signature node '{}' made when it "
        "was submitted (its user, command, environment or cwd were changed in the store, or "
        "that node has another cluster key); refused to run it",
        id, spec.signed_by));
  }
  return Status::Ok();
}

namespace {

std::string SignedTokenText(const TokenRecord& t) {
  std::string out = "trainq token v1\n";
  Field(out, t.name);
  Field(out, t.hash);
  Field(out, RoleName(t.role));
  Field(out, t.user);
  Field(out, std::to_string(t.created_at));
  Field(out, std::to_string(t.expires_at));
  Field(out, t.created_by);
  return out;
}

std::string PeerText(std::string_view node, std::string_view ms, std::string_view method,
                     std::string_view target) {
  std::string out = "trainq peer v1\n";
  Field(out, node);
  Field(out, ms);
  Field(out, method);
  Field(out, target);
  return out;
}

}  // namespace

std::string ClusterKey::SignToken(const TokenRecord& t) const {
  return HmacSha256Hex(secret_, SignedTokenText(t));
}

bool ClusterKey::VerifyToken(const TokenRecord& t) const {
  return !t.signature.empty() && SameDigest(t.signature, SignToken(t));
}

namespace {

std::string StepText(JobId job, int attempt, int rank, std::string_view text) {
  return fmt::format("step\n{}\n{}\n{}\n{}", job, attempt, rank, text);
}

}  // namespace

std::string ClusterKey::SignStep(JobId job, int attempt, int rank, std::string_view text) const {
  return HmacSha256Hex(secret_, StepText(job, attempt, rank, text));
}

bool ClusterKey::VerifyStep(JobId job, int attempt, int rank, std::string_view text,
                            std::string_view signature) const {
  return !secret_.empty() &&
         SameDigest(signature, HmacSha256Hex(secret_, StepText(job, attempt, rank, text)));
}

std::string ClusterKey::PeerAuthorization(const std::string& node, int64_t now_ms,
                                          std::string_view method, std::string_view target) const {
  std::string ms = std::to_string(now_ms);
  return fmt::format("{}{} {} {}", kPeerScheme, node, ms,
                     HmacSha256Hex(secret_, PeerText(node, ms, method, target)));
}

Result<std::string> ClusterKey::VerifyPeer(std::string_view header, int64_t now_ms,
                                           std::string_view method, std::string_view target) const {
  auto refused = [](std::string_view why) {
    return Status::Unauthenticated(fmt::format("a node's request refused: {}", why));
  };
  if (header.rfind(kPeerScheme, 0) != 0) return refused("not signed by a node");
  header.remove_prefix(kPeerScheme.size());
  size_t a = header.find(' ');
  size_t b = a == std::string_view::npos ? a : header.find(' ', a + 1);
  if (b == std::string_view::npos) return refused("expected 'TrainqNode NODE MS SIGNATURE'");
  std::string_view node = header.substr(0, a), ms = header.substr(a + 1, b - a - 1),
                   signature = header.substr(b + 1);
  int64_t at = 0;
  auto [ptr, ec] = std::from_chars(ms.data(), ms.data() + ms.size(), at);
  if (ec != std::errc() || ptr != ms.data() + ms.size()) return refused("its time is no number");
  if (at < now_ms - kPeerSkewMs || at > now_ms + kPeerSkewMs) {
    return refused("its time is more than 5 minutes from this node's (are the clocks synced?)");
  }
  if (!SameDigest(signature, HmacSha256Hex(secret_, PeerText(node, ms, method, target)))) {
    return refused("its signature does not hold (another cluster key?)");
  }
  return std::string(node);
}

}  // namespace trainq
