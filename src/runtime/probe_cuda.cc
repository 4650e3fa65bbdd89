// The probe's real GPUs: the CUDA driver API through dlopen("libcuda.so.1"), so that the binary
// builds and runs where no driver is installed (it then says why it saw no GPU).
#include <dlfcn.h>

#include <cstddef>

#include "absl/strings/str_cat.h"
#include "runtime/probe.h"
#include "runtime/probe_kernel.h"

namespace carve {

using json = nlohmann::json;

namespace {

using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
using CUcontext = void*;
using CUmodule = void*;
using CUfunction = void*;
using CUstream = void*;
constexpr int kMultiprocessorCount = 16;  // CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT

struct CudaApi {
  CUresult (*init)(unsigned) = nullptr;
  CUresult (*device_count)(int*) = nullptr;
  CUresult (*device_get)(CUdevice*, int) = nullptr;
  CUresult (*device_name)(char*, int, CUdevice) = nullptr;
  CUresult (*total_mem)(size_t*, CUdevice) = nullptr;
  CUresult (*ctx_retain)(CUcontext*, CUdevice) = nullptr;
  CUresult (*ctx_set)(CUcontext) = nullptr;
  CUresult (*mem_alloc)(CUdeviceptr*, size_t) = nullptr;
  CUresult (*mem_free)(CUdeviceptr) = nullptr;
  CUresult (*mem_info)(size_t*, size_t*) = nullptr;
  CUresult (*error_string)(CUresult, const char**) = nullptr;
  CUresult (*attribute)(int*, int, CUdevice) = nullptr;
  CUresult (*module_load)(CUmodule*, const void*) = nullptr;
  CUresult (*module_function)(CUfunction*, CUmodule, const char*) = nullptr;
  CUresult (*launch)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                     unsigned, CUstream, void**, void**) = nullptr;
  CUresult (*synchronize)() = nullptr;

  std::string Error(CUresult r) const {
    const char* text = nullptr;
    if (error_string != nullptr) error_string(r, &text);
    return absl::StrCat("CUDA error ", r, text != nullptr ? absl::StrCat(" (", text, ")") : "");
  }
};

template <typename F>
bool Bind(void* lib, const char* name, F& f) {
  f = reinterpret_cast<F>(::dlsym(lib, name));
  return f != nullptr;
}

absl::StatusOr<const CudaApi*> LoadCuda() {
  static CudaApi api;
  static absl::Status status = [] {
    void* lib = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr)
      return absl::UnavailableError(absl::StrCat("no CUDA driver: ", ::dlerror()));
    bool ok =
        Bind(lib, "cuInit", api.init) && Bind(lib, "cuDeviceGetCount", api.device_count) &&
        Bind(lib, "cuDeviceGet", api.device_get) && Bind(lib, "cuDeviceGetName", api.device_name) &&
        Bind(lib, "cuDeviceTotalMem_v2", api.total_mem) &&
        Bind(lib, "cuDevicePrimaryCtxRetain", api.ctx_retain) &&
        Bind(lib, "cuCtxSetCurrent", api.ctx_set) && Bind(lib, "cuMemAlloc_v2", api.mem_alloc) &&
        Bind(lib, "cuMemFree_v2", api.mem_free) && Bind(lib, "cuMemGetInfo_v2", api.mem_info) &&
        Bind(lib, "cuGetErrorString", api.error_string) &&
        Bind(lib, "cuDeviceGetAttribute", api.attribute) &&
        Bind(lib, "cuModuleLoadData", api.module_load) &&
        Bind(lib, "cuModuleGetFunction", api.module_function) &&
        Bind(lib, "cuLaunchKernel", api.launch) && Bind(lib, "cuCtxSynchronize", api.synchronize);
    if (!ok)
      return absl::UnavailableError("libcuda.so.1 lacks a driver API function the probe uses");
    if (CUresult r = api.init(0); r != 0) {
      return absl::UnavailableError(absl::StrCat("cuInit: ", api.Error(r)));
    }
    return absl::OkStatus();
  }();
  if (!status.ok()) return status;
  return &api;
}

