#include "runtime/api_socket.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <type_traits>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "httplib.h"

namespace carve {

namespace {

struct AddrInfo {
  addrinfo* list = nullptr;
  ~AddrInfo() {
    if (list != nullptr) freeaddrinfo(list);
  }
};

int Resolve(const std::string& host, int port, AddrInfo& out) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  return getaddrinfo(host.empty() ? nullptr : host.c_str(), std::to_string(port).c_str(), &hints,
                     &out.list);
}

// A bound, listening socket for one address, or -1 with errno set.
int BindOne(const addrinfo& a) {
  int fd = ::socket(a.ai_family, a.ai_socktype | SOCK_CLOEXEC, a.ai_protocol);
  if (fd < 0) return -1;
  int yes = 1;
  if (::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes)) != 0 ||
      ::bind(fd, a.ai_addr, a.ai_addrlen) != 0 || ::listen(fd, 128) != 0) {
    int err = errno;
    ::close(fd);
    errno = err;
    return -1;
  }
  return fd;
}

// An accepted connection as httplib reads it (plain or TLS), keeping the bytes of the request
// head that httplib has read since StartHead().
class RecordingStream : public httplib::Stream {
 public:
  RecordingStream(int fd, SSL* ssl, int read_ms, int write_ms)
      : fd_(fd), ssl_(ssl), read_ms_(read_ms), write_ms_(write_ms) {}

  bool is_readable() const override { return Buffered() || Wait(POLLIN, read_ms_); }
  bool is_writable() const override { return Wait(POLLOUT, write_ms_); }
  ssize_t read(char* ptr, size_t size) override;
  ssize_t write(const char* ptr, size_t size) override;
  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    Address(&getpeername, ip, port);
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    Address(&getsockname, ip, port);
  }
  socket_t socket() const override { return fd_; }

  bool Buffered() const { return off_ < len_ || (ssl_ != nullptr && SSL_pending(ssl_) > 0); }
  void StartHead() {
    head_.clear();
    recording_ = true;
    overflow_ = false;
  }
  // The request line and headers, when they were read in full.
  const std::string* head() const { return recording_ || overflow_ ? nullptr : &head_; }

 private:
  static constexpr size_t kMaxHead = 64 << 10;

  bool Wait(short events, int ms) const {
    pollfd p{fd_, events, 0};
    int n;
    do {
      n = ::poll(&p, 1, ms);
    } while (n < 0 && errno == EINTR);
    return n > 0;
  }
  bool Fill();
  void Record(const char* p, size_t n);
  template <typename Fn>
  void Address(Fn fn, std::string& ip, int& port) const {
    sockaddr_storage addr{};
    socklen_t len = sizeof(addr);
    char host[NI_MAXHOST] = "";
    char serv[NI_MAXSERV] = "";
    if (fn(fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0 ||
        getnameinfo(reinterpret_cast<sockaddr*>(&addr), len, host, sizeof(host), serv, sizeof(serv),
                    NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
      return;
    }
    ip = host;
    port = std::atoi(serv);
  }

  int fd_;
  SSL* ssl_;
  int read_ms_;
  int write_ms_;
  char buf_[4096];
  size_t off_ = 0;
  size_t len_ = 0;
  bool recording_ = false;
  bool overflow_ = false;
  std::string head_;
};

bool RecordingStream::Fill() {
  if (!is_readable()) return false;
  ssize_t n;
  if (ssl_ != nullptr) {
    n = SSL_read(ssl_, buf_, sizeof(buf_));
  } else {
    do {
      n = ::recv(fd_, buf_, sizeof(buf_), 0);
    } while (n < 0 && errno == EINTR);
  }
  if (n <= 0) return false;
  off_ = 0;
  len_ = static_cast<size_t>(n);
  return true;
}

ssize_t RecordingStream::read(char* ptr, size_t size) {
  if (off_ == len_ && !Fill()) return 0;
  size_t n = std::min(size, len_ - off_);
  std::memcpy(ptr, buf_ + off_, n);
  off_ += n;
  Record(ptr, n);
  return static_cast<ssize_t>(n);
}

// httplib reads the head a byte at a time, so the blank line that ends it ends the record.
void RecordingStream::Record(const char* p, size_t n) {
  if (!recording_) return;
  if (head_.size() + n > kMaxHead) {  // too long to keep: no Authorization is taken from it
    head_.clear();
    recording_ = false;
    overflow_ = true;
    return;
  }
  head_.append(p, n);
  if (absl::EndsWith(head_, "\r\n\r\n")) recording_ = false;
}

ssize_t RecordingStream::write(const char* ptr, size_t size) {
  if (!is_writable()) return -1;
  if (ssl_ != nullptr) {
    int n = SSL_write(ssl_, ptr, static_cast<int>(size));
    return n > 0 ? n : -1;
  }
  ssize_t n;
  do {
    n = ::send(fd_, ptr, size, MSG_NOSIGNAL);
  } while (n < 0 && errno == EINTR);
  return n;
}

// Replaces the Authorization values httplib decoded with the bytes the client sent, read from the
// head the way httplib reads it: lines end in CRLF (others are skipped), the value starts after
// the colon and its spaces and ends before trailing spaces and tabs.
void UseRawAuthorization(const RecordingStream& strm, httplib::Request& req) {
  req.headers.erase("Authorization");
  const std::string* head = strm.head();
  if (head == nullptr) return;
  size_t pos = head->find('\n');  // past the request line
  while (pos != std::string::npos && pos + 1 < head->size()) {
    size_t start = pos + 1;
    pos = head->find('\n', start);
    if (pos == std::string::npos || pos == start || (*head)[pos - 1] != '\r') continue;
    absl::string_view line(head->data() + start, pos - 1 - start);
    if (line.empty()) break;
    size_t colon = line.find(':');
    if (colon == absl::string_view::npos ||
        !absl::EqualsIgnoreCase(line.substr(0, colon), "Authorization")) {
      continue;
    }
    absl::string_view value = line.substr(colon + 1);
    while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) {
      value.remove_prefix(1);
    }
    while (!value.empty() && (value.back() == ' ' || value.back() == '\t')) value.remove_suffix(1);
    req.headers.emplace("Authorization", std::string(value));
  }
}

