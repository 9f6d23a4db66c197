// The lower layers' messages (crypto/diagnostics.h): where they go before and after someone installs
// a sink, and that a binary with the daemon's log (fs/log.h) gets them in that log from its start.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "crypto/diagnostics.h"
#include "fs/log.h"

namespace gcfs {
namespace {

std::vector<std::pair<diag::Level, std::string>>& received() {
  static std::vector<std::pair<diag::Level, std::string>> r;
  return r;
}
void record(diag::Level level, std::string_view message) { received().emplace_back(level, std::string(message)); }

// First in this file: the sink fs/log.cc installed as the program started is still in place.
TEST(Diagnostics, ReachTheDaemonLogFromTheStart) {
  char path[] = "/tmp/gcfs-diag-XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  close(fd);
  log::to_file(path);
  diag::warning("a lower layer noticed something");
  diag::debug("below the log's level");
  log::to_stderr();
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  std::remove(path);
  EXPECT_NE(text.str().find("warning: a lower layer noticed something"), std::string::npos) << text.str();
  EXPECT_EQ(text.str().find("below the log's level"), std::string::npos) << text.str();
}

TEST(Diagnostics, GoToTheInstalledSinkWithTheirLevel) {
  received().clear();
  diag::set_sink(&record);
  diag::debug("d");
  diag::info("i");
  diag::warning("w");
  diag::error("e");
  diag::set_sink(nullptr);
  const std::vector<std::pair<diag::Level, std::string>> want = {
      {diag::Level::Debug, "d"}, {diag::Level::Info, "i"}, {diag::Level::Warning, "w"}, {diag::Level::Error, "e"}};
  EXPECT_EQ(received(), want);
}

TEST(Diagnostics, WithoutASinkAreOneLineOnStderr) {
  diag::set_sink(nullptr);
  testing::internal::CaptureStderr();
  diag::error("GPU 0 failed (for the test)");
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "gpucryptfs: GPU 0 failed (for the test)\n");
}

}  // namespace
}  // namespace gcfs
