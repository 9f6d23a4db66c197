#include "crypto/name_cipher.h"

#include "crypto/aes_siv.h"
#include "crypto/base64url.h"

namespace gcfs {

std::string NameCipher::encrypt(std::string_view name, const DirIv& dir_iv) const {
  std::span<const std::uint8_t> pt(reinterpret_cast<const std::uint8_t*>(name.data()), name.size());
  return base64url_encode(siv_encrypt(key_.bytes, dir_iv, pt));
}

std::optional<std::string> NameCipher::decrypt(std::string_view encrypted, const DirIv& dir_iv) const {
  auto raw = base64url_decode(encrypted);
  if (!raw) return std::nullopt;
  auto pt = siv_decrypt(key_.bytes, dir_iv, *raw);
  if (!pt) return std::nullopt;
  std::string name(pt->begin(), pt->end());
  // A name we wrote is never empty and never holds '/' or NUL; anything else is not ours.
  if (name.empty() || name.find('/') != std::string::npos || name.find('\0') != std::string::npos ||
      name == "." || name == "..")
    return std::nullopt;
  return name;
}

}  // namespace gcfs
