// Chooses, once, which AES-256-GCM implementation the cpu engine uses (see crypto/gcm_impl.h), and
// stands in for intel-ipsec-mb where the build has none (another architecture, or no package).
#include "crypto/gcm_impl.h"

#include <cstdlib>
#include <exception>
#include <stdexcept>
#include <string_view>

#include "crypto/diagnostics.h"

namespace gcfs {

#ifndef GCFS_HAVE_IPSEC_MB
bool gcm_ipsec_mb_compiled() { return false; }
bool gcm_ipsec_mb_fast_here() { return false; }
std::string gcm_ipsec_mb_isa() { return {}; }
void gcm_ipsec_mb_seal(ChunkOp&) { throw std::logic_error("cpu engine: built without intel-ipsec-mb"); }
void gcm_ipsec_mb_open(ChunkOp&) { throw std::logic_error("cpu engine: built without intel-ipsec-mb"); }
#endif

namespace {

GcmImpl choose() {
  const char* env = std::getenv("GPUCRYPTFS_CPU_GCM");
  const std::string_view want = env ? env : "";
  if (want == "openssl") return GcmImpl::OpenSsl;
  if (want == "ipsec-mb") {
    if (gcm_ipsec_mb_compiled()) return GcmImpl::IpsecMb;
    diag::warning("GPUCRYPTFS_CPU_GCM=ipsec-mb, but this build has no intel-ipsec-mb: using OpenSSL");
    return GcmImpl::OpenSsl;
  }
  if (!want.empty() && want != "auto")
    diag::warning("GPUCRYPTFS_CPU_GCM=" + std::string(want) + " is neither openssl nor ipsec-mb: choosing as without it");
  // Without VAES and AVX-512, ipsec-mb's AVX2 path has not been measured against OpenSSL's (which
  // has an AES-NI + AVX2 path of its own there): OpenSSL stays.
  try {
    return gcm_ipsec_mb_compiled() && gcm_ipsec_mb_fast_here() ? GcmImpl::IpsecMb : GcmImpl::OpenSsl;
  } catch (const std::exception& e) {  // its manager could not be set up: OpenSSL does the work
    diag::warning(std::string(e.what()) + ": using OpenSSL");
    return GcmImpl::OpenSsl;
  }
}

}  // namespace

GcmImpl chosen_gcm() {
  static const GcmImpl impl = choose();
  return impl;
}

std::string gcm_description(GcmImpl impl) {
  if (impl == GcmImpl::IpsecMb) return "intel-ipsec-mb, " + gcm_ipsec_mb_isa();
#if defined(__x86_64__)
  if (__builtin_cpu_supports("aes")) return "OpenSSL, AES-NI";
#endif
  return "OpenSSL";
}

void gcm_seal(GcmImpl impl, ChunkOp& op) {
  if (impl == GcmImpl::IpsecMb) gcm_ipsec_mb_seal(op);
  else gcm_openssl_seal(op);
}

void gcm_open(GcmImpl impl, ChunkOp& op) {
  if (impl == GcmImpl::IpsecMb) gcm_ipsec_mb_open(op);
  else gcm_openssl_open(op);
}

}  // namespace gcfs
