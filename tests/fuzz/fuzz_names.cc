// Name decoding: every entry of a ciphertext directory goes through base64url and AES-256-SIV
// before it is shown, so a hostile folder can put any bytes there.
// The first input byte picks what the rest is:
//   0: an encrypted name as found in a directory. Properties: never crashes; a name that decrypts
//      is a valid plaintext name, and encrypting it again gives back exactly the input (one
//      spelling per name, so two directory entries can never show as the same name);
//   1: a plaintext name. Properties: a valid name round-trips, and does not open under another
//      directory's IV (names do not move between directories unnoticed);
//   2: bytes for base64url_decode alone. Property: what decodes re-encodes to the input;
//   3: the content of a long name's .name file, under the entry its hash names (and 4: under an
//      entry that does not match). Properties: NameMapping::to_plain never crashes, refuses a
//      .name file that does not hash to its entry, and a name it returns maps back (to_disk) to
//      exactly this entry and content.
#include <cstdint>
#include <string>
#include <string_view>

#include <fcntl.h>
#include <openssl/evp.h>
#include <unistd.h>

#include <cstdlib>

#include "crypto/base64url.h"
#include "crypto/name_cipher.h"
#include "fs/plain_io.h"
#include "fs/name_mapping.h"
#include "tests/fuzz/fuzz_common.h"

using namespace gcfs;

namespace {

const DirIv kIv = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
const DirIv kOtherIv = {16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1};

const NameCipher& names() {
  static const NameCipher c(fuzz::fixed_keys().names_key());
  return c;
}

const NameMapping& mapping() {
  static const NameMapping m(fuzz::fixed_keys());
  return m;
}

// A directory for the .name files, removed at exit.
int name_dir() {
  static std::string path;
  static int fd = [] {
    char tmpl[] = "/tmp/gcfs-fuzz-names-XXXXXX";
    if (!::mkdtemp(tmpl)) fuzz::fail("mkdtemp failed");
    path = tmpl;
    std::atexit([] {
      ::unlink((path + "/gcfs.longname.fuzz.name").c_str());
      ::unlink((path + "/x.name").c_str());
      ::rmdir(path.c_str());
    });
    return ::open(tmpl, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  }();
  return fd;
}

std::string long_entry_for(std::string_view encoded) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(encoded.data(), encoded.size(), md, &len, EVP_sha256(), nullptr);
  return std::string(kLongNamePrefix) + base64url_encode({md, len});
}

// Writes content as the .name file of entry (replacing the previous input's).
void put_name_file(const std::string& entry, std::string_view content) {
  const std::string file = entry + std::string(kLongNameSuffix);
  ::unlinkat(name_dir(), file.c_str(), 0);
  int fd = ::openat(name_dir(), file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) fuzz::fail("cannot write a .name file");
  if (!content.empty() && pwrite_full(fd, content.data(), content.size(), 0) != static_cast<ssize_t>(content.size()))
    fuzz::fail("cannot write a .name file");
  ::close(fd);
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
  fuzz::write_seed("longname", std::string(1, '\3') + names().encrypt(std::string(200, 'z'), kIv));
  fuzz::write_seed("longname-mismatch", std::string(1, '\4') + names().encrypt(std::string(190, 'w'), kIv));
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string_view rest(reinterpret_cast<const char*>(data + 1), size - 1);
  switch (data[0] % 5) {
    case 3:
    case 4: {
      // Case 3 names the .name file by its hash (so decryption is what gets fuzzed); case 4 by a
      // fixed entry it cannot match.
      const std::string entry = data[0] % 5 == 3 ? long_entry_for(rest) : "gcfs.longname.fuzz";
      put_name_file(entry, rest);
      auto name = mapping().to_plain(name_dir(), entry, kIv);
      const std::string file = entry + std::string(kLongNameSuffix);
      ::unlinkat(name_dir(), file.c_str(), 0);
      if (!name) return 0;
      if (data[0] % 5 == 4) fuzz::fail("a .name file that does not hash to its entry was accepted");
      if (!valid_name(*name)) fuzz::fail("a long name decrypted to an invalid name");
      const DiskName back = mapping().to_disk(*name, kIv);
      if (back.entry != entry || back.encoded != rest) fuzz::fail("a long name has a second spelling");
      return 0;
    }
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
