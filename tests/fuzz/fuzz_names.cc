// Name decoding: every entry of a ciphertext directory goes through base64url and AES-256-SIV
// before it is shown, so a hostile folder can put any bytes there.
// The first input byte picks what the rest is:
//   0: an encrypted name as found in a directory. Properties: never crashes; a name that decrypts
//      is a valid plaintext name, and encrypting it again gives back exactly the input (one
//      spelling per name, so two directory entries can never show as the same name);
//   1: a plaintext name. Properties: a valid name round-trips, and does not open under another
//      directory's IV (names do not move between directories unnoticed);
//   2: bytes for base64url_decode alone. Property: what decodes re-encodes to the input.
#include <cstdint>
#include <string>
#include <string_view>

#include "crypto/base64url.h"
#include "crypto/name_cipher.h"
#include "tests/fuzz/fuzz_common.h"

using namespace gcfs;

namespace {

const DirIv kIv = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
const DirIv kOtherIv = {16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1};

const NameCipher& names() {
  static const NameCipher c(fuzz::fixed_keys().names_key());
  return c;
}

bool valid_name(std::string_view n) {
  return !n.empty() && n != "." && n != ".." && n.find('/') == std::string_view::npos &&
         n.find('\0') == std::string_view::npos;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  if (!fuzz::seed_dir()) return 0;
  int i = 0;
  for (const char* s : {"a", "hello.txt", "\xc3\x9c" "n" "\xc3\xaf" "c" "\xc3\xb8" "d" "\xc3\xa9" " name", "a name with spaces"}) {
    fuzz::write_seed("enc" + std::to_string(i), std::string(1, '\0') + names().encrypt(s, kIv));
    fuzz::write_seed("plain" + std::to_string(i), std::string(1, '\1') + s);
    ++i;
  }
  fuzz::write_seed("enc-long", std::string(1, '\0') + names().encrypt(std::string(250, 'y'), kIv));
  fuzz::write_seed("b64", std::string(1, '\2') + "SGVsbG8tX3dvcmxk");
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string_view rest(reinterpret_cast<const char*>(data + 1), size - 1);
  switch (data[0] % 3) {
    case 0: {
      auto name = names().decrypt(rest, kIv);
      if (!name) return 0;
      if (!valid_name(*name)) fuzz::fail("decrypt returned an invalid name");
      if (names().encrypt(*name, kIv) != rest) fuzz::fail("a decrypted name has a second spelling");
      if (names().decrypt(rest, kOtherIv)) fuzz::fail("a name opened under another directory's IV");
      return 0;
    }
    case 1: {
      if (!valid_name(rest)) return 0;
      const std::string enc = names().encrypt(rest, kIv);
      if (enc.find_first_of("./=+") != std::string::npos) fuzz::fail("encrypted name has a character outside base64url");
      auto back = names().decrypt(enc, kIv);
      if (!back || *back != rest) fuzz::fail("name did not round-trip");
      if (names().decrypt(enc, kOtherIv)) fuzz::fail("a name opened under another directory's IV");
      return 0;
    }
    default: {
      auto raw = base64url_decode(rest);
      if (raw && base64url_encode(*raw) != rest) fuzz::fail("base64url accepted a non-canonical spelling");
      return 0;
    }
  }
}
