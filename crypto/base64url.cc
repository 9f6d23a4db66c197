#include "crypto/base64url.h"

#include <openssl/evp.h>

#include <algorithm>

namespace gcfs {

std::string base64_encode(std::span<const std::uint8_t> data) {
  std::string out(4 * ((data.size() + 2) / 3) + 1, '\0');
  int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()), data.data(), static_cast<int>(data.size()));
  out.resize(static_cast<std::size_t>(n));
  return out;
}

std::optional<std::vector<std::uint8_t>> base64_decode(std::string_view text) {
  if (text.size() % 4 != 0) return std::nullopt;
  std::vector<std::uint8_t> out(text.size() / 4 * 3 + 1);
  int n = EVP_DecodeBlock(out.data(), reinterpret_cast<const unsigned char*>(text.data()), static_cast<int>(text.size()));
  if (n < 0) return std::nullopt;
  // EVP_DecodeBlock counts padding as zero bytes; take them back off.
  std::size_t pad = 0;
  if (!text.empty() && text.back() == '=') pad = (text.size() >= 2 && text[text.size() - 2] == '=') ? 2 : 1;
  out.resize(static_cast<std::size_t>(n) - pad);
  // EVP_DecodeBlock also takes padding in the middle ("AA=A"), all-padding groups ("===="),
  // surrounding whitespace and stray low bits ("Zh=="); only the one canonical spelling is valid.
  if (base64_encode(out) != text) return std::nullopt;
  return out;
}

std::string base64url_encode(std::span<const std::uint8_t> data) {
  std::string s = base64_encode(data);
  while (!s.empty() && s.back() == '=') s.pop_back();
  std::replace(s.begin(), s.end(), '+', '-');
  std::replace(s.begin(), s.end(), '/', '_');
  return s;
}

std::optional<std::vector<std::uint8_t>> base64url_decode(std::string_view text) {
  if (text.size() % 4 == 1) return std::nullopt;
  std::string s(text);
  for (char& c : s) {
    if (c == '-') c = '+';
    else if (c == '_') c = '/';
    else if (c == '+' || c == '/' || c == '=') return std::nullopt;
  }
  while (s.size() % 4) s.push_back('=');
  auto out = base64_decode(s);
  // Reject non-canonical encodings (stray low bits) so one name has exactly one spelling.
  if (out && base64url_encode(*out) != text) return std::nullopt;
  return out;
}

}  // namespace gcfs
