// AES-256-GCM for one chunk on the calling thread, in two implementations that give bit-identical
// ciphertext and tags: OpenSSL's EVP (any platform) and intel-ipsec-mb's direct GCM API (x86-64,
// where the build found it; several times OpenSSL 3.0's rate on small chunks with VAES and
// AVX-512). One of them is chosen once, as the program starts using it: intel-ipsec-mb where it is
// compiled in and the processor has its VAES + VPCLMULQDQ + AVX-512 path, OpenSSL otherwise;
// GPUCRYPTFS_CPU_GCM=openssl|ipsec-mb overrides the choice (for tests and A/B measurements).
// AES-SIV for names stays OpenSSL's in any case.
#pragma once

#include <string>

#include "crypto/chunk_engine.h"

namespace gcfs {

enum class GcmImpl { OpenSsl, IpsecMb };

// Both keep the contract of cpu_seal_one / cpu_open_one (crypto/cpu_engine.h): seal fills out and
// the tag and sets op.ok; open sets op.ok false and wipes out on a bad tag. Both throw on an op
// without a key or with more AAD than kMaxChunkAadBytes (open refuses such an op before it gets here).
void gcm_openssl_seal(ChunkOp& op);
void gcm_openssl_open(ChunkOp& op);
void gcm_ipsec_mb_seal(ChunkOp& op);  // only where gcm_ipsec_mb_compiled() (throws otherwise)
void gcm_ipsec_mb_open(ChunkOp& op);

bool gcm_ipsec_mb_compiled();
// Whether intel-ipsec-mb's fast path (VAES + VPCLMULQDQ + AVX-512) runs on this processor.
bool gcm_ipsec_mb_fast_here();
// The instruction set intel-ipsec-mb uses here ("AVX-512 VAES", "AVX2", ...); empty where absent.
std::string gcm_ipsec_mb_isa();

// The implementation cpu_seal_one / cpu_open_one use, chosen at the first call.
GcmImpl chosen_gcm();
// Names it and its instruction set for logs, `info` and `bench`: "intel-ipsec-mb, AVX-512 VAES".
std::string gcm_description(GcmImpl impl);
inline std::string gcm_description() { return gcm_description(chosen_gcm()); }

// Seals or opens with the given implementation (tests compare the two).
void gcm_seal(GcmImpl impl, ChunkOp& op);
void gcm_open(GcmImpl impl, ChunkOp& op);

}  // namespace gcfs
