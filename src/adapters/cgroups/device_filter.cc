// A cgroup v2 device program, assembled here: cgroup v2 has no devices controller, so the kernel
// asks a BPF program attached to the cgroup on every open and mknod of a device node. The
// program is a few compare-and-jump instructions, so it is written out rather than compiled.
#include "adapters/cgroups/device_filter.h"

#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace carve {
namespace {

// struct bpf_cgroup_dev_ctx { u32 access_type /* access << 16 | type */; u32 major; u32 minor; }
constexpr int16_t kAccessTypeOffset = 0;
constexpr int16_t kMajorOffset = 4;
constexpr int16_t kMinorOffset = 8;
constexpr uint8_t kR0 = 0, kR1 = 1, kR2 = 2, kR4 = 4, kR5 = 5;

bpf_insn Insn(uint8_t code, uint8_t dst, uint8_t src, int16_t off, int32_t imm) {
  bpf_insn insn{};
  insn.code = code;
  insn.dst_reg = dst & 0xf;
  insn.src_reg = src & 0xf;
  insn.off = off;
  insn.imm = imm;
  return insn;
}

bpf_insn LoadWord(uint8_t dst, int16_t offset) {
  return Insn(BPF_LDX | BPF_MEM | BPF_W, dst, kR1, offset, 0);
}
bpf_insn JumpIf(uint8_t op, uint8_t reg, uint32_t value, int16_t off) {
  return Insn(BPF_JMP | op | BPF_K, reg, 0, off, static_cast<int32_t>(value));
}
bpf_insn Return(int32_t value) { return Insn(BPF_ALU64 | BPF_MOV | BPF_K, kR0, 0, 0, value); }
bpf_insn Exit() { return Insn(BPF_JMP | BPF_EXIT, 0, 0, 0, 0); }

long Bpf(int cmd, bpf_attr* attr) { return syscall(__NR_bpf, cmd, attr, sizeof(*attr)); }

std::string ErrnoText(int err) {
  char buf[128];
  return strerror_r(err, buf, sizeof(buf));
}

int LoadProgram(const std::vector<bpf_insn>& program, char* log, uint32_t log_size) {
  static const char kLicense[] = "Carve";
  bpf_attr attr{};
  attr.prog_type = BPF_PROG_TYPE_CGROUP_DEVICE;
  attr.insns = reinterpret_cast<uint64_t>(program.data());
  attr.insn_cnt = static_cast<uint32_t>(program.size());
  attr.license = reinterpret_cast<uint64_t>(kLicense);
  if (log != nullptr) {
    attr.log_buf = reinterpret_cast<uint64_t>(log);
    attr.log_size = log_size;
    attr.log_level = 1;
  }
  return static_cast<int>(Bpf(BPF_PROG_LOAD, &attr));
}

}  // namespace

std::vector<uint32_t> NvidiaMajors(absl::string_view proc_devices) {
  std::vector<uint32_t> majors = {195};
  bool chars = false;
  for (absl::string_view line : absl::StrSplit(proc_devices, '\n', absl::SkipEmpty())) {
    if (line == "Character devices:" || line == "Block devices:") {
      chars = line == "Character devices:";
      continue;
    }
    std::vector<absl::string_view> f = absl::StrSplit(line, ' ', absl::SkipEmpty());
    uint32_t major = 0;
    if (chars && f.size() == 2 && absl::SimpleAtoi(f[0], &major) &&
        absl::StartsWith(f[1], "nvidia")) {
      majors.push_back(major);
    }
  }
  std::sort(majors.begin(), majors.end());
  majors.erase(std::unique(majors.begin(), majors.end()), majors.end());
  return majors;
}

std::vector<bpf_insn> DeviceFilterProgram(const std::vector<uint32_t>& nvidia_majors,
                                          const std::vector<DeviceNumber>& allowed) {
  // Layout: 5 loads and tests, one jump per major, a jump to "allow", two instructions per
  // allowed device, then "deny" (r0 = 0) and "allow" (r0 = 1).
  const int check = 5 + static_cast<int>(nvidia_majors.size()) + 1;
  const int deny = check + 2 * static_cast<int>(allowed.size());
  const int allow = deny + 2;
  std::vector<bpf_insn> p;
  auto to = [&p](int target) {
    return static_cast<int16_t>(target - static_cast<int>(p.size()) - 1);
  };
  p.push_back(LoadWord(kR2, kAccessTypeOffset));
  p.push_back(Insn(BPF_ALU64 | BPF_AND | BPF_K, kR2, 0, 0, 0xffff));  // the device type
  p.push_back(JumpIf(BPF_JNE, kR2, BPF_DEVCG_DEV_CHAR, to(allow)));   // block devices: allow
  p.push_back(LoadWord(kR4, kMajorOffset));
  p.push_back(LoadWord(kR5, kMinorOffset));
  for (uint32_t major : nvidia_majors) p.push_back(JumpIf(BPF_JEQ, kR4, major, to(check)));
  p.push_back(Insn(BPF_JMP | BPF_JA, 0, 0, to(allow), 0));  // not an NVIDIA device
  for (const DeviceNumber& device : allowed) {
    p.push_back(JumpIf(BPF_JNE, kR4, device.major, 1));
    p.push_back(JumpIf(BPF_JEQ, kR5, device.minor, to(allow)));
  }
  p.push_back(Return(0));
  p.push_back(Exit());
  p.push_back(Return(1));
  p.push_back(Exit());
  return p;
}

absl::Status AttachDeviceFilter(const std::string& cgroup_dir,
                                const std::vector<uint32_t>& nvidia_majors,
                                const std::vector<DeviceNumber>& allowed) {
  std::vector<bpf_insn> program = DeviceFilterProgram(nvidia_majors, allowed);
  int prog = LoadProgram(program, nullptr, 0);
  if (prog < 0) {
    int err = errno;
    std::string log(1 << 16, '\0');
    if (LoadProgram(program, log.data(), static_cast<uint32_t>(log.size())) >= 0 || log[0] == 0) {
      log = "";
    }
    log.resize(strnlen(log.c_str(), log.size()));
    return absl::FailedPreconditionError(absl::StrCat(
        "loading the BPF device program: ", ErrnoText(err), log.empty() ? "" : ": ", log));
  }
  int cgroup = open(cgroup_dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (cgroup < 0) {
    int err = errno;
    close(prog);
    return absl::FailedPreconditionError(absl::StrCat("open ", cgroup_dir, ": ", ErrnoText(err)));
  }
  bpf_attr attr{};
  attr.target_fd = static_cast<uint32_t>(cgroup);
  attr.attach_bpf_fd = static_cast<uint32_t>(prog);
  attr.attach_type = BPF_CGROUP_DEVICE;
  attr.attach_flags = BPF_F_ALLOW_MULTI;
  long rc = Bpf(BPF_PROG_ATTACH, &attr);
  int err = errno;
  close(cgroup);
  close(prog);  // the attachment holds its own reference
  if (rc != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("attaching the BPF device program to ", cgroup_dir, ": ", ErrnoText(err)));
  }
  return absl::OkStatus();
}

}  // namespace carve
