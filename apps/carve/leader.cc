#include "leader.h"

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <utility>

#include "absl/strings/str_cat.h"
#include "client_common.h"
#include "runtime/clock.h"
#include "runtime/follower_server.h"
#include "runtime/log.h"

namespace carve::app {

Leadership::Leadership(std::unique_ptr<PostgresLease> lease, int64_t term)
    : lease_(std::move(lease)), term_(term) {}

Leadership::~Leadership() { Stop(); }

void Leadership::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (renewer_.joinable()) renewer_.join();
  if (watchdog_.joinable()) watchdog_.join();
}

void Leadership::StartRenewing() {
  renewed_ns_ = SteadyNs();  // just taken: a whole lease from about now
  renewer_ = std::thread([this] { Renew(); });
  watchdog_ = std::thread([this] { Watch(); });
}

void Leadership::Watch() {
  const int64_t lease_ns = lease_->lease_ms() * 1'000'000;
  std::unique_lock<std::mutex> lock(mu_);
  while (!cv_.wait_for(lock, std::chrono::milliseconds(lease_->lease_ms() / 6),
                       [this] { return stopping_; })) {
    if (SteadyNs() - renewed_ns_ > lease_ns - lease_ns / 6) {
      LogError("the leader's lease (term ", term_, ") was not renewed in time; stopping before ",
               "a follower can take over (restart it: it will follow)");
      std::_Exit(75);
    }
  }
}

void Leadership::Renew() {
  const auto every = std::chrono::milliseconds(lease_->lease_ms() / 3);
  std::unique_lock<std::mutex> lock(mu_);
  while (!cv_.wait_for(lock, every, [this] { return stopping_; })) {
    lock.unlock();
    const int64_t sent = SteadyNs();
    absl::Status s = lease_->Renew(term_);
    // Unreachable for a while is not lost yet: the watchdog stops it before the lease runs out.
    if (s.code() == absl::StatusCode::kFailedPrecondition) {
      LogError("lost the leader's lease (term ", term_, "): ", s.message(),
               "; stopping: its late commits are refused (restart it: it will follow)");
      std::_Exit(75);
    }
    if (s.ok()) {
      renewed_ns_ = sent;
    } else {
      LogWarn("cannot renew the leader's lease yet: ", s.message());
    }
    lock.lock();
  }
}

void Leadership::Release() {
  Stop();
  if (absl::Status s = lease_->Release(term_); !s.ok()) {
    LogWarn("could not give the lease up (a follower takes over when it runs out): ", s.message());
  } else {
    LogInfo("gave the leader's lease (term ", term_, ") up");
  }
}

std::unique_ptr<Leadership> FollowUntilLeader(const LeaderSettings& s, int& listen_fd,
                                              const std::function<void()>& following) {
  auto lease = PostgresLease::Open(s.url, s.holder, s.address, s.lease_ms);
  if (!lease.ok()) Die(lease.status());
  std::unique_ptr<FollowerServer> follower;
  const int64_t poll_ms = std::max<int64_t>(50, s.lease_ms / 6);
  for (;;) {
    // One read per poll: whether the lease is this server's own, and whom followers name.
    auto row = (*lease)->Current();
    const bool own =
        row.ok() && row->has_value() && (*row)->holder == s.holder && (*row)->expires_in_ms > 0;
    absl::StatusOr<int64_t> term = (*lease)->TryAcquire();
    if (own && term.ok() && *term > 0) {
      LogWarn("took over the unexpired lease of ", s.holder, ": a restart of this server, or ",
              "another server with the same name (give each server its own --name)");
    }
    if (term.ok() && *term > 0) {
      if (follower) {
        follower->Stop();  // closes the socket: the leader's API listens anew
        listen_fd = -1;
      }
      LogInfo("leads as ", s.holder, " (term ", *term, ")");
      auto lead = std::make_unique<Leadership>(*std::move(lease), *term);
      lead->StartRenewing();
      return lead;
    }
    if (!term.ok()) LogWarn("cannot take the leader's lease: ", term.status().message());
    if (!follower) {
      follower = std::make_unique<FollowerServer>(s.tls_cert, s.tls_key);
      if (absl::Status st = follower->Start(listen_fd); !st.ok()) Die(st);
      LogInfo("follows as ", s.holder, ": another server holds the leader's lease");
      following();
    }
    if (row.ok() && row->has_value()) {
      // An expired lease names nobody: clients would be sent to a server that is gone.
      follower->SetLeader((*row)->expires_in_ms > 0 ? (*row)->address : "", (*row)->term);
    }
    if (StopSignalled(poll_ms)) {
      follower->Stop();
      listen_fd = -1;
      return nullptr;
    }
  }
}

}  // namespace carve::app
