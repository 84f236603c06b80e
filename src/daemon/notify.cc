// Notifications when a job ends (docs/workflow.md, "Notifications"): what is said is built
// from the stored job (src/core/notification.h), handed to the Notifier, and delivered on
// its thread — a webhook POST through the API's HTTP client, or a mail through sendmail.
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "src/core/endpoint.h"
#include "src/core/json_codec.h"
#include "src/core/notification.h"
#include "src/core/spec.h"
#include "src/daemon/daemon_impl.h"
#include "src/os/run_dir.h"
#include "src/os/system.h"

namespace trainq {

namespace {

// A receiver that does not take the connection at once is not there; one that takes it
// gets the rest of the whole try's time to answer.
constexpr int kWebhookConnectTimeoutMs = 3000;
constexpr int kWebhookTimeoutMs = 10000;

Status PostWebhook(const Delivery& d) {
  Result<WebhookUrl> url = ParseWebhookUrl(d.target, "--notify");
  if (!url.ok()) return url.status();
  CallOptions options;
  options.timeout_ms = kWebhookTimeoutMs;
  options.connect_timeout_ms = kWebhookConnectTimeoutMs;
  Result<HttpResponse> r = HttpCall(url->endpoint, "POST", url->target, d.body, options);
  if (!r.ok()) return r.status();
  if (r->status / 100 == 2) return Status::Ok();
  return Status::Unavailable(fmt::format("HTTP {}", r->status));
}

Status SendMail(const std::string& sendmail, const Delivery& d) {
  Result<CommandOutput> out = RunCommand({sendmail, "-t", "-oi"}, d.body);
  if (!out.ok()) return out.status();
  if (out->exit_code == 0) return Status::Ok();
  return Status::Unavailable(
      fmt::format("{} exited {}: {}", sendmail, out->exit_code, out->output.substr(0, 200)));
}

// The end of the last attempt's log, when this node holds it.
std::string LogTail(const Job& job) {
  const Attempt* a = job.current();
  if (a == nullptr || a->log_path.empty()) return "";
  Result<std::string> tail = ReadFileTail(a->log_path, kNotifyLogTailBytes);
  return tail.ok() ? *tail : "";
}

}  // namespace

Status DaemonImpl::StartNotifier() {
  if (notifier_) return Status::Ok();
  DeliverFn deliver = deliver_;
  if (!deliver) {
    deliver = [sendmail = config_.sendmail](const Delivery& d) {
      return d.kind == Delivery::Kind::kMail ? SendMail(sendmail, d) : PostWebhook(d);
    };
  }
  notifier_ = std::make_unique<Notifier>(options_.paths.state_dir + "/notify", std::move(deliver));
  return notifier_->Start();
}

void DaemonImpl::JobEnded(JobId id) {
  Result<Job> job = store_->Get(id);
  if (!job.ok()) {
    spdlog::warn("job {}: no notification: {}", id, job.status().message());
    return;
  }
  // Not ended after all: queued again after a lost node, or a gang's part that succeeded
  // while others run on.
  if (!IsDone(job->state)) return;
  watch_->Ended(*job);
  if (!notifier_) return;
  std::string url = config_.notify_url;
  if (!job->spec.notify_url.empty()) url = job->spec.notify_url;
  if (url.empty() && job->spec.mail.empty()) return;
  std::string tail = LogTail(*job);
  std::string key = fmt::format("{}-{}", id, job->attempt);
  std::vector<std::pair<std::string, Delivery>> out;
  if (!url.empty()) {
    bool slack = config_.notify_format == "slack";
    nlohmann::json body = slack ? SlackJson(*job, tail) : NotificationJson(*job, tail);
    out.push_back({key + "-webhook", {Delivery::Kind::kWebhook, url, DumpJson(body)}});
  }
  // Checked at submit; again here for a job stored before the rule, or a domain since
  // dropped from mail_domains.
  Status mail_ok = job->spec.mail.empty()
                       ? Status::Ok()
                       : CheckMailOwner(job->spec.mail, job->spec.user, config_.mail_domains);
  if (!mail_ok.ok()) spdlog::warn("job {}: no mail: {}", id, mail_ok.message());
  if (!job->spec.mail.empty() && mail_ok.ok()) {
    out.push_back(
        {key + "-mail",
         {Delivery::Kind::kMail, job->spec.mail, MailMessage(*job, tail, job->spec.mail)}});
  }
  for (const auto& [name, d] : out) {
    if (Status st = notifier_->Enqueue(name, d); !st.ok()) {
      spdlog::error("job {}: notification to {} not stored: {}", id, d.target, st.message());
    }
  }
}

}  // namespace trainq
