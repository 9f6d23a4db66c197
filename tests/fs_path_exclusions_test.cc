// Reverse mode's exclusions (fs/path_exclusions.h): gitignore(5)'s rules, one by one.
#include "fs/path_exclusions.h"

#include <gtest/gtest.h>

namespace gcfs {
namespace {

PathExclusions lines(const char* text) {
  PathExclusions e;
  e.add_lines(text);
  return e;
}

TEST(PathExclusions, NothingIsExcludedByDefaultAndTheRootNever) {
  PathExclusions e;
  EXPECT_TRUE(e.empty());
  EXPECT_FALSE(e.excluded("a", false));
  auto all = lines("*\n");
  EXPECT_TRUE(all.excluded("a", false));
  EXPECT_TRUE(all.excluded("a/b", true));
  EXPECT_FALSE(all.excluded("", true));
}

TEST(PathExclusions, ExcludePathIsOneLiteralPathWithOrWithoutItsLeadingSlash) {
  PathExclusions e;
  ASSERT_TRUE(e.add_path("/secret/keys"));
  ASSERT_TRUE(e.add_path("odd*[name]?"));
  EXPECT_TRUE(e.excluded("secret/keys", true));
  EXPECT_TRUE(e.excluded("secret/keys", false));
  EXPECT_FALSE(e.excluded("secret", true));
  EXPECT_FALSE(e.excluded("other/secret/keys", false)) << "anchored at the root";
  EXPECT_TRUE(e.excluded("odd*[name]?", false));
  EXPECT_FALSE(e.excluded("oddXnY", false)) << "no pattern characters in --exclude";
  EXPECT_FALSE(e.add_path(""));
  EXPECT_FALSE(e.add_path("/"));
  EXPECT_FALSE(e.add_path("a/../b"));
}

TEST(PathExclusions, CommentsBlankLinesAndEscapes) {
  auto e = lines("# a comment\n\n   \n\\#hash\n\\!bang\ntrailing   \nkept\\ \r\n");
  EXPECT_FALSE(e.excluded("# a comment", false));
  EXPECT_TRUE(e.excluded("#hash", false));
  EXPECT_TRUE(e.excluded("!bang", false));
  EXPECT_TRUE(e.excluded("trailing", false)) << "unescaped trailing spaces are dropped";
  EXPECT_TRUE(e.excluded("kept ", false)) << "an escaped one is kept (and a CR dropped)";
  EXPECT_FALSE(e.excluded("kept", false));
}

TEST(PathExclusions, UnanchoredPatternsMatchTheNameAtAnyDepth) {
  auto e = lines("*.tmp\ncache\n");
  EXPECT_TRUE(e.excluded("a.tmp", false));
  EXPECT_TRUE(e.excluded("x/y/b.tmp", false));
  EXPECT_TRUE(e.excluded("deep/cache", true));
  EXPECT_FALSE(e.excluded("a.tmp.keep", false));
  EXPECT_FALSE(e.excluded("cached", false));
}

TEST(PathExclusions, ASlashAtTheStartOrInTheMiddleAnchors) {
  auto e = lines("/top\nsub/file\n");
  EXPECT_TRUE(e.excluded("top", false));
  EXPECT_FALSE(e.excluded("a/top", false));
  EXPECT_TRUE(e.excluded("sub/file", false));
  EXPECT_FALSE(e.excluded("x/sub/file", false));
}

TEST(PathExclusions, TrailingSlashMatchesDirectoriesOnly) {
  auto e = lines("build/\n");
  EXPECT_TRUE(e.excluded("build", true));
  EXPECT_TRUE(e.excluded("a/build", true));
  EXPECT_FALSE(e.excluded("build", false));
}

TEST(PathExclusions, DoubleStars) {
  auto e = lines("**/logs\na/**/z\nout/**\n");
  EXPECT_TRUE(e.excluded("logs", true));
  EXPECT_TRUE(e.excluded("p/q/logs", true));
  EXPECT_TRUE(e.excluded("a/z", false)) << "zero directories";
  EXPECT_TRUE(e.excluded("a/b/c/z", false));
  EXPECT_FALSE(e.excluded("b/a/z", false));
  EXPECT_FALSE(e.excluded("out", true)) << "a trailing /** is what is inside";
  EXPECT_TRUE(e.excluded("out/x", false));
  EXPECT_TRUE(e.excluded("out/x/y", false));
}

TEST(PathExclusions, NegationReincludesAndTheLastMatchWins) {
  auto e = lines("*.log\n!important.log\nimportant.log.d/\n");
  EXPECT_TRUE(e.excluded("a.log", false));
  EXPECT_FALSE(e.excluded("important.log", false));
  EXPECT_FALSE(e.excluded("x/important.log", false));
  auto again = lines("!keep\n*\n");
  EXPECT_TRUE(again.excluded("keep", false)) << "a later pattern overrides the negation";
}

TEST(PathExclusions, CharacterClassesAndQuestionMarks) {
  auto e = lines("file?.[ch]\n[!a]*.bak\n");
  EXPECT_TRUE(e.excluded("file1.c", false));
  EXPECT_TRUE(e.excluded("fileX.h", false));
  EXPECT_FALSE(e.excluded("file12.c", false));
  EXPECT_TRUE(e.excluded("b.bak", false));
  EXPECT_FALSE(e.excluded("a.bak", false));
}

}  // namespace
}  // namespace gcfs
