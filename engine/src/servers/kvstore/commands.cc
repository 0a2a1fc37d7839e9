#include "commands.h"

#include <strings.h>
#include <time.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cstring>

namespace disagg::kvstore {
namespace {

using Args = std::vector<std::string_view>;

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && ::strncasecmp(a.data(), b.data(), a.size()) == 0;
}

bool to_int64(std::string_view s, std::int64_t* out) {
  if (s.empty()) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && p == s.data() + s.size();
}

double monotonic_seconds() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// Compares without an early exit so the time taken does not reveal how much of a guess matched.
bool constant_time_equal(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (std::size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

constexpr const char* kSyntaxError = "ERR syntax error";
constexpr const char* kNotInteger = "ERR value is not an integer or out of range";

}  // namespace

struct CommandSpec {
  const char* name;
  int arity;  // Redis convention: >0 exact argc, <0 at least -arity
  const char* flags;
  void (*run)(CommandExecutor&, const Args&, Session*, ReplyQueue*);
  bool needs_auth;
};

class CommandTable {
 public:
  static const CommandSpec* find(std::string_view name);
  static const std::vector<CommandSpec>& all();

  static void ping(CommandExecutor&, const Args& a, Session*, ReplyQueue* out) {
    if (a.size() > 2) return wrong_arity(a, out);
    if (a.size() == 2) out->bulk(a[1]);
    else out->simple("PONG");
  }
  static void echo(CommandExecutor&, const Args& a, Session*, ReplyQueue* out) { out->bulk(a[1]); }

  static void get(CommandExecutor& x, const Args& a, Session* s, ReplyQueue* out) {
    Blob value;
    const std::int64_t now = CommandExecutor::now_ms();
    StoreStatus st;
    if (x.async_disk_reads_) {
      st = x.store_->begin_get(a[1], now, &value, &s->pending_read);
      if (st == StoreStatus::kPending) {
        s->read_pending = true;  // the server reads it off-thread and calls finish_get()
        return;
      }
    } else {
      st = x.store_->get(a[1], now, &value);
    }
    if (st == StoreStatus::kOk) out->bulk(value);
    else out->null_bulk();
  }

  static void set(CommandExecutor& x, const Args& a, Session*, ReplyQueue* out) {
    const std::int64_t now = CommandExecutor::now_ms();
    std::int64_t expire_at = 0;
    bool keep_ttl = false, has_expiry = false;
    SetCondition cond = SetCondition::kAlways;
    for (std::size_t i = 3; i < a.size(); ++i) {
      const std::string_view opt = a[i];
      if (iequals(opt, "NX") && cond == SetCondition::kAlways) {
        cond = SetCondition::kIfAbsent;
      } else if (iequals(opt, "XX") && cond == SetCondition::kAlways) {
        cond = SetCondition::kIfPresent;
      } else if (iequals(opt, "KEEPTTL") && !has_expiry) {
        keep_ttl = true;
      } else if ((iequals(opt, "EX") || iequals(opt, "PX") || iequals(opt, "EXAT") || iequals(opt, "PXAT")) &&
                 !has_expiry && !keep_ttl && i + 1 < a.size()) {
        std::int64_t n = 0;
        if (!to_int64(a[++i], &n)) return x.error(out, kNotInteger);
        if (n <= 0 || n > (1LL << 46)) return x.error(out, "ERR invalid expire time in 'set' command");
        if (iequals(opt, "EX")) expire_at = now + n * 1000;
        else if (iequals(opt, "PX")) expire_at = now + n;
        else if (iequals(opt, "EXAT")) expire_at = n * 1000;
        else expire_at = n;
        has_expiry = true;
      } else {
        return x.error(out, kSyntaxError);
      }
    }
    if (has_expiry && expire_at <= now) {
      // Already expired: Redis stores then expires it, i.e. the key ends up deleted.
      if (cond == SetCondition::kIfAbsent && x.store_->exists(a[1], now)) return out->null_bulk();
      if (cond == SetCondition::kIfPresent && !x.store_->exists(a[1], now)) return out->null_bulk();
      x.store_->del(a[1], now);
      return out->simple("OK");
    }
    std::size_t cursor = 0;
    const StoreStatus st = x.store_arg(a[1], a, 2, &cursor, expire_at, now, cond, keep_ttl);
    x.reply_store_status(st, out);
  }

  static void mget(CommandExecutor& x, const Args& a, Session*, ReplyQueue* out) {
    const std::int64_t now = CommandExecutor::now_ms();
    out->array(a.size() - 1);
    for (std::size_t i = 1; i < a.size(); ++i) {
      Blob value;
      if (x.store_->get(a[i], now, &value) == StoreStatus::kOk) out->bulk(value);
      else out->null_bulk();
    }
  }

  static void mset(CommandExecutor& x, const Args& a, Session*, ReplyQueue* out) {
    if (a.size() % 2 != 1) return wrong_arity(a, out);
    const std::int64_t now = CommandExecutor::now_ms();
    std::size_t cursor = 0;
    for (std::size_t i = 1; i + 1 < a.size(); i += 2) {
      const StoreStatus st = x.store_arg(a[i], a, i + 1, &cursor, 0, now, SetCondition::kAlways, false);
      if (st != StoreStatus::kOk) return x.reply_store_status(st, out);
    }
    out->simple("OK");
  }

  static void exists(CommandExecutor& x, const Args& a, Session*, ReplyQueue* out) {
    const std::int64_t now = CommandExecutor::now_ms();
    std::int64_t n = 0;
    for (std::size_t i = 1; i < a.size(); ++i) n += x.store_->exists(a[i], now) ? 1 : 0;
    out->integer(n);
  }

  static void del(CommandExecutor& x, const Args& a, Session*, ReplyQueue* out) {
    const std::int64_t now = CommandExecutor::now_ms();
    std::int64_t n = 0;
    for (std::size_t i = 1; i < a.size(); ++i) n += x.store_->del(a[i], now) ? 1 : 0;
    out->integer(n);
  }

  static void expire_generic(CommandExecutor& x, const Args& a, ReplyQueue* out, std::int64_t unit_ms) {
    std::int64_t n = 0;
    if (!to_int64(a[2], &n) || n > (1LL << 46) || n < -(1LL << 46)) return x.error(out, kNotInteger);
    const std::int64_t now = CommandExecutor::now_ms();
    bool nx = false, xx = false, gt = false, lt = false;
    for (std::size_t i = 3; i < a.size(); ++i) {
      if (iequals(a[i], "NX")) nx = true;
      else if (iequals(a[i], "XX")) xx = true;
      else if (iequals(a[i], "GT")) gt = true;
      else if (iequals(a[i], "LT")) lt = true;
      else return x.error(out, std::string("ERR Unsupported option ") + std::string(a[i]));
    }
    if ((nx && (xx || gt || lt)) || (gt && lt)) {
      return x.error(out, "ERR NX and XX, GT or LT options at the same time are not compatible");
    }
    const std::int64_t ttl = x.store_->ttl_ms(a[1], now);
    if (ttl == -2) return out->integer(0);
    const std::int64_t at = now + n * unit_ms;
    // GT treats "no expiry" as infinite, LT as infinite too (so LT always applies to it).
    if ((nx && ttl != -1) || (xx && ttl == -1) || (gt && (ttl == -1 || at <= now + ttl)) ||
        (lt && ttl != -1 && at >= now + ttl)) {
      return out->integer(0);
    }
    out->integer(x.store_->expire(a[1], at, now) ? 1 : 0);
  }
  static void expire(CommandExecutor& x, const Args& a, Session*, ReplyQueue* out) { expire_generic(x, a, out, 1000); }
  static void pexpire(CommandExecutor& x, const Args& a, Session*, ReplyQueue* out) { expire_generic(x, a, out, 1); }

  static void ttl(CommandExecutor& x, const Args& a, Session*, ReplyQueue* out) {
    const std::int64_t t = x.store_->ttl_ms(a[1], CommandExecutor::now_ms());
    out->integer(t < 0 ? t : (t + 999) / 1000);
  }
  static void pttl(CommandExecutor& x, const Args& a, Session*, ReplyQueue* out) {
    out->integer(x.store_->ttl_ms(a[1], CommandExecutor::now_ms()));
  }
  static void type(CommandExecutor& x, const Args& a, Session*, ReplyQueue* out) {
    out->simple(x.store_->exists(a[1], CommandExecutor::now_ms()) ? "string" : "none");
  }

  static void strlen(CommandExecutor& x, const Args& a, Session*, ReplyQueue* out) {
    const std::int64_t n = x.store_->value_size(a[1], CommandExecutor::now_ms());
    out->integer(n < 0 ? 0 : n);
  }

  // KEYS walks the whole index in one command, as Redis does (operators type it at a prompt; the
  // LMCache connector uses SCAN). The key list lives only for this reply.
  static void keys(CommandExecutor& x, const Args& a, Session*, ReplyQueue* out) {
    const std::string_view pattern = a[1] == "*" ? std::string_view() : a[1];
    const std::int64_t now = CommandExecutor::now_ms();
    std::vector<std::string> found;
    std::uint64_t cursor = 0;
    do { cursor = x.store_->scan(cursor, 4096, pattern, now, &found); } while (cursor != 0);
    out->array(found.size());
    for (const std::string& k : found) out->bulk(k);
  }

  static void dbsize(CommandExecutor& x, const Args&, Session*, ReplyQueue* out) {
    out->integer(static_cast<std::int64_t>(x.store_->key_count()));
  }

  static void flushall(CommandExecutor& x, const Args& a, Session*, ReplyQueue* out) {
    if (a.size() > 2 || (a.size() == 2 && !iequals(a[1], "ASYNC") && !iequals(a[1], "SYNC"))) {
      return x.error(out, kSyntaxError);
    }
    x.store_->flush_all();
    out->simple("OK");
  }

  static void scan(CommandExecutor& x, const Args& a, Session*, ReplyQueue* out) {
    std::uint64_t cursor = 0;
    {
      auto [p, ec] = std::from_chars(a[1].data(), a[1].data() + a[1].size(), cursor);
      if (ec != std::errc() || p != a[1].data() + a[1].size()) return x.error(out, "ERR invalid cursor");
    }
    std::string_view match;
    std::int64_t count = 10;
    bool type_ok = true;
    for (std::size_t i = 2; i < a.size(); i += 2) {
      if (i + 1 >= a.size()) return x.error(out, kSyntaxError);
      if (iequals(a[i], "MATCH")) {
        match = a[i + 1] == "*" ? std::string_view() : a[i + 1];
      } else if (iequals(a[i], "COUNT")) {
        if (!to_int64(a[i + 1], &count)) return x.error(out, kNotInteger);
        if (count < 1) return x.error(out, kSyntaxError);
      } else if (iequals(a[i], "TYPE")) {
        type_ok = iequals(a[i + 1], "string");
      } else {
        return x.error(out, kSyntaxError);
      }
    }
    x.scratch_keys_.clear();
    const std::uint64_t next = x.store_->scan(cursor, static_cast<std::size_t>(std::min<std::int64_t>(count, 1 << 20)),
                                              match, CommandExecutor::now_ms(), &x.scratch_keys_);
    out->array(2);
    out->bulk(std::to_string(next));
    if (!type_ok) x.scratch_keys_.clear();
    out->array(x.scratch_keys_.size());
    for (const std::string& k : x.scratch_keys_) out->bulk(k);
  }

  static void info(CommandExecutor& x, const Args&, Session*, ReplyQueue* out) {
    const TieredStore& s = *x.store_;
    const StoreStats& st = s.stats();
    std::string text;
    text.reserve(1024);
    const auto kv = [&text](const char* k, const std::string& v) {
      text.append(k).append(":").append(v).append("\r\n");
    };
    text.append("# Server\r\n");
    kv("redis_version", "7.0.0");
    kv("disagg_kvstore_version", "0.1.0");
    kv("redis_mode", "standalone");
    kv("tcp_port", std::to_string(x.config_->port));
    kv("uptime_in_seconds", std::to_string((CommandExecutor::now_ms() - x.started_ms_) / 1000));
    text.append("\r\n# Clients\r\n");
    kv("connected_clients", std::to_string(x.counters_->connections_current));
    kv("maxclients", std::to_string(x.config_->max_clients));
    text.append("\r\n# Memory\r\n");
    kv("used_memory", std::to_string(s.memory_bytes()));
    kv("maxmemory", std::to_string(s.memory_budget()));
    kv("inflight_bytes", std::to_string(s.reserved_bytes()));
    kv("maxmemory_policy", "allkeys-lru");
    kv("index_bytes", std::to_string(s.index_bytes()));
    text.append("\r\n# Disk\r\n");
    kv("disk_enabled", s.has_disk() ? "1" : "0");
    kv("disk_bytes", std::to_string(s.disk_file_bytes()));
    kv("disk_dead_bytes", std::to_string(s.disk_dead_bytes()));
    kv("disk_budget", std::to_string(s.disk_budget()));
    text.append("\r\n# Stats\r\n");
    kv("total_connections_received", std::to_string(x.counters_->connections_accepted));
    kv("rejected_connections", std::to_string(x.counters_->connections_rejected));
    kv("total_commands_processed", std::to_string(x.counters_->commands));
    kv("keyspace_hits", std::to_string(st.hits_memory + st.hits_disk));
    kv("keyspace_misses", std::to_string(st.misses));
    kv("keyspace_hits_memory", std::to_string(st.hits_memory));
    kv("keyspace_hits_disk", std::to_string(st.hits_disk));
    kv("evicted_keys", std::to_string(st.evictions_memory + st.evictions_disk));
    kv("demotions", std::to_string(st.demotions));
    kv("promotions", std::to_string(st.promotions));
    kv("expired_keys", std::to_string(st.expired));
    text.append("\r\n# Keyspace\r\n");
    text.append("db0:keys=").append(std::to_string(s.key_count())).append(",expires=0,avg_ttl=0\r\n");
    out->bulk(text);
  }

  static void command(CommandExecutor& x, const Args& a, Session*, ReplyQueue* out) {
    const auto& table = all();
    if (a.size() == 1) {
      out->array(table.size());
      for (const CommandSpec& c : table) command_info(c, out);
      return;
    }
    if (iequals(a[1], "COUNT")) return out->integer(static_cast<std::int64_t>(table.size()));
    if (iequals(a[1], "DOCS")) return out->array(0);  // no docs: clients fall back to their own
    if (iequals(a[1], "INFO")) {
      out->array(a.size() - 2);
      for (std::size_t i = 2; i < a.size(); ++i) {
        const CommandSpec* c = find(a[i]);
        if (c != nullptr) command_info(*c, out);
        else out->null_bulk();
      }
      return;
    }
    if (iequals(a[1], "LIST")) {
      out->array(table.size());
      for (const CommandSpec& c : table) out->bulk(c.name);
      return;
    }
    x.error(out, "ERR unknown subcommand '" + std::string(a[1]) + "'. Try COMMAND COUNT, DOCS, INFO or LIST.");
  }
  static void command_info(const CommandSpec& c, ReplyQueue* out) {
    out->array(6);
    out->bulk(c.name);
    out->integer(c.arity);
    std::string flags = c.flags;
    std::size_t n = flags.empty() ? 0 : std::count(flags.begin(), flags.end(), ' ') + 1;
    out->array(n);
    std::size_t start = 0;
    for (std::size_t i = 0; i < n; ++i) {
      const std::size_t end = flags.find(' ', start);
      out->simple(flags.substr(start, end - start));
      start = end + 1;
    }
    const bool has_keys = std::strstr(c.flags, "readonly") != nullptr || std::strstr(c.flags, "write") != nullptr;
    const bool multi = std::strcmp(c.name, "mget") == 0 || std::strcmp(c.name, "del") == 0 ||
                       std::strcmp(c.name, "unlink") == 0 || std::strcmp(c.name, "exists") == 0 ||
                       std::strcmp(c.name, "mset") == 0;
    const bool no_key = std::strcmp(c.name, "flushall") == 0 || std::strcmp(c.name, "flushdb") == 0 ||
                        std::strcmp(c.name, "scan") == 0 || std::strcmp(c.name, "dbsize") == 0 ||
                        std::strcmp(c.name, "keys") == 0;
    out->integer(has_keys && !no_key ? 1 : 0);
    out->integer(has_keys && !no_key ? (multi ? -1 : 1) : 0);
    out->integer(has_keys && !no_key ? (std::strcmp(c.name, "mset") == 0 ? 2 : 1) : 0);
  }

  static void client(CommandExecutor& x, const Args& a, Session* s, ReplyQueue* out) {
    if (iequals(a[1], "SETNAME") && a.size() == 3) {
      for (char c : a[2]) {
        if (c <= ' ' || c > '~')
          return x.error(out, "ERR Client names cannot contain spaces, newlines or special characters.");
      }
      s->name.assign(a[2]);
      return out->simple("OK");
    }
    if (iequals(a[1], "GETNAME") && a.size() == 2) {
      if (s->name.empty()) return out->null_bulk();
      return out->bulk(s->name);
    }
    if (iequals(a[1], "ID") && a.size() == 2) return out->integer(static_cast<std::int64_t>(s->id));
    if (iequals(a[1], "SETINFO") && a.size() == 4) return out->simple("OK");  // library name/version: accepted, unused
    x.error(out, "ERR unknown subcommand or wrong number of arguments for '" + std::string(a[1]) +
                     "'. Try CLIENT SETNAME, GETNAME, ID or SETINFO.");
  }

  static void auth(CommandExecutor& x, const Args& a, Session* s, ReplyQueue* out) {
    if (a.size() > 3) return wrong_arity(a, out);
    if (x.config_->requirepass.empty()) {
      return x.error(out,
                     "ERR AUTH <password> called without any password configured for the default user. "
                     "Are you sure your configuration is correct?");
    }
    const std::string_view user = a.size() == 3 ? a[1] : std::string_view("default");
    const std::string_view pass = a.back();
    if (user == "default" && constant_time_equal(pass, x.config_->requirepass)) {
      s->authenticated = true;
      return out->simple("OK");
    }
    x.error(out, "WRONGPASS invalid username-password pair or user is disabled.");
  }

  static void hello(CommandExecutor& x, const Args& a, Session* s, ReplyQueue* out) {
    std::size_t i = 1;
    if (a.size() >= 2) {
      std::int64_t ver = 0;
      if (!to_int64(a[1], &ver)) return x.error(out, "ERR Protocol version is not an integer or out of range");
      if (ver != 2)
        return x.error(out, "NOPROTO unsupported protocol version; this server speaks RESP2 only (use HELLO 2)");
      i = 2;
    }
    for (; i < a.size(); ++i) {
      if (iequals(a[i], "AUTH") && i + 2 < a.size()) {
        if (x.config_->requirepass.empty() ||
            !(a[i + 1] == "default" && constant_time_equal(a[i + 2], x.config_->requirepass))) {
          if (!x.config_->requirepass.empty()) {
            return x.error(out, "WRONGPASS invalid username-password pair or user is disabled.");
          }
        } else {
          s->authenticated = true;
        }
        i += 2;
      } else if (iequals(a[i], "SETNAME") && i + 1 < a.size()) {
        s->name.assign(a[++i]);
      } else {
        return x.error(out, std::string("ERR Syntax error in HELLO option '") + std::string(a[i]) + "'");
      }
    }
    if (!x.config_->requirepass.empty() && !s->authenticated) {
      return x.error(out,
                     "NOAUTH HELLO must be called with the client already authenticated, otherwise the "
                     "HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and "
                     "select the RESP protocol version at the same time");
    }
    out->array(14);
    out->bulk("server");
    out->bulk("redis");
    out->bulk("version");
    out->bulk("7.0.0");
    out->bulk("proto");
    out->integer(2);
    out->bulk("id");
    out->integer(static_cast<std::int64_t>(s->id));
    out->bulk("mode");
    out->bulk("standalone");
    out->bulk("role");
    out->bulk("master");
    out->bulk("modules");
    out->array(0);
  }

  static void select(CommandExecutor& x, const Args& a, Session*, ReplyQueue* out) {
    std::int64_t db = 0;
    if (!to_int64(a[1], &db)) return x.error(out, kNotInteger);
    if (db != 0) return x.error(out, "ERR DB index is out of range (this store has only database 0)");
    out->simple("OK");
  }

  static void config(CommandExecutor& x, const Args& a, Session*, ReplyQueue* out) {
    if (iequals(a[1], "GET") && a.size() >= 3) {
      // Enough for tools that read persistence settings on connect (redis-benchmark does).
      std::vector<std::pair<std::string, std::string>> found;
      const std::pair<const char*, std::string> known[] = {
          {"save", ""},
          {"appendonly", "no"},
          {"maxmemory", std::to_string(x.store_->memory_budget())},
          {"maxmemory-policy", "allkeys-lru"},
          {"databases", "1"},
      };
      for (std::size_t i = 2; i < a.size(); ++i) {
        for (const auto& [k, v] : known) {
          if (glob_match(a[i], k)) found.emplace_back(k, v);
        }
      }
      out->array(found.size() * 2);
      for (const auto& [k, v] : found) {
        out->bulk(k);
        out->bulk(v);
      }
      return;
    }
    if (iequals(a[1], "RESETSTAT") && a.size() == 2) return out->simple("OK");
    x.error(out, "ERR CONFIG " + std::string(a[1]) + " is not supported; kvstore is configured by flags (see --help)");
  }

  static void quit(CommandExecutor&, const Args&, Session* s, ReplyQueue* out) {
    s->close_after_reply = true;
    out->simple("OK");
  }

  static void wrong_arity(const Args& a, ReplyQueue* out) {
    std::string name(a[0]);
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    out->error("ERR wrong number of arguments for '" + name + "' command");
  }
};

const std::vector<CommandSpec>& CommandTable::all() {
  static const std::vector<CommandSpec> table = {
      {"get", 2, "readonly fast", &CommandTable::get, true},
      {"set", -3, "write denyoom", &CommandTable::set, true},
      {"mget", -2, "readonly fast", &CommandTable::mget, true},
      {"mset", -3, "write denyoom", &CommandTable::mset, true},
      {"exists", -2, "readonly fast", &CommandTable::exists, true},
      {"del", -2, "write", &CommandTable::del, true},
      {"unlink", -2, "write fast", &CommandTable::del, true},
      {"expire", -3, "write fast", &CommandTable::expire, true},
      {"pexpire", -3, "write fast", &CommandTable::pexpire, true},
      {"ttl", 2, "readonly fast", &CommandTable::ttl, true},
      {"pttl", 2, "readonly fast", &CommandTable::pttl, true},
      {"type", 2, "readonly fast", &CommandTable::type, true},
      {"strlen", 2, "readonly fast", &CommandTable::strlen, true},
      {"keys", 2, "readonly", &CommandTable::keys, true},
      {"ping", -1, "fast stale", &CommandTable::ping, true},
      {"echo", 2, "fast", &CommandTable::echo, true},
      {"info", -1, "loading stale", &CommandTable::info, true},
      {"dbsize", 1, "readonly fast", &CommandTable::dbsize, true},
      {"flushall", -1, "write", &CommandTable::flushall, true},
      {"flushdb", -1, "write", &CommandTable::flushall, true},
      {"scan", -2, "readonly", &CommandTable::scan, true},
      {"command", -1, "loading stale", &CommandTable::command, true},
      {"client", -2, "loading stale", &CommandTable::client, true},
      {"select", 2, "loading stale fast", &CommandTable::select, true},
      {"config", -2, "admin loading stale", &CommandTable::config, true},
      {"auth", -2, "noscript loading stale fast no_auth", &CommandTable::auth, false},
      {"hello", -1, "noscript loading stale fast no_auth", &CommandTable::hello, false},
      {"quit", -1, "loading stale fast no_auth", &CommandTable::quit, false},
  };
  return table;
}

const CommandSpec* CommandTable::find(std::string_view name) {
  for (const CommandSpec& c : all()) {
    if (iequals(name, c.name)) return &c;
  }
  return nullptr;
}

CommandExecutor::CommandExecutor(TieredStore* store, const ServerConfig* config, ServerCounters* counters)
    : store_(store), config_(config), counters_(counters), started_ms_(now_ms()) {}

CommandExecutor::~CommandExecutor() = default;

std::int64_t CommandExecutor::now_ms() {
  timespec ts{};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

void CommandExecutor::error(ReplyQueue* out, std::string_view message) {
  ++counters_->errors;
  out->error(message);
}

void CommandExecutor::reply_store_status(StoreStatus st, ReplyQueue* out) {
  switch (st) {
    case StoreStatus::kOk: return out->simple("OK");
    case StoreStatus::kNotSet: return out->null_bulk();
    case StoreStatus::kTooLarge:
      return error(out, "ERR value exceeds --max-value-bytes (" + std::to_string(config_->store.max_value_bytes) +
                            ") or key exceeds 65536 bytes");
    case StoreStatus::kNoSpace:
      return error(out, "OOM value does not fit the memory tier (--memory-bytes " +
                            std::to_string(config_->store.memory_bytes) +
                            ") nor the disk tier; add --disk-dir/--disk-bytes or raise the budgets");
    case StoreStatus::kIoError: return error(out, "ERR disk tier I/O error; see the server log");
    case StoreStatus::kNotFound:
    case StoreStatus::kPending: return out->null_bulk();
  }
}

StoreStatus CommandExecutor::store_arg(std::string_view key, const std::vector<std::string_view>& args, std::size_t i,
                                       std::size_t* cursor, std::int64_t expire_at_ms, std::int64_t now_ms,
                                       SetCondition condition, bool keep_ttl) {
  if (payloads_ != nullptr) {
    while (*cursor < payloads_->size() && (*payloads_)[*cursor].index < i) ++*cursor;
    if (*cursor < payloads_->size() && (*payloads_)[*cursor].index == i) {
      return store_->set(key, (*payloads_)[*cursor].blob, expire_at_ms, now_ms, condition, keep_ttl);
    }
  }
  return store_->set(key, args[i], expire_at_ms, now_ms, condition, keep_ttl);
}

void CommandExecutor::execute(const std::vector<std::string_view>& args, Session* session, ReplyQueue* out,
                              const std::vector<PayloadArg>* payloads) {
  ++counters_->commands;
  payloads_ = payloads;
  const CommandSpec* spec = CommandTable::find(args[0]);
  if (spec == nullptr) {
    std::string msg = "ERR unknown command '" + std::string(args[0].substr(0, 128)) + "', with args beginning with: ";
    for (std::size_t i = 1; i < args.size() && i < 4; ++i) msg.append("'").append(args[i].substr(0, 64)).append("' ");
    return error(out, msg);
  }
  if (spec->needs_auth && !session->authenticated && !config_->requirepass.empty()) {
    return error(out, "NOAUTH Authentication required.");
  }
  const auto argc = static_cast<int>(args.size());
  if ((spec->arity > 0 && argc != spec->arity) || (spec->arity < 0 && argc < -spec->arity)) {
    ++counters_->errors;
    return CommandTable::wrong_arity(args, out);
  }
  const double start = monotonic_seconds();
  spec->run(*this, args, session, out);
  payloads_ = nullptr;
  if (session->read_pending) {
    session->pending_since = start;  // observed when finish_get() answers it
    return;
  }
  const double elapsed = monotonic_seconds() - start;
  if (spec->run == &CommandTable::get || spec->run == &CommandTable::mget) counters_->latency_get.observe(elapsed);
  else if (spec->run == &CommandTable::set || spec->run == &CommandTable::mset) counters_->latency_set.observe(elapsed);
  else counters_->latency_other.observe(elapsed);
}

void CommandExecutor::finish_get(Session* session, DiskError error, Blob loaded, ReplyQueue* out) {
  Blob value;
  const StoreStatus st = store_->finish_get(session->pending_read, error, std::move(loaded), now_ms(), &value);
  if (st == StoreStatus::kOk) out->bulk(value);
  else out->null_bulk();
  session->read_pending = false;
  session->pending_read = DiskRead{};
  counters_->latency_get.observe(monotonic_seconds() - session->pending_since);
}

}  // namespace disagg::kvstore
