// mount --ctlsock PATH: gocryptfs's control socket, so that backup and sync tools can map paths
// between the plaintext and the ciphertext side of a running mount. A Unix stream socket, mode
// 0600, served on a thread of its own; each request is one JSON object,
//   {"EncryptPath": "dir/file"}   or   {"DecryptPath": "<cipher>/<cipher>"}
// answered by one line
//   {"Result": "...", "ErrNo": 0, "ErrText": "", "WarnText": ""}
// with ErrNo an errno value (2 for a directory on the way that is not there), or -1 for a request
// that is not understood (malformed JSON, both fields or neither, over kMaxRequestBytes), as
// gocryptfs answers; WarnText says when the path was not in canonical form. The socket is
// removed when the mount ends.
#pragma once

#include <memory>
#include <string>
#include <thread>

#include "fs/path_translator.h"
#include "fs/unique_fd.h"

namespace gcfs::mount {

class ControlSocket {
 public:
  // As gocryptfs's read buffer: a request is one path, at most a few kilobytes.
  static constexpr std::size_t kMaxRequestBytes = 5000;

  // Binds PATH (absolute; an existing socket nobody answers on is replaced, anything else there
  // is refused) and starts serving. Throws UserError naming what is wrong.
  ControlSocket(const std::string& path, PathTranslator& paths);
  ~ControlSocket();  // stops the thread and removes the socket (if it is still ours)
  ControlSocket(const ControlSocket&) = delete;
  ControlSocket& operator=(const ControlSocket&) = delete;

  // The reply line (with its newline) to one request's text: also what the tests call.
  static std::string answer(PathTranslator& paths, std::string_view request);
  // What the command line checks before asking for a password: "" when PATH can be bound, else why not.
  static std::string check_path(const std::string& path);

 private:
  void serve();
  // Reads what came on the connection fd, answering each whole request; false: drop it.
  bool take_input(int fd, std::string& in);

  std::string path_;
  PathTranslator& paths_;
  UniqueFd listen_, stop_read_, stop_write_;
  dev_t dev_ = 0;
  ino_t ino_ = 0;
  std::thread thread_;
};

}  // namespace gcfs::mount