class Adoptable {
 public:
  virtual ~Adoptable() = default;
  virtual void Adopt(int fd) = 0;
};

// httplib's server with its per-connection loop replaced (the same keep-alive rules) so that the
// stream keeps the raw head; TLS servers do their own handshake on the server's SSL_CTX.
template <typename Base>
class RawAuthServer : public Base, public Adoptable {
 public:
  using Base::Base;
  void Adopt(int fd) override { this->svr_sock_ = fd; }

 private:
  bool process_and_close_socket(socket_t sock) override {
    timeval rcv{static_cast<time_t>(this->read_timeout_sec_), 0};
    timeval snd{static_cast<time_t>(this->write_timeout_sec_), 0};
    ::setsockopt(sock, SOL_SOCKET, SO_RCVTIMEO, &rcv, sizeof(rcv));
    ::setsockopt(sock, SOL_SOCKET, SO_SNDTIMEO, &snd, sizeof(snd));
    // httplib writes a response's head and body separately: with Nagle's algorithm the body
    // waited for the client's delayed ACK, 40 ms per request on a kept-alive connection.
    int nodelay = 1;
    ::setsockopt(sock, IPPROTO_TCP, TCP_NODELAY, &nodelay, sizeof(nodelay));
    SSL* ssl = nullptr;
    bool ret = false;
    if constexpr (std::is_same_v<Base, httplib::SSLServer>) {
      ssl = SSL_new(this->ssl_context());
      if (ssl != nullptr && SSL_set_fd(ssl, sock) == 1 && SSL_accept(ssl) == 1) {
        ret = Serve(sock, ssl);
        SSL_shutdown(ssl);
      }
      SSL_free(ssl);
    } else {
      ret = Serve(sock, nullptr);
    }
    ::shutdown(sock, SHUT_RDWR);
    ::close(sock);
    return ret;
  }

  // Waits up to the keep-alive timeout for the next request, in slices so a stop is seen.
  bool NextRequest(const RecordingStream& strm, int sock) {
    if (strm.Buffered()) return true;
    for (time_t waited_ms = 0; waited_ms < this->keep_alive_timeout_sec_ * 1000; waited_ms += 100) {
      if (this->svr_sock_ == INVALID_SOCKET) return false;
      pollfd p{sock, POLLIN, 0};
      int n = ::poll(&p, 1, 100);
      if (n > 0) return true;
      if (n < 0 && errno != EINTR) return false;
    }
    return false;
  }

