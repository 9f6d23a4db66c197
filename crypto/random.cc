#include "crypto/random.h"

#include <openssl/rand.h>

#include <climits>
#include <stdexcept>

namespace gcfs {

void random_bytes(std::span<std::uint8_t> out) {
  std::size_t done = 0;
  while (done < out.size()) {
    int n = static_cast<int>(std::min<std::size_t>(out.size() - done, INT_MAX));
    if (RAND_bytes(out.data() + done, n) != 1)
      throw std::runtime_error("the random number generator failed (OpenSSL RAND_bytes)");
    done += static_cast<std::size_t>(n);
  }
}

}  // namespace gcfs