// One visible GPU (ordinal as CUDA numbers what CUDA_VISIBLE_DEVICES lets it see).
class CudaDevice : public ProbeDevice {
 public:
  CudaDevice(const CudaApi* api, int ordinal, CUdevice device, CUcontext context)
      : api_(api), id_(absl::StrCat("cuda:", ordinal)), device_(device), context_(context) {}
  ~CudaDevice() override {
    Release();
    if (out_ != 0) api_->mem_free(out_);
  }
  json Describe() const override {
    char name[256] = {};
    size_t total = 0, free = 0;
    api_->device_name(name, sizeof(name), device_);
    api_->total_mem(&total, device_);
    api_->ctx_set(context_);
    size_t total_ctx = 0;
    bool info = api_->mem_info(&free, &total_ctx) == 0;
    return {{"id", id_},
            {"source", "cuda"},
            {"name", name},
            {"total_mib", total >> 20},
            {"free_mib", info ? json(free >> 20) : json()}};
  }
  const std::string& id() const override { return id_; }
  absl::Status Take(int64_t mib) override {
    api_->ctx_set(context_);
    CUdeviceptr p = 0;
    if (CUresult r = api_->mem_alloc(&p, static_cast<size_t>(mib) << 20); r != 0) {
      return absl::ResourceExhaustedError(
          absl::StrCat("cuMemAlloc of ", mib, " MiB: ", api_->Error(r)));
    }
    taken_.push_back(p);
    return absl::OkStatus();
  }
  void Release() override {
    api_->ctx_set(context_);
    for (CUdeviceptr p : taken_) api_->mem_free(p);
    taken_.clear();
  }
  // The kernel over every multiprocessor, and its wait; the module is loaded at the first call.
  absl::Status Spin() override {
    api_->ctx_set(context_);
    if (function_ == nullptr) {
      if (absl::Status st = Load(); !st.ok()) return st;
    }
    unsigned iterations = kProbeKernelIterations;
    void* params[] = {&out_, &iterations};
    if (CUresult r = api_->launch(function_, blocks_, 1, 1, kProbeKernelThreads, 1, 1, 0, nullptr,
                                  params, nullptr);
        r != 0) {
      return absl::InternalError(absl::StrCat("cuLaunchKernel: ", api_->Error(r)));
    }
    if (CUresult r = api_->synchronize(); r != 0) {
      return absl::InternalError(absl::StrCat("the kernel: ", api_->Error(r)));
    }
    return absl::OkStatus();
  }

 private:
  absl::Status Load() {
    int sms = 0;
    if (CUresult r = api_->attribute(&sms, kMultiprocessorCount, device_); r != 0 || sms <= 0) {
      return absl::InternalError(absl::StrCat("the multiprocessor count: ", api_->Error(r)));
    }
    CUmodule module = nullptr;
    if (CUresult r = api_->module_load(&module, kProbeKernelPtx); r != 0) {
      return absl::InternalError(absl::StrCat("cuModuleLoadData (the PTX): ", api_->Error(r)));
    }
    blocks_ = static_cast<unsigned>(sms * kProbeKernelBlocksPerSm);
    const size_t bytes = size_t{blocks_} * kProbeKernelThreads * sizeof(float);
    if (CUresult r = api_->mem_alloc(&out_, bytes); r != 0) {
      return absl::ResourceExhaustedError(
          absl::StrCat("cuMemAlloc of the kernel's output: ", api_->Error(r)));
    }
    if (CUresult r = api_->module_function(&function_, module, kProbeKernelName); r != 0) {
      return absl::InternalError(absl::StrCat("cuModuleGetFunction: ", api_->Error(r)));
    }
    return absl::OkStatus();
  }

  const CudaApi* api_;
  std::string id_;
  CUdevice device_;
  CUcontext context_;
  std::vector<CUdeviceptr> taken_;
  CUfunction function_ = nullptr;
  CUdeviceptr out_ = 0;
  unsigned blocks_ = 0;
};

}  // namespace

absl::StatusOr<std::vector<std::unique_ptr<ProbeDevice>>> CudaProbeDevices() {
  auto api = LoadCuda();
  if (!api.ok()) return api.status();
  int count = 0;
  if (CUresult r = (*api)->device_count(&count); r != 0) {
    return absl::UnavailableError("cuDeviceGetCount: " + (*api)->Error(r));
  }
  std::vector<std::unique_ptr<ProbeDevice>> out;
  for (int i = 0; i < count; ++i) {
    CUdevice device = 0;
    CUcontext context = nullptr;
    if (CUresult r = (*api)->device_get(&device, i); r != 0) {
      return absl::UnavailableError(absl::StrCat("cuDeviceGet(", i, "): ", (*api)->Error(r)));
    }
    if (CUresult r = (*api)->ctx_retain(&context, device); r != 0) {
      return absl::UnavailableError(
          absl::StrCat("cuDevicePrimaryCtxRetain(", i, "): ", (*api)->Error(r)));
    }
    out.push_back(std::make_unique<CudaDevice>(*api, i, device, context));
  }
  if (out.empty()) return absl::UnavailableError("the CUDA driver sees no GPU");
  return out;
}

}  // namespace carve
