// The harness's durable state as a real directory tree: loaded when the harness starts, written
// back after every cut and when it exits, so that what survived is there to look at (or to start
// the harness on again). Regular files, directories, symbolic links, FIFOs and device nodes with
// their modes, owners, times and extended attributes; hard links stay hard links.
#pragma once

#include <string>
#include <unordered_map>

#include "volatile_disk.h"

namespace powercut {

// The tree under dir as inodes (the root is kRootIno). Throws std::runtime_error on failure.
std::unordered_map<Ino, Node> load_tree(const std::string& dir);

// Replaces everything under dir with the tree reachable from kRootIno in nodes.
void save_tree(const std::unordered_map<Ino, Node>& nodes, const std::string& dir);

}  // namespace powercut
