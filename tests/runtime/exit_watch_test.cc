#include "runtime/exit_watch.h"

#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <vector>

namespace carve {
namespace {

// A child that lives until the write end of its pipe closes (the test's `Release`).
struct Child {
  pid_t pid = -1;
  int release = -1;
};

Child Blocked() {
  int fds[2];
  if (::pipe(fds) != 0) return {};
  pid_t pid = ::fork();
  if (pid == 0) {
    // Only its own read end: a write end of another child's pipe would keep that child alive.
    for (int fd = 3; fd < 1024; ++fd) {
      if (fd != fds[0]) ::close(fd);
    }
    char c;
    while (::read(fds[0], &c, 1) > 0) {
    }
    ::_exit(0);
  }
  ::close(fds[0]);
  return {pid, fds[1]};
}

void Release(Child& c) {
  ::close(c.release);
  c.release = -1;
}

int Reap(pid_t pid) {
  int status = 0;
  ::waitpid(pid, &status, 0);
  return status;
}

class ExitWatchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    int fd = static_cast<int>(::syscall(SYS_pidfd_open, ::getpid(), 0));
    if (fd < 0) GTEST_SKIP() << "no pidfd_open on this kernel: the agent polls instead";
    ::close(fd);
  }

  // Waits (up to 10 s, a bound for a broken watch, not a timing) until `count` ends are seen.
  bool SawEnds(size_t count) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(10), [&] { return ended_.size() >= count; });
  }

  std::vector<int64_t> Ended() {
    std::lock_guard<std::mutex> lock(mu_);
    return ended_;
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<int64_t> ended_;
  ExitWatch watch_{[this](int64_t pid) {
    std::lock_guard<std::mutex> lock(mu_);
    ended_.push_back(pid);
    cv_.notify_all();
  }};
};

TEST_F(ExitWatchTest, ReportsAnExitAsItHappensAndLeavesReapingToTheCaller) {
  Child c = Blocked();
  ASSERT_GT(c.pid, 0);
  ASSERT_TRUE(watch_.Watch(c.pid));
  EXPECT_EQ(watch_.watched(), 1u);
  EXPECT_TRUE(Ended().empty());  // alive: blocked on its pipe
  Release(c);
  ASSERT_TRUE(SawEnds(1));
  EXPECT_EQ(Ended(), std::vector<int64_t>{c.pid});
  EXPECT_EQ(watch_.watched(), 0u);
  // Still ours to reap, with its status.
  int status = Reap(c.pid);
  EXPECT_TRUE(WIFEXITED(status));
}

TEST_F(ExitWatchTest, AProcessThatAlreadyExitedIsReportedAtOnce) {
  Child c = Blocked();
  ASSERT_GT(c.pid, 0);
  Release(c);
  siginfo_t info{};
  ASSERT_EQ(::waitid(P_PID, static_cast<id_t>(c.pid), &info, WEXITED | WNOWAIT), 0);  // a zombie
  ASSERT_TRUE(watch_.Watch(c.pid));
  ASSERT_TRUE(SawEnds(1));
  EXPECT_EQ(Ended(), std::vector<int64_t>{c.pid});
  Reap(c.pid);
}

TEST_F(ExitWatchTest, EachOfSeveralProcessesIsReportedOnceInTheOrderTheyEnd) {
  Child a = Blocked();
  Child b = Blocked();
  ASSERT_TRUE(watch_.Watch(a.pid));
  ASSERT_TRUE(watch_.Watch(b.pid));
  Release(b);
  ASSERT_TRUE(SawEnds(1));
  Release(a);
  ASSERT_TRUE(SawEnds(2));
  EXPECT_EQ(Ended(), (std::vector<int64_t>{b.pid, a.pid}));
  Reap(a.pid);
  Reap(b.pid);
}

TEST_F(ExitWatchTest, AForgottenProcessIsNotReported) {
  Child a = Blocked();
  Child b = Blocked();
  ASSERT_TRUE(watch_.Watch(a.pid));
  ASSERT_TRUE(watch_.Watch(b.pid));
  watch_.Forget(a.pid);
  EXPECT_EQ(watch_.watched(), 1u);
  Release(a);
  Reap(a.pid);  // a ended before b: had it still been watched, it would come first
  Release(b);
  ASSERT_TRUE(SawEnds(1));
  EXPECT_EQ(Ended(), std::vector<int64_t>{b.pid});
  Reap(b.pid);
}

TEST_F(ExitWatchTest, APidThatIsNotThereCannotBeWatched) {
  Child c = Blocked();
  Release(c);
  Reap(c.pid);  // reaped: the pid names no process now
  EXPECT_FALSE(watch_.Watch(c.pid));
  EXPECT_FALSE(watch_.Watch(0));
  EXPECT_FALSE(watch_.Watch(-5));
  EXPECT_EQ(watch_.watched(), 0u);
}

}  // namespace
}  // namespace carve
