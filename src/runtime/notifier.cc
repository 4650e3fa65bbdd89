#include "runtime/notifier.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <algorithm>
#include <chrono>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "httplib.h"
#include "runtime/audit_log.h"
#include "runtime/log.h"

namespace carve {

using json = nlohmann::json;

std::string Notifier::Scope(const std::string& tenant, const std::string& name) {
  return absl::StrCat(tenant, "/", name);
}

std::string Notifier::DeliveryId(const std::string& scope, int64_t seq) {
  return absl::StrFormat("%s/%020d", scope, seq);
}

namespace {

std::string Wants(const NotificationConfig& n) {
  return absl::StrCat(n.project, "|", absl::StrJoin(n.events, ","));
}

std::string StringField(const json& j, const char* key) {
  return j.is_object() && j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : "";
}

}  // namespace

Notifier::Notifier(Store* store, Sources sources, Options options)
    : store_(store), sources_(std::move(sources)), options_(options) {}

Notifier::~Notifier() { Stop(); }

void Notifier::Start() {
  thread_ = std::thread([this] { Loop(); });
}

void Notifier::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Notifier::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    lock.unlock();
    RunOnce();
    lock.lock();
    wake_.wait_for(lock, std::chrono::milliseconds(options_.poll_ms), [&] { return stopping_; });
  }
}

std::string Notifier::Sign(const std::string& secret, int64_t unix_seconds,
                           const std::string& body) {
  const std::string signed_text = absl::StrCat(unix_seconds, ".", body);
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
       reinterpret_cast<const unsigned char*>(signed_text.data()), signed_text.size(), mac, &size);
  return absl::StrCat("t=", unix_seconds, ",v1=",
                      absl::BytesToHexString(std::string(reinterpret_cast<char*>(mac), size)));
}

void Notifier::RunOnce() {
  const std::vector<NotificationConfig> configs = sources_.configs();
  for (const NotificationConfig& n : configs) {
    const std::string scope = Scope(n.tenant, n.name);
    State s;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) return;
      s = states_[scope];
    }
    try {
      Work(n, s);
    } catch (const std::exception& e) {  // never the server's end: this notification waits
      LogWarn("notification ", n.name, ": ", e.what());
    }
    std::lock_guard<std::mutex> lock(mu_);
    states_[scope] = std::move(s);
  }
  std::lock_guard<std::mutex> lock(mu_);
  std::erase_if(states_, [&](const auto& entry) {
    return std::none_of(configs.begin(), configs.end(), [&](const NotificationConfig& n) {
      return Scope(n.tenant, n.name) == entry.first;
    });
  });
}

void Notifier::Work(const NotificationConfig& n, State& s) {
  if (!s.loaded) Load(n, s);
  if (!s.loaded) return;
  // Re-applied with other wants: the event in hand may no longer be this notification's.
  if (s.pending && s.pending->wants != Wants(n)) s.pending.reset();
  const auto budget = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  while (std::chrono::steady_clock::now() < budget) {
    if (!s.pending) Advance(n, s);
    if (!s.pending || sources_.now_us() < s.pending->next_try_us) return;
    if (!Attempt(n, s)) return;  // its retry waits
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return;
  }
}

void Notifier::Load(const NotificationConfig& n, State& s) {
  auto stored = store_->Get(kCursorKind, Scope(n.tenant, n.name));
  if (!stored.ok()) {
    LogWarn("notification ", n.name, ": its cursor cannot be read: ", stored.status().message());
    return;
  }
  if (*stored) {
    json doc = json::parse((*stored)->json, nullptr, false);
    s.cursor = doc.is_object() ? doc.value("cursor", int64_t{0}) : 0;
    s.delivered = doc.is_object() ? doc.value("delivered", int64_t{0}) : 0;
    s.failed = doc.is_object() ? doc.value("failed", int64_t{0}) : 0;
  } else {
    // New: from the log's head on (an empty commit answers the last event's seq).
    auto head = store_->Commit(StoreBatch{});
    if (!head.ok()) return;
    s.cursor = *head;
    Save(n, s, "");
  }
  s.loaded = true;
}

std::optional<json> Notifier::PayloadFor(const NotificationConfig& n, const StoredEvent& e) const {
  if (!n.Wants(e.type)) return std::nullopt;
  json details = json::parse(e.details_json, nullptr, false);
  const std::string tenant = EventTenant(e.type, details);
  json out = {{"id", e.seq},
              {"notification", n.name},
              {"type", e.type},
              {"time_us", e.time_us},
              {"subject", e.subject}};
  if (!tenant.empty()) {
    if (tenant != n.tenant) return std::nullopt;
    if (!n.project.empty() && StringField(details, "project") != n.project) return std::nullopt;
    out.update(
        {{"tenant", tenant}, {"actor", e.actor}, {"reason", e.reason}, {"details", details}});
    return out;
  }
  // A platform event: only when it names jobs of the tenant, and then only those.
  json own = json::array();
  const json jobs = details.is_object() ? details.value("jobs", json::array()) : json::array();
  for (const json& id : jobs) {
    if (!id.is_number_integer()) continue;
    auto [job_tenant, job_project] = sources_.job_owner(id.get<int64_t>());
    if (job_tenant == n.tenant && (n.project.empty() || job_project == n.project)) {
      own.push_back(id);
    }
  }
  if (own.empty()) return std::nullopt;
  out.update({{"tenant", n.tenant}, {"jobs", own}});
  return out;
}

