#include "cuda/driver_probe.h"

#include <dlfcn.h>

namespace gcfs {

DriverState probe_nvidia_driver() {
  DriverState s;
  void* lib = ::dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
  if (!lib) return s;
  s.library_found = true;
  // CUresult cuDriverGetVersion(int*): needs no cuInit, so it initialises nothing (no GPU context
  // in a process that may fork a daemon later).
  using GetVersion = int (*)(int*);
  if (auto fn = reinterpret_cast<GetVersion>(::dlsym(lib, "cuDriverGetVersion"))) {
    int v = 0;
    if (fn(&v) == 0) s.cuda_version = v;
  }
  ::dlclose(lib);
  return s;
}

std::string cuda_version_text(int v) { return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10); }

std::string describe_driver_problem(const DriverState& s, int needed) {
  if (!s.library_found) return "no NVIDIA GPU/driver found (the NVIDIA driver's libcuda.so.1 is not installed)";
  if (needed > 0 && s.cuda_version > 0 && s.cuda_version < needed)
    return "the NVIDIA driver is too old for this build: it supports CUDA " + cuda_version_text(s.cuda_version) +
           ", this build needs CUDA " + cuda_version_text(needed) + " (update the driver)";
  return "";
}

}  // namespace gcfs
