// Why a machine has no usable GPU, told apart for the user: no NVIDIA driver (and so, as far as
// this process can see, no GPU), a driver too old for this build, or a driver that sees no GPU.
// Plain C++ (the driver library is looked up with dlopen), so a build without CUDA can say it too.
#pragma once

#include <string>

namespace gcfs {

struct DriverState {
  bool library_found = false;  // libcuda.so.1, the driver's user-space half
  int cuda_version = 0;        // what the driver supports, as CUDA numbers it (13000 = 13.0); 0 unknown
};

DriverState probe_nvidia_driver();

// A sentence for `info` and the engine's refusal. needed_cuda_version: what this build's runtime
// needs (CUDART_VERSION), 0 for a build without CUDA. Empty when the driver is there and new enough.
std::string describe_driver_problem(const DriverState& s, int needed_cuda_version);

// 13000 -> "13.0".
std::string cuda_version_text(int v);

}  // namespace gcfs
