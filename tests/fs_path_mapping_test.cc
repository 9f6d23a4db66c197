// The control socket's reading of a path (fs/path_translator.h, canonical_path), as gocryptfs's.
#include "fs/path_translator.h"

#include <gtest/gtest.h>

namespace gcfs {
namespace {

TEST(CanonicalPath, SlashesDotsAndDotDotsAsGocryptfsReadsThem) {
  EXPECT_EQ(canonical_path("a/b"), "a/b");
  EXPECT_EQ(canonical_path("/a//b/"), "a/b");
  EXPECT_EQ(canonical_path("./a/./b"), "a/b");
  EXPECT_EQ(canonical_path("a/../b"), "b");
  EXPECT_EQ(canonical_path("../../etc/passwd"), "etc/passwd") << "never above the root";
  EXPECT_EQ(canonical_path("a/b/../../.."), "");
  EXPECT_EQ(canonical_path("/"), "");
  EXPECT_EQ(canonical_path(""), "");
  EXPECT_EQ(canonical_path("name with spaces/..."), "name with spaces/...") << "only . and .. are special";
}

}  // namespace
}  // namespace gcfs
