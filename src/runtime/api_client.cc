#include "runtime/api_client.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
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
    : server_(absl::StartsWith(server, "http") ? server : "http://" + server),
      token_(std::move(token)),
      http_(std::make_unique<httplib::Client>(server_)) {
  http_->enable_server_certificate_verification(true);
  if (!ca_file.empty()) http_->set_ca_cert_path(ca_file);
  http_->set_connection_timeout(2, 0);
  // httplib writes a request's head and body separately: without this a body waited for the
  // server's delayed ACK (40 ms) behind Nagle's algorithm.
  http_->set_tcp_nodelay(true);
  http_->set_read_timeout(30, 0);
  if (!token_.empty()) http_->set_bearer_token_auth(token_);
}

ApiClient::~ApiClient() = default;

absl::StatusOr<json> ApiClient::Get(const std::string& path) {
  auto r = http_->Get(path);
  auto res = Check(r, server_);
  if (!res.ok()) return res.status();
  json j = json::parse((*res)->body, nullptr, false);
  if (j.is_discarded()) return absl::InternalError("the server sent invalid JSON");
  return j;
}

absl::StatusOr<json> ApiClient::Post(const std::string& path, const json& body,
                                     const std::map<std::string, std::string>& headers) {
  httplib::Headers h;
  for (const auto& [k, v] : headers) h.emplace(k, v);
  auto r = http_->Post(path, h, body.dump(), "application/json");
  auto res = Check(r, server_);
  if (!res.ok()) return res.status();
  json j = json::parse((*res)->body, nullptr, false);
  if (j.is_discarded()) return absl::InternalError("the server sent invalid JSON");
  return j;
}

absl::StatusOr<std::string> ApiClient::GetText(const std::string& path,
                                               std::map<std::string, std::string>* headers) {
  auto r = http_->Get(path);
  auto res = Check(r, server_);
  if (!res.ok()) return res.status();
  if (headers) {
    for (const auto& [k, v] : (*res)->headers) (*headers)[k] = v;
  }
  return (*res)->body;
}

absl::StatusOr<json> ApiClient::PostText(const std::string& path, const std::string& body) {
  auto r = http_->Post(path, body, "application/octet-stream");
  auto res = Check(r, server_);
  if (!res.ok()) return res.status();
  return json::parse((*res)->body, nullptr, false);
}

}  // namespace carve
