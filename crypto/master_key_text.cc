#include "crypto/master_key_text.h"

#include <string>

#include "crypto/errors.h"
#include "crypto/key_ring.h"

namespace gcfs {

SecretString format_master_key(const SecretBytes& key) {
  static const char kHex[] = "0123456789abcdef";
  SecretString out;
  for (std::size_t i = 0; i < key.size(); ++i) {
    if (i && i % 4 == 0) out.push_back('-');
    out.push_back(kHex[key[i] >> 4]);
    out.push_back(kHex[key[i] & 15]);
  }
  return out;
}

SecretBytes parse_master_key(const SecretString& text) {
  SecretBytes key;
  key.reserve(kMasterKeyBytes);
  int high = -1;
  std::size_t digits = 0;
  for (char c : text.view()) {
    if (c == '-' || c == ' ' || c == '\t') continue;
    int v;
    if (c >= '0' && c <= '9') v = c - '0';
    else if (c >= 'a' && c <= 'f') v = c - 'a' + 10;
    else if (c >= 'A' && c <= 'F') v = c - 'A' + 10;
    else throw UserError("the master key holds a character that is not a hex digit (give it as 'init' printed it)");
    if (++digits > 2 * kMasterKeyBytes) break;
    if (high < 0) {
      high = v;
    } else {
      key.push_back(static_cast<std::uint8_t>(high << 4 | v));
      high = -1;
    }
  }
  if (digits != 2 * kMasterKeyBytes)
    throw UserError("the master key must be " + std::to_string(2 * kMasterKeyBytes) + " hex digits (as 'init' printed "
                    "it, dashes optional); " + (digits > 2 * kMasterKeyBytes ? std::string("more were") : std::to_string(digits)) +
                    " given");
  return key;
}

}  // namespace gcfs
