#include "metrics.h"

#include <cstdio>

namespace disagg::kvstore {
namespace {

void line(std::string* out, const char* name, const char* labels, double value) {
  char buf[256];
  if (labels[0] != '\0') {
    std::snprintf(buf, sizeof(buf), "%s{%s} %.17g\n", name, labels, value);
  } else {
    std::snprintf(buf, sizeof(buf), "%s %.17g\n", name, value);
  }
  out->append(buf);
}

void head(std::string* out, const char* name, const char* type, const char* help) {
  out->append("# HELP ").append(name).append(" ").append(help).append("\n");
  out->append("# TYPE ").append(name).append(" ").append(type).append("\n");
}

}  // namespace

void LatencyHistogram::render(const std::string& name, const std::string& labels, std::string* out) const {
  std::uint64_t cumulative = 0;
  char buf[256];
  for (std::size_t i = 0; i < kBounds.size(); ++i) {
    cumulative += counts_[i];
    std::snprintf(buf, sizeof(buf), "%s_bucket{%s,le=\"%g\"} %llu\n", name.c_str(), labels.c_str(), kBounds[i],
                  static_cast<unsigned long long>(cumulative));
    out->append(buf);
  }
  cumulative += counts_[kBounds.size()];
  std::snprintf(buf, sizeof(buf), "%s_bucket{%s,le=\"+Inf\"} %llu\n%s_sum{%s} %.9g\n%s_count{%s} %llu\n", name.c_str(),
                labels.c_str(), static_cast<unsigned long long>(cumulative), name.c_str(), labels.c_str(), sum_,
                name.c_str(), labels.c_str(), static_cast<unsigned long long>(count_));
  out->append(buf);
}

std::string render_metrics(const TieredStore& store, const ServerCounters& c) {
  const StoreStats& s = store.stats();
  std::string out;
  out.reserve(8192);
  const auto d = [](std::uint64_t v) { return static_cast<double>(v); };

  head(&out, "kvstore_hits_total", "counter", "GET hits by the tier that held the value.");
  line(&out, "kvstore_hits_total", "tier=\"memory\"", d(s.hits_memory));
  line(&out, "kvstore_hits_total", "tier=\"disk\"", d(s.hits_disk));
  head(&out, "kvstore_misses_total", "counter", "GET misses (in no tier).");
  line(&out, "kvstore_misses_total", "", d(s.misses));
  head(&out, "kvstore_bytes", "gauge", "Bytes held per tier (memory: charged bytes; disk: segment file bytes).");
  line(&out, "kvstore_bytes", "tier=\"memory\"", d(store.memory_bytes()));
  line(&out, "kvstore_bytes", "tier=\"disk\"", d(store.disk_file_bytes()));
  head(&out, "kvstore_budget_bytes", "gauge", "Configured byte budget per tier.");
  line(&out, "kvstore_budget_bytes", "tier=\"memory\"", d(store.memory_budget()));
  line(&out, "kvstore_budget_bytes", "tier=\"disk\"", d(store.disk_budget()));
  head(&out, "kvstore_disk_dead_bytes", "gauge", "Disk bytes of dead records awaiting compaction.");
  line(&out, "kvstore_disk_dead_bytes", "", d(store.disk_dead_bytes()));
  head(&out, "kvstore_inflight_bytes", "gauge",
       "Memory reserved for values still arriving (within the memory budget).");
  line(&out, "kvstore_inflight_bytes", "", d(store.reserved_bytes()));
  head(&out, "kvstore_index_bytes", "gauge", "Memory held by index entries of disk-resident keys.");
  line(&out, "kvstore_index_bytes", "", d(store.index_bytes()));
  head(&out, "kvstore_keys", "gauge", "Keys per tier.");
  line(&out, "kvstore_keys", "tier=\"memory\"", d(store.memory_keys()));
  line(&out, "kvstore_keys", "tier=\"disk\"", d(store.disk_keys()));
  head(&out, "kvstore_evictions_total", "counter", "Entries dropped from a tier for space.");
  line(&out, "kvstore_evictions_total", "tier=\"memory\"", d(s.evictions_memory));
  line(&out, "kvstore_evictions_total", "tier=\"disk\"", d(s.evictions_disk));
  head(&out, "kvstore_demotions_total", "counter", "Entries moved from memory to disk.");
  line(&out, "kvstore_demotions_total", "", d(s.demotions));
  head(&out, "kvstore_promotions_total", "counter", "Entries moved from disk to memory on a hit.");
  line(&out, "kvstore_promotions_total", "", d(s.promotions));
  head(&out, "kvstore_expired_total", "counter", "Keys removed because their TTL passed.");
  line(&out, "kvstore_expired_total", "", d(s.expired));
  head(&out, "kvstore_corrupt_reads_total", "counter", "Disk records that failed their checksum (served as misses).");
  line(&out, "kvstore_corrupt_reads_total", "", d(s.corrupt_reads));
  head(&out, "kvstore_disk_errors_total", "counter", "Disk I/O errors.");
  line(&out, "kvstore_disk_errors_total", "", d(s.disk_errors));
  head(&out, "kvstore_compactions_total", "counter", "Segments compacted.");
  line(&out, "kvstore_compactions_total", "", d(s.compactions));
  head(&out, "kvstore_compacted_bytes_total", "counter", "Live record bytes copied by compaction.");
  line(&out, "kvstore_compacted_bytes_total", "", d(s.compacted_bytes));
  head(&out, "kvstore_recovered_keys", "gauge", "Keys recovered from the disk tier at start.");
  line(&out, "kvstore_recovered_keys", "", d(s.recovered_keys));
  head(&out, "kvstore_recovery_cut_bytes", "gauge", "Torn or corrupt bytes cut off the ends of segments at start.");
  line(&out, "kvstore_recovery_cut_bytes", "", d(s.recovery_cut_bytes));
  head(&out, "kvstore_recovery_skipped_bytes", "gauge",
       "Corrupt bytes between good records skipped at start (only the records in them are lost).");
  line(&out, "kvstore_recovery_skipped_bytes", "", d(s.recovery_skipped_bytes));

  head(&out, "kvstore_connections", "gauge", "Open client connections.");
  line(&out, "kvstore_connections", "", d(c.connections_current));
  head(&out, "kvstore_connections_total", "counter", "Client connections by outcome.");
  line(&out, "kvstore_connections_total", "result=\"accepted\"", d(c.connections_accepted));
  line(&out, "kvstore_connections_total", "result=\"rejected_max_clients\"", d(c.connections_rejected));
  head(&out, "kvstore_commands_total", "counter", "Commands executed.");
  line(&out, "kvstore_commands_total", "", d(c.commands));
  head(&out, "kvstore_error_replies_total", "counter", "Error replies sent.");
  line(&out, "kvstore_error_replies_total", "", d(c.errors));
  head(&out, "kvstore_protocol_errors_total", "counter", "Connections closed for malformed RESP.");
  line(&out, "kvstore_protocol_errors_total", "", d(c.protocol_errors));
  head(&out, "kvstore_rejected_requests_total", "counter",
       "Commands refused (OOM) as they arrived: their values would pass --memory-bytes beside the others in flight.");
  line(&out, "kvstore_rejected_requests_total", "", d(c.rejected_requests));
  head(&out, "kvstore_pipeline_stalls_total", "counter", "Times a connection hit --max-pipeline and reading paused.");
  line(&out, "kvstore_pipeline_stalls_total", "", d(c.pipeline_stalls));
  head(&out, "kvstore_network_bytes_total", "counter", "Bytes read from and written to clients.");
  line(&out, "kvstore_network_bytes_total", "direction=\"in\"", d(c.bytes_in));
  line(&out, "kvstore_network_bytes_total", "direction=\"out\"", d(c.bytes_out));
  head(&out, "kvstore_command_duration_seconds", "histogram", "Time to execute a command (excluding network).");
  c.latency_get.render("kvstore_command_duration_seconds", "command=\"get\"", &out);
  c.latency_set.render("kvstore_command_duration_seconds", "command=\"set\"", &out);
  c.latency_other.render("kvstore_command_duration_seconds", "command=\"other\"", &out);
  return out;
}

}  // namespace disagg::kvstore
