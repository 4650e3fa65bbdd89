#include "runtime/api_client.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "httplib.h"

namespace carve {

using json = nlohmann::json;

namespace {

absl::Status FromHttp(int status, const std::string& body) {
  json j = json::parse(body, nullptr, false);
  std::string message = body;
  if (!j.is_discarded() && j.is_object() && j.contains("error") && j["error"].is_object()) {
    message = j["error"].value("message", body);
  }
  if (message.empty()) {
    message = absl::StrCat("the server answered HTTP ", status, " with no message");
  }
  switch (status) {
    case 400:
      return absl::InvalidArgumentError(message);
    case 401:
      return absl::UnauthenticatedError(message);
    case 403:
      return absl::PermissionDeniedError(message);
    case 404:
      return absl::NotFoundError(message);
    case 409:
      return absl::FailedPreconditionError(message);
    case 429:
      return absl::ResourceExhaustedError(message);
    case 503:
      return absl::UnavailableError(message);
    default:
      return absl::InternalError(absl::StrCat("HTTP ", status, ": ", message));
  }
}

template <typename Result>
absl::StatusOr<const httplib::Response*> Check(const Result& r, const std::string& server) {
  if (!r && r.error() == httplib::Error::SSLServerVerification) {
    return absl::UnavailableError(absl::StrCat(
        "the TLS certificate of the Carve server at ", server,
        " is not trusted or does not name it; pass --ca FILE (or set CARVE_CA) with its CA"));
  }
  if (!r && r.error() == httplib::Error::SSLLoadingCerts) {
    return absl::InvalidArgumentError("cannot load the CA file (--ca, CARVE_CA): not PEM?");
  }
  if (!r) {
    return absl::UnavailableError(absl::StrCat("cannot reach the Carve server at ", server, " (",
                                               httplib::to_string(r.error()),
                                               "); is `carve dev` or `carve server` running?"));
  }
  if (r->status >= 300) return FromHttp(r->status, r->body);
  return &r.value();
}

}  // namespace

ApiClient::ApiClient(const std::string& server, std::string token, const std::string& ca_file)
    : token_(std::move(token)), ca_file_(ca_file) {
  for (absl::string_view one : absl::StrSplit(server, ',', absl::SkipWhitespace())) {
    std::string s(absl::StripAsciiWhitespace(one));
    servers_.push_back(absl::StartsWith(s, "http") ? s : "http://" + s);
  }
  if (servers_.empty()) servers_.push_back("http://" + server);  // "" as before: fails to connect
  http_.resize(servers_.size());
}

ApiClient::~ApiClient() = default;

template <typename Call>
absl::StatusOr<const httplib::Response*> ApiClient::Send(Call call) {
  absl::Status last;
  for (size_t tries = 0; tries < servers_.size(); ++tries) {
    const size_t i = current_;
    if (http_[i] == nullptr) {
      auto c = std::make_unique<httplib::Client>(servers_[i]);
      c->enable_server_certificate_verification(true);
      if (!ca_file_.empty()) c->set_ca_cert_path(ca_file_);
      c->set_connection_timeout(2, 0);
      // httplib writes a request's head and body separately: without this a body waited for
      // the server's delayed ACK (40 ms) behind Nagle's algorithm.
      c->set_tcp_nodelay(true);
      c->set_read_timeout(30, 0);
      if (!token_.empty()) c->set_bearer_token_auth(token_);
      http_[i] = std::move(c);
    }
    auto r = std::make_unique<httplib::Result>(call(*http_[i]));
    // Not sent (nothing to repeat), or refused by a follower: the next server, or the leader.
    const bool unreachable = !*r && r->error() == httplib::Error::Connection;
    const std::string leader =
        *r && (*r)->status == 503 ? (*r)->get_header_value("X-Carve-Leader") : "";
    if (servers_.size() == 1 || (!unreachable && leader.empty())) {
      last_ = std::move(r);
      return Check(*last_, servers_[i]);
    }
    last = Check(*r, servers_[i]).status();
    auto named = std::find(servers_.begin(), servers_.end(), leader);
    current_ = named != servers_.end() && named - servers_.begin() != static_cast<ptrdiff_t>(i)
                   ? static_cast<size_t>(named - servers_.begin())
                   : (i + 1) % servers_.size();
  }
  return last;
}

absl::StatusOr<json> ApiClient::Get(const std::string& path) {
  auto res = Send([&](httplib::Client& c) { return c.Get(path); });
  if (!res.ok()) return res.status();
  json j = json::parse((*res)->body, nullptr, false);
  if (j.is_discarded()) return absl::InternalError("the server sent invalid JSON");
  return j;
}

absl::StatusOr<json> ApiClient::Post(const std::string& path, const json& body,
                                     const std::map<std::string, std::string>& headers) {
  httplib::Headers h;
  for (const auto& [k, v] : headers) h.emplace(k, v);
  const std::string text = body.dump();
  auto res = Send([&](httplib::Client& c) { return c.Post(path, h, text, "application/json"); });
  if (!res.ok()) return res.status();
  json j = json::parse((*res)->body, nullptr, false);
  if (j.is_discarded()) return absl::InternalError("the server sent invalid JSON");
  return j;
}

absl::StatusOr<std::string> ApiClient::GetText(const std::string& path,
                                               std::map<std::string, std::string>* headers) {
  auto res = Send([&](httplib::Client& c) { return c.Get(path); });
  if (!res.ok()) return res.status();
  if (headers) {
    for (const auto& [k, v] : (*res)->headers) (*headers)[k] = v;
  }
  return (*res)->body;
}

absl::StatusOr<json> ApiClient::PostText(const std::string& path, const std::string& body) {
  auto res =
      Send([&](httplib::Client& c) { return c.Post(path, body, "application/octet-stream"); });
  if (!res.ok()) return res.status();
  return json::parse((*res)->body, nullptr, false);
}

}  // namespace carve