  bool Serve(int sock, SSL* ssl) {
    RecordingStream strm(sock, ssl, static_cast<int>(this->read_timeout_sec_ * 1000),
                         static_cast<int>(this->write_timeout_sec_ * 1000));
    bool ret = false;
    for (size_t left = this->keep_alive_max_count_; left > 0 && NextRequest(strm, sock); --left) {
      strm.StartHead();
      bool closed = false;
      ret = this->process_request(strm, left == 1, closed, [&strm](httplib::Request& req) {
        UseRawAuthorization(strm, req);
      });
      if (!ret || closed) break;
    }
    return ret;
  }
};

}  // namespace

absl::StatusOr<int> ListenExclusive(const std::string& host, int port) {
  AddrInfo addrs;
  if (int rc = Resolve(host, port, addrs); rc != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--listen ", host, ":", port, ": ", gai_strerror(rc)));
  }
  int err = 0;
  for (const addrinfo* a = addrs.list; a != nullptr; a = a->ai_next) {
    int fd = BindOne(*a);
    if (fd >= 0) return fd;
    err = errno;
  }
  if (err == EADDRINUSE) {
    return absl::FailedPreconditionError(
        absl::StrCat("port ", port, " is in use (another carve server?); try --listen"));
  }
  return absl::UnavailableError(
      absl::StrCat("cannot listen on ", host, ":", port, ": ", std::strerror(err)));
}

int LocalPort(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return -1;
  if (addr.ss_family == AF_INET) return ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
  if (addr.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port);
  return -1;
}

bool IsLoopbackHost(const std::string& host) {
  AddrInfo addrs;
  if (host.empty() || Resolve(host, 0, addrs) != 0) return false;
  for (const addrinfo* a = addrs.list; a != nullptr; a = a->ai_next) {
    if (a->ai_family == AF_INET) {
      uint32_t ip = ntohl(reinterpret_cast<const sockaddr_in*>(a->ai_addr)->sin_addr.s_addr);
      if ((ip >> 24) != 127) return false;
    } else if (a->ai_family == AF_INET6) {
      const in6_addr& ip = reinterpret_cast<const sockaddr_in6*>(a->ai_addr)->sin6_addr;
      if (!IN6_IS_ADDR_LOOPBACK(&ip)) return false;
    } else {
      return false;
    }
  }
  return true;
}

absl::Status CheckTlsFiles(const std::string& cert, const std::string& key) {
  if (cert.empty() != key.empty()) {
    return absl::InvalidArgumentError("TLS needs both --tls-cert and --tls-key");
  }
  std::unique_ptr<SSL_CTX, decltype(&SSL_CTX_free)> ctx(SSL_CTX_new(TLS_server_method()),
                                                        &SSL_CTX_free);
  if (SSL_CTX_use_certificate_chain_file(ctx.get(), cert.c_str()) != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--tls-cert ", cert, ": not a readable PEM certificate"));
  }
  // No passphrase callback: an encrypted key is refused instead of prompting.
  FILE* f = std::fopen(key.c_str(), "r");
  EVP_PKEY* pkey = f == nullptr
                       ? nullptr
                       : PEM_read_PrivateKey(
                             f, nullptr, [](char*, int, int, void*) { return 0; }, nullptr);
  if (f != nullptr) std::fclose(f);
  if (pkey == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("--tls-key ", key, ": not a readable PEM private key (without a passphrase)"));
  }
  int used = SSL_CTX_use_PrivateKey(ctx.get(), pkey);
  EVP_PKEY_free(pkey);
  if (used != 1 || SSL_CTX_check_private_key(ctx.get()) != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--tls-key ", key, " is not the key of --tls-cert ", cert));
  }
  return absl::OkStatus();
}

std::unique_ptr<httplib::Server> NewApiHttpServer(const std::string& cert, const std::string& key) {
  if (cert.empty()) return std::make_unique<RawAuthServer<httplib::Server>>();
  auto server = std::make_unique<RawAuthServer<httplib::SSLServer>>(cert.c_str(), key.c_str());
  if (server->is_valid()) SSL_CTX_set_min_proto_version(server->ssl_context(), TLS1_2_VERSION);
  return server;
}

void AdoptListenSocket(httplib::Server& server, int fd) {
  dynamic_cast<Adoptable&>(server).Adopt(fd);
}

}  // namespace carve
