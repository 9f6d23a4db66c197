#include "crypto/secret.h"

#include <openssl/crypto.h>
#include <sys/mman.h>

namespace gcfs {

void secure_wipe(void* p, std::size_t n) {
  if (p && n) OPENSSL_cleanse(p, n);
}

void lock_memory(void* p, std::size_t n) {
  if (p && n) (void)mlock(p, n);
}

void unlock_memory(void* p, std::size_t n) {
  if (p && n) (void)munlock(p, n);
}

}  // namespace gcfs
