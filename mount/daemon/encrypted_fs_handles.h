// What fi->fh points to for open files and open directories (internal to encrypted_fs*.cc).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "mount/daemon/encrypted_fs.h"

namespace gcfs::mount {

struct EncryptedFs::FileHandle {
  Inode* inode;
  std::shared_ptr<ContentFile> content;
  bool append;  // we place O_APPEND writes ourselves (the kernel does when it caches writes)
};

// A snapshot of the decrypted entries, taken when a listing starts (offset 0), so offsets stay
// stable while entries are removed during the listing (rm -r).
struct EncryptedFs::DirHandle {
  struct Entry {
    std::string name;   // plaintext
    std::string entry;  // ciphertext directory entry
    ino_t ino;
    unsigned char type;  // DT_*
  };
  std::vector<Entry> entries;
};

inline EncryptedFs& fs_of(fuse_req_t req) { return *static_cast<EncryptedFs*>(fuse_req_userdata(req)); }

}  // namespace gcfs::mount