void Notifier::Advance(const NotificationConfig& n, State& s) {
  const int64_t before = s.cursor;
  auto events = store_->Events(s.cursor, 200);
  if (!events.ok()) return;
  for (const StoredEvent& e : *events) {
    std::optional<json> payload = PayloadFor(n, e);
    if (!payload) {
      s.cursor = e.seq;
      continue;
    }
    Pending p;
    p.seq = e.seq;
    p.wants = Wants(n);
    p.body = payload->dump();
    // Attempts made before a restart go on in the same record.
    auto stored = store_->Get(kDeliveryKind, DeliveryId(Scope(n.tenant, n.name), e.seq));
    if (stored.ok() && *stored) {
      json doc = json::parse((*stored)->json, nullptr, false);
      if (doc.is_object()) p.attempts = doc.value("attempts", json::array());
    }
    s.pending = std::move(p);
    break;
  }
  if (s.cursor != before && !s.pending) Save(n, s, "");
}

bool Notifier::Attempt(const NotificationConfig& n, State& s) {
  Pending& p = *s.pending;
  const int64_t now = sources_.now_us();
  // The URL was parsed at apply (notification_config.h): host and port are checked.
  httplib::Client client(absl::StrCat(n.https ? "https://" : "http://", n.host, ":", n.port));
  const int64_t t = options_.timeout_ms;
  client.set_connection_timeout(t / 1000, (t % 1000) * 1000);
  client.set_read_timeout(t / 1000, (t % 1000) * 1000);
  client.set_write_timeout(t / 1000, (t % 1000) * 1000);
  const httplib::Headers headers = {{"X-Carve-Event", std::to_string(p.seq)},
                                    {"X-Carve-Notification", n.name},
                                    {"X-Carve-Signature", Sign(n.secret, now / 1'000'000, p.body)},
                                    {"User-Agent", "carve-notifier"}};
  auto res = client.Post(n.path, headers, p.body, "application/json");
  json attempt = {{"time_us", now}, {"status", res ? res->status : 0}};
  if (!res) attempt["error"] = httplib::to_string(res.error());
  p.attempts.push_back(attempt);
  const bool ok = res && res->status >= 200 && res->status < 300;
  const int tries = static_cast<int>(p.attempts.size());
  if (ok || tries >= options_.max_attempts) {
    ok ? ++s.delivered : ++s.failed;
    s.cursor = p.seq;
    if (!ok) {
      LogWarn("notification ", n.name, ": event ", p.seq, " not delivered after ", tries,
              " attempts; the last: ", attempt.dump());
    }
    Save(n, s, ok ? "delivered" : "failed");
    s.pending.reset();
    return ok;
  }
  const int64_t backoff =
      std::min(options_.max_retry_ms, options_.first_retry_ms << std::min(tries - 1, 20));
  p.next_try_us = now + backoff * 1000;
  Save(n, s, "retrying");
  return false;
}

void Notifier::Save(const NotificationConfig& n, const State& s, const std::string& outcome) {
  StoreBatch batch;
  const std::string scope = Scope(n.tenant, n.name);
  batch.puts.push_back(
      {kCursorKind, scope,
       json{{"cursor", s.cursor}, {"delivered", s.delivered}, {"failed", s.failed}}.dump()});
  if (!outcome.empty() && s.pending) {
    batch.puts.push_back({kDeliveryKind, DeliveryId(scope, s.pending->seq),
                          json{{"notification", n.name},
                               {"tenant", n.tenant},
                               {"event", s.pending->seq},
                               {"state", outcome},
                               {"attempts", s.pending->attempts}}
                              .dump()});
  }
  if (auto committed = store_->Commit(std::move(batch)); !committed.ok()) {
    LogWarn("notification ", n.name,
            ": its progress is not stored: ", committed.status().message());
  }
}

json Notifier::Status() const {
  std::lock_guard<std::mutex> lock(mu_);
  json out = json::array();
  for (const auto& [scope, s] : states_) {
    json n = {{"name", scope.substr(scope.find('/') + 1)},
              {"tenant", scope.substr(0, scope.find('/'))},
              {"active", s.loaded},
              {"cursor", s.cursor},
              {"delivered", s.delivered},
              {"failed", s.failed}};
    if (s.pending) {
      n["pending"] = {{"event", s.pending->seq},
                      {"attempts", s.pending->attempts},
                      {"next_try_us", s.pending->next_try_us}};
    }
    out.push_back(n);
  }
  return out;
}

}  // namespace carve
