#include "crypto/blob_cipher.h"

#include "crypto/aes_gcm.h"
#include "crypto/random.h"

namespace gcfs {

std::vector<std::uint8_t> seal_blob(const BlobKey& key, std::span<const std::uint8_t> aad,
                                    std::span<const std::uint8_t> plaintext) {
  std::vector<std::uint8_t> out(kGcmNonceBytes + plaintext.size() + kGcmTagBytes);
  std::span<std::uint8_t> nonce(out.data(), kGcmNonceBytes);
  random_bytes(nonce);
  auto tag = gcm_seal(key.bytes, nonce, aad, plaintext, out.data() + kGcmNonceBytes);
  std::copy(tag.begin(), tag.end(), out.end() - kGcmTagBytes);
  return out;
}

std::vector<std::uint8_t> seal_blob_with_nonce(const BlobKey& key, std::span<const std::uint8_t, 12> nonce,
                                               std::span<const std::uint8_t> aad, std::span<const std::uint8_t> plaintext) {
  std::vector<std::uint8_t> out(kGcmNonceBytes + plaintext.size() + kGcmTagBytes);
  std::copy(nonce.begin(), nonce.end(), out.begin());
  auto tag = gcm_seal(key.bytes, std::span<const std::uint8_t>(out.data(), kGcmNonceBytes), aad, plaintext,
                      out.data() + kGcmNonceBytes);
  std::copy(tag.begin(), tag.end(), out.end() - kGcmTagBytes);
  return out;
}

std::optional<std::vector<std::uint8_t>> open_blob(const BlobKey& key, std::span<const std::uint8_t> aad,
                                                   std::span<const std::uint8_t> sealed) {
  if (sealed.size() < kGcmNonceBytes + kGcmTagBytes) return std::nullopt;
  const std::size_t n = sealed.size() - kGcmNonceBytes - kGcmTagBytes;
  std::vector<std::uint8_t> out(n);
  if (!gcm_open(key.bytes, sealed.first(kGcmNonceBytes), aad, sealed.subspan(kGcmNonceBytes, n),
                sealed.last(kGcmTagBytes), out.data()))
    return std::nullopt;
  return out;
}

}  // namespace gcfs
