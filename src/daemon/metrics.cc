#include "src/daemon/metrics.h"

#include <fmt/format.h>

#include "src/core/wait_kind.h"

namespace trainq {

void Histogram::Observe(double value) {
  for (size_t i = 0; i < bounds_.size(); ++i) {
    if (value <= bounds_[i]) ++counts_[i];
  }
  ++count_;
  sum_ += value;
}

namespace {

// A label value as the text format escapes it: backslash, double quote and newline.
std::string Quote(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

// Prometheus's float: integers without a fraction, others as the shortest round trip.
std::string Num(double v) { return fmt::format("{}", v); }

class Writer {
 public:
  void Family(const char* name, const char* type, const char* help) {
    out_ += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
  }
  void Sample(const std::string& name, const std::string& labels, double value) {
    if (labels.empty()) {
      out_ += fmt::format("{} {}\n", name, Num(value));
    } else {
      out_ += fmt::format("{}{{{}}} {}\n", name, labels, Num(value));
    }
  }
  void Histo(const char* name, const Histogram& h) {
    for (size_t i = 0; i < h.bounds().size(); ++i) {
      Sample(std::string(name) + "_bucket", fmt::format("le=\"{}\"", Num(h.bounds()[i])),
             static_cast<double>(h.counts()[i]));
    }
    Sample(std::string(name) + "_bucket", "le=\"+Inf\"", static_cast<double>(h.count()));
    Sample(std::string(name) + "_sum", "", h.sum());
    Sample(std::string(name) + "_count", "", static_cast<double>(h.count()));
  }
  std::string Take() { return std::move(out_); }

 private:
  std::string out_;
};

// dcgm-exporter's label names and values, so queries join on them (UUID; gpu and Hostname).
// Its modelName is not among them: Prometheus's lint (promtool check metrics) refuses a
// camelCase label name, so the model is trainq_gpu_info's model_name.
std::string GpuLabels(const MetricsFacts& f, const MetricsFacts::Gpu& g) {
  return fmt::format("gpu=\"{}\",UUID=\"{}\",Hostname=\"{}\",node=\"{}\"", g.index, Quote(g.uuid),
                     Quote(f.hostname), Quote(f.node));
}

void Gpus(Writer& w, const MetricsFacts& f) {
  w.Family("trainq_gpu_info", "gauge",
           "A GPU trainq schedules on (always 1), labelled as dcgm-exporter labels it, with its "
           "model.");
  for (const auto& g : f.gpus) {
    w.Sample("trainq_gpu_info",
             fmt::format("{},model_name=\"{}\"", GpuLabels(f, g), Quote(g.model)), 1);
  }
  struct Column {
    const char* name;
    const char* help;
    uint64_t MetricsFacts::Gpu::*field;
  };
  static constexpr Column kColumns[] = {
      {"trainq_gpu_memory_total_bytes", "GPU memory in all.", &MetricsFacts::Gpu::total},
      {"trainq_gpu_memory_used_bytes", "GPU memory in use, by anyone.", &MetricsFacts::Gpu::used},
      {"trainq_gpu_memory_reserved_bytes",
       "GPU memory trainq holds for its jobs beyond what they use yet.",
       &MetricsFacts::Gpu::reserved},
      {"trainq_gpu_memory_usable_bytes", "GPU memory a new job could be given now.",
       &MetricsFacts::Gpu::usable},
  };
  for (const Column& c : kColumns) {
    w.Family(c.name, "gauge", c.help);
    for (const auto& g : f.gpus) {
      w.Sample(c.name, GpuLabels(f, g), static_cast<double>(g.*c.field));
    }
  }
  w.Family("trainq_gpu_utilization_ratio", "gauge",
           "Share of the last sample period the GPU was busy (0-1); absent when unknown.");
  for (const auto& g : f.gpus) {
    if (g.utilization >= 0)
      w.Sample("trainq_gpu_utilization_ratio", GpuLabels(f, g), g.utilization / 100.0);
  }
  w.Family("trainq_gpu_jobs", "gauge", "trainq jobs holding the GPU.");
  for (const auto& g : f.gpus) {
    w.Sample("trainq_gpu_jobs", GpuLabels(f, g), static_cast<double>(g.jobs.size()));
  }
  w.Family("trainq_gpu_sample_age_seconds", "gauge",
           "Seconds since the GPUs were last sampled successfully.");
  if (f.gpus_known) w.Sample("trainq_gpu_sample_age_seconds", "", f.gpu_sample_age);
}

void Jobs(Writer& w, const MetricsFacts& f, const DaemonCounters& c, bool per_user) {
  w.Family("trainq_jobs", "gauge", "Jobs waiting or running, by state, in the whole queue.");
  for (const auto& [state, n] : f.jobs) {
    w.Sample("trainq_jobs", fmt::format("state=\"{}\"", state), static_cast<double>(n));
  }
  w.Family("trainq_jobs_waiting", "gauge", "Waiting jobs by the kind of reason they wait.");
  for (std::string_view kind : kWaitKinds) {
    auto it = f.waiting.find(std::string(kind));
    w.Sample("trainq_jobs_waiting", fmt::format("reason=\"{}\"", kind),
             it == f.waiting.end() ? 0.0 : static_cast<double>(it->second));
  }
  w.Family("trainq_jobs_submitted_total", "counter", "Jobs submitted through this node.");
  w.Sample("trainq_jobs_submitted_total", "", static_cast<double>(c.submitted));
  w.Family("trainq_jobs_finished_total", "counter",
           "Jobs that ended on this node, by the state they ended in.");
  for (const char* state : {"succeeded", "failed", "cancelled"}) {
    auto it = c.finished.find(state);
    w.Sample("trainq_jobs_finished_total", fmt::format("state=\"{}\"", state),
             it == c.finished.end() ? 0.0 : static_cast<double>(it->second));
  }
  w.Family("trainq_oom_retries_total", "counter",
           "Attempts on this node that ran out of GPU memory and went back to the queue.");
  w.Sample("trainq_oom_retries_total", "", static_cast<double>(c.oom_retries));
  w.Family("trainq_resizes_total", "counter",
           "Resizes of elastic jobs decided by this node's scheduler, by direction.");
  for (const char* direction : {"grow", "shrink"}) {
    auto it = c.resizes.find(direction);
    w.Sample("trainq_resizes_total", fmt::format("direction=\"{}\"", direction),
             it == c.resizes.end() ? 0.0 : static_cast<double>(it->second));
  }
  if (per_user) {
    w.Family("trainq_user_jobs", "gauge", "Jobs waiting or running, by user and state.");
    for (const auto& [key, n] : f.jobs_by_user) {
      w.Sample("trainq_user_jobs",
               fmt::format("user=\"{}\",state=\"{}\"", Quote(key.first), key.second),
               static_cast<double>(n));
    }
    w.Family("trainq_user_jobs_submitted_total", "counter",
             "Jobs submitted through this node, by user.");
    for (const auto& [user, n] : c.submitted_by_user) {
      w.Sample("trainq_user_jobs_submitted_total", fmt::format("user=\"{}\"", Quote(user)),
               static_cast<double>(n));
    }
    w.Family("trainq_user_jobs_finished_total", "counter",
             "Jobs that ended on this node, by user and the state they ended in.");
    for (const auto& [key, n] : c.finished_by_user) {
      w.Sample("trainq_user_jobs_finished_total",
               fmt::format("user=\"{}\",state=\"{}\"", Quote(key.first), key.second),
               static_cast<double>(n));
    }
  }
  w.Family("trainq_queue_wait_seconds", "histogram",
           "Seconds from a job's queueing to its attempt's start.");
  w.Histo("trainq_queue_wait_seconds", c.queue_wait);
  w.Family("trainq_scheduling_pass_duration_seconds", "histogram",
           "Seconds each scheduling pass took (the leader's, in a cluster).");
  w.Histo("trainq_scheduling_pass_duration_seconds", c.pass_duration);
}

void Daemon(Writer& w, const MetricsFacts& f, const DaemonCounters& c) {
  w.Family("trainq_build_info", "gauge", "The trainq daemon's version (always 1).");
  w.Sample("trainq_build_info",
           fmt::format("version=\"{}\",node=\"{}\",Hostname=\"{}\"", Quote(f.version),
                       Quote(f.node), Quote(f.hostname)),
           1);
  w.Family("trainq_event_streams", "gauge", "Clients following GET /v1/events.");
  w.Sample("trainq_event_streams", "", static_cast<double>(f.event_streams));
  w.Family("trainq_events_dropped_total", "counter",
           "Event-stream messages dropped because a reader fell behind.");
  w.Sample("trainq_events_dropped_total", "", static_cast<double>(c.events_dropped));
  w.Family("trainq_gpu_history_bytes", "gauge", "Memory the GPU history of the last hour takes.");
  w.Sample("trainq_gpu_history_bytes", "", static_cast<double>(f.history_bytes));
  w.Family("trainq_api_connections", "gauge", "Open API connections.");
  w.Sample("trainq_api_connections", "", static_cast<double>(f.connections));
  const ProcessStats& p = f.process;
  w.Family("process_cpu_seconds_total", "counter",
           "Total user and system CPU time spent in seconds.");
  w.Sample("process_cpu_seconds_total", "", p.cpu_seconds);
  w.Family("process_resident_memory_bytes", "gauge", "Resident memory size in bytes.");
  w.Sample("process_resident_memory_bytes", "", static_cast<double>(p.resident_bytes));
  w.Family("process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.");
  w.Sample("process_virtual_memory_bytes", "", static_cast<double>(p.virtual_bytes));
  w.Family("process_open_fds", "gauge", "Number of open file descriptors.");
  w.Sample("process_open_fds", "", static_cast<double>(p.open_fds));
  w.Family("process_max_fds", "gauge", "Maximum number of open file descriptors.");
  w.Sample("process_max_fds", "", static_cast<double>(p.max_fds));
  w.Family("process_start_time_seconds", "gauge",
           "Start time of the process since unix epoch in seconds.");
  w.Sample("process_start_time_seconds", "", p.start_time_seconds);
}

}  // namespace

std::string RenderMetrics(const MetricsFacts& facts, const DaemonCounters& counters,
                          bool per_user) {
  Writer w;
  Daemon(w, facts, counters);
  Gpus(w, facts);
  Jobs(w, facts, counters, per_user);
  return w.Take();
}

}  // namespace trainq
