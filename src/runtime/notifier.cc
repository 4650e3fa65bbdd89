#include "runtime/notifier.h"

#include <curl/curl.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <mutex>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
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
  if (!details.is_object()) details = json::object();
  // Written for a notification's wait_longer_than: only the notifications with that threshold.
  if (e.type == kWaitExceeded && !n.WantsWait(details.value("threshold_us", int64_t{0}))) {
    return std::nullopt;
  }
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
  // A queue's quota holds jobs back (exhausted) or no longer does: to the tenants that may use
  // the queue, whole (what `carve queues` shows them). Other queue.* events are admins'.
  if (e.type == "queue.quota-holds" || e.type == "queue.quota-frees") {
    if (!sources_.queue_user || !sources_.queue_user(e.subject.substr(6), n.tenant, n.project)) {
      return std::nullopt;
    }
    out.update({{"tenant", n.tenant}, {"reason", e.reason}, {"details", details}});
    return out;
  }
  // A platform event: only when it names jobs of the tenant, and then only those. (A count
  // under "jobs" is not a list of jobs: queue.quota-holds has one.)
  json own = json::array();
  const json jobs = details.value("jobs", json::array());
  if (!jobs.is_array()) return std::nullopt;
  for (const json& id : jobs) {
    if (!id.is_number_integer()) continue;
    auto [job_tenant, job_project] = sources_.job_owner(id.get<int64_t>());
    if (job_tenant == n.tenant && (n.project.empty() || job_project == n.project)) {
      own.push_back(id);
    }
  }
  if (own.empty()) return std::nullopt;
  out.update({{"tenant", n.tenant}, {"jobs", own}});
  // A maintenance window's times (not who planned it, nor why: the reason is the operator's).
  if (const json window = details.value("window", json::object()); window.is_object()) {
    for (const char* key : {"start_us", "end_us"}) {
      if (window.contains(key)) out["window"][key] = window[key];
    }
  }
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

namespace {

struct Answer {
  long status = 0;    // the HTTP status; 0 without a complete answer
  std::string error;  // why there was none
};

size_t Discard(char*, size_t size, size_t count, void*) { return size * count; }

// POSTs `body` to the notification's URL with a deadline over all of it (name lookup, connect,
// TLS handshake, request and answer): a receiver that trickles its answer, or its handshake, a
// byte at a time cannot hold the one delivery thread. The answer's body is read and dropped.
Answer Post(const NotificationConfig& n, const std::vector<std::string>& headers,
            const std::string& body, int64_t timeout_ms) {
  static std::once_flag init;
  std::call_once(init, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
  std::unique_ptr<CURL, decltype(&curl_easy_cleanup)> curl(curl_easy_init(), curl_easy_cleanup);
  if (!curl) return {0, "cannot start a request (curl_easy_init failed)"};
  curl_slist* list = nullptr;
  for (const std::string& h : headers) list = curl_slist_append(list, h.c_str());
  std::unique_ptr<curl_slist, decltype(&curl_slist_free_all)> header_list(list,
                                                                          curl_slist_free_all);
  // The URL was parsed at apply (notification_config.h): scheme, host, port and path.
  const std::string url =
      absl::StrCat(n.https ? "https://" : "http://", n.host, ":", n.port, n.path);
  CURL* c = curl.get();
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, header_list.get());
  curl_easy_setopt(c, CURLOPT_POSTFIELDS, body.data());
  curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, static_cast<long>(timeout_ms));
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, Discard);
  curl_easy_setopt(c, CURLOPT_USERAGENT, "carve-notifier");
  const CURLcode rc = curl_easy_perform(c);
  if (rc == CURLE_OPERATION_TIMEDOUT) {
    return {0, absl::StrCat("no complete answer within ", timeout_ms, " ms")};
  }
  if (rc != CURLE_OK) return {0, curl_easy_strerror(rc)};
  Answer a;
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &a.status);
  return a;
}

}  // namespace

bool Notifier::Attempt(const NotificationConfig& n, State& s) {
  Pending& p = *s.pending;
  const int64_t now = sources_.now_us();
  const std::vector<std::string> headers = {
      "Content-Type: application/json", absl::StrCat("X-Carve-Event: ", p.seq),
      absl::StrCat("X-Carve-Notification: ", n.name),
      absl::StrCat("X-Carve-Signature: ", Sign(n.secret, now / 1'000'000, p.body)),
      "Expect:"};  // no 100-continue round trip
  const Answer answer = Post(n, headers, p.body, options_.timeout_ms);
  json attempt = {{"time_us", now}, {"status", answer.status}};
  if (!answer.error.empty()) attempt["error"] = answer.error;
  p.attempts.push_back(attempt);
  const bool ok = answer.status >= 200 && answer.status < 300;
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
