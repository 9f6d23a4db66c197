// The name log messages give a file: a fixed text, or one made only when a message is written. A
// mounted vault's file is named by its ciphertext path, which takes a walk up the inode table
// under the table's lock: made at every open, it was 1.6% of the daemon's time reading a tree of
// small files, for messages that almost never come.
#pragma once

#include <functional>
#include <string>
#include <utility>

namespace gcfs {

class FileLabel {
 public:
  FileLabel(std::string text) : text_(std::move(text)) {}  // NOLINT: a fixed label is just text
  FileLabel(const char* text) : text_(text) {}             // NOLINT
  // make() runs on each use, so it must stay valid as long as the labelled object.
  static FileLabel made_by(std::function<std::string()> make) {
    FileLabel l("");
    l.make_ = std::move(make);
    return l;
  }
  std::string str() const { return make_ ? make_() : text_; }

 private:
  std::string text_;
  std::function<std::string()> make_;
};

}  // namespace gcfs
