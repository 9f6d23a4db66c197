// `gpucryptfs bench --quick --engine cpu --out DIR` end to end: the CSV has one row per measured
// point with sane columns, and the plot (or gnuplot's absence) is reported. The numbers themselves
// are measurements, never asserted.
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "cuda/gpu_engine.h"
#include "mount/bench/bench_plan.h"
#include "mount/bench/bench_report.h"

namespace {

namespace fsys = std::filesystem;

std::vector<std::string> split(const std::string& line, char sep) {
  std::vector<std::string> out;
  std::stringstream ss(line);
  std::string cell;
  while (std::getline(ss, cell, sep)) out.push_back(cell);
  if (!line.empty() && line.back() == sep) out.push_back("");
  return out;
}

bool have_gnuplot() { return std::system("command -v gnuplot >/dev/null 2>&1") == 0; }

class BenchCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/gcfs-bench-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fsys::remove_all(dir_); }
  std::string dir_;
};

TEST_F(BenchCliTest, QuickCpuRunWritesOneCsvRowPerPointAndThePlots) {
  const std::string out = dir_ + "/results";
  const std::string cmd = std::string(GPUCRYPTFS_BIN) + " bench --quick --engine cpu --out " + out + " >" + dir_ +
                          "/stdout.txt 2>" + dir_ + "/stderr.txt";
  const int status = std::system(cmd.c_str());
  ASSERT_TRUE(WIFEXITED(status));
  std::ifstream err(dir_ + "/stderr.txt");
  std::string err_text((std::istreambuf_iterator<char>(err)), std::istreambuf_iterator<char>());
  ASSERT_EQ(WEXITSTATUS(status), 0) << err_text;
  EXPECT_NE(err_text.find("bench:"), std::string::npos) << "progress goes to stderr";

  // One row per measured point: the quick cpu plan, exactly.
  const auto plan = gcfs::cli::plan_points(gcfs::cli::default_sweep(true), true, false, false);
  std::ifstream csv(out + "/bench.csv");
  ASSERT_TRUE(csv) << "no bench.csv";
  std::string line;
  ASSERT_TRUE(std::getline(csv, line));
  EXPECT_EQ(line, gcfs::cli::kBenchCsvHeader);
  const auto header = split(line, ',');
  std::vector<std::vector<std::string>> rows;
  while (std::getline(csv, line)) rows.push_back(split(line, ','));
  ASSERT_EQ(rows.size(), plan.size());

  std::set<std::string> engines;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const auto& r = rows[i];
    ASSERT_EQ(r.size(), header.size()) << "row " << i;
    engines.insert(r[0]);
    EXPECT_EQ(r[0], gcfs::cli::to_string(plan[i].target));
    EXPECT_EQ(r[3], plan[i].op);
    EXPECT_EQ(std::stoull(r[4]), plan[i].chunk_size);
    EXPECT_EQ(std::stoull(r[5]), plan[i].request_bytes);
    EXPECT_GE(std::stoi(r[2]), 1) << "cpu rows name their thread count";
    EXPECT_GE(std::stoull(r[7]), std::stoull(r[5])) << "at least one request was measured";
    const double seconds = std::stod(r[8]), gbps = std::stod(r[9]);
    EXPECT_GT(seconds, 0);
    EXPECT_TRUE(std::isfinite(gbps) && gbps > 0) << line;
    EXPECT_NEAR(gbps, std::stod(r[7]) / seconds / 1e9, gbps * 0.01 + 1e-4) << "GB/s is bytes over seconds";
    EXPECT_GE(std::stod(r[10]), 0) << "CPU seconds per GB are measured for engine rows";
  }
  EXPECT_EQ(engines, (std::set<std::string>{"cpu-1t", "cpu-all"}));

  // The terminal table has a line per row below its header and rule.
  std::ifstream table(dir_ + "/stdout.txt");
  std::string text((std::istreambuf_iterator<char>(table)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("GB/s"), std::string::npos);

  EXPECT_TRUE(fsys::exists(out + "/bench.gp"));
  if (have_gnuplot()) {
    for (const char* png : {"/throughput_vs_request.png", "/throughput_vs_chunk.png", "/cpu_cost_vs_request.png"}) {
      ASSERT_TRUE(fsys::exists(out + png)) << png;
      std::ifstream f(out + png, std::ios::binary);
      char magic[8] = {};
      f.read(magic, 8);
      EXPECT_EQ(std::string(magic + 1, 3), "PNG") << png << " is not a PNG";
    }
  } else {
    EXPECT_NE(text.find("gnuplot is not installed"), std::string::npos) << text;
  }
}

TEST_F(BenchCliTest, GpuRowsWithoutAGpuAreSkippedWithAReason) {
  std::string why;
  if (!gcfs::list_gpus(&why).empty()) GTEST_SKIP() << "a GPU is present: nothing to skip";
  const std::string cmd = std::string(GPUCRYPTFS_BIN) + " bench --quick --engine gpu --out " + dir_ + "/gpu >" + dir_ +
                          "/out.txt 2>&1";
  const int status = std::system(cmd.c_str());
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "no GPU is a reason to skip rows, not a failure";
  std::ifstream in(dir_ + "/out.txt");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("gpu rows skipped: " + why), std::string::npos) << text;
  std::ifstream csv(dir_ + "/gpu/bench.csv");
  std::string header, extra;
  ASSERT_TRUE(std::getline(csv, header));
  EXPECT_FALSE(std::getline(csv, extra)) << "no rows were measured";
}

// A stray word used to be ignored and start the full sweep (minutes); bad values exited 1, not
// the documented usage code 2. Either way nothing is measured and no output folder appears.
TEST_F(BenchCliTest, StrayArgumentsAndBadValuesAreUsageErrorsThatMeasureNothing) {
  const std::string out = dir_ + "/results";
  for (const std::string args : {"--quick --engine cpu extra", "--quick --engine foo", "--quick --op sideways"}) {
    const std::string cmd = std::string(GPUCRYPTFS_BIN) + " bench " + args + " --out " + out + " >" + dir_ +
                            "/out.txt 2>&1";
    const int status = std::system(cmd.c_str());
    ASSERT_TRUE(WIFEXITED(status)) << args;
    std::ifstream in(dir_ + "/out.txt");
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_EQ(WEXITSTATUS(status), 2) << args << ": " << text;
    EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 1) << args << ": one line, no progress bar: " << text;
    EXPECT_FALSE(fsys::exists(out)) << args;
  }
}

TEST(BenchPlan, QuickSweepCoversTheAskedRanges) {
  const auto quick = gcfs::cli::default_sweep(true);
  const auto full = gcfs::cli::default_sweep(false);
  EXPECT_EQ(full.chunk_sizes.front(), 4096u);
  EXPECT_EQ(full.chunk_sizes.back(), 1u << 20);
  bool mid_range = false;
  for (auto c : full.chunk_sizes) mid_range |= c >= 35000 && c <= 150000 && (c & (c - 1)) != 0;
  EXPECT_TRUE(mid_range) << "the full sweep includes chunk sizes inside 35-150 KB";
  EXPECT_EQ(full.request_sizes.front(), 4096u);
  EXPECT_EQ(full.request_sizes.back(), 256u << 20);
  EXPECT_LT(quick.request_sizes.size(), full.request_sizes.size());
  // gpu engine and kernel points appear only when asked for.
  for (const auto& p : gcfs::cli::plan_points(quick, true, false, false))
    EXPECT_TRUE(p.target == gcfs::cli::BenchTarget::CpuOneThread || p.target == gcfs::cli::BenchTarget::CpuAllThreads);
  std::size_t kernels = 0;
  for (const auto& p : gcfs::cli::plan_points(quick, false, true, true))
    kernels += p.target == gcfs::cli::BenchTarget::GpuKernel;
  EXPECT_GT(kernels, 0u);
}

TEST(BenchReport, CsvLineHasEveryColumnAndEmptyCellsForUnmeasured) {
  gcfs::cli::BenchRow r;
  r.engine = "gpu-kernel";
  r.variant = "fine";
  r.op = "seal";
  r.chunk_size = 65536;
  r.request_bytes = 1 << 20;
  r.bytes = 1 << 20;
  r.seconds = 0.001;
  r.gb_per_s = 1.048576;
  const auto cells = split(gcfs::cli::csv_line(r), ',');
  EXPECT_EQ(cells.size(), split(gcfs::cli::kBenchCsvHeader, ',').size());
  EXPECT_EQ(cells[10], "") << "kernel rows have no CPU cost";
  EXPECT_EQ(cells[11], "") << "nor a latency";
  EXPECT_EQ(gcfs::cli::short_size(4096), "4K");
  EXPECT_EQ(gcfs::cli::short_size(100 * 1024), "100K");
  EXPECT_EQ(gcfs::cli::short_size(256u << 20), "256M");
}

}  // namespace

// The crossover line names every request size where the gpu engine is ahead of the best cpu row,
// also when the cpu engine pulls ahead again in between (as on the 16-core H100 host).
TEST(BenchReport, CrossoverNamesEverySizeWhereTheGpuIsAhead) {
  auto row = [](const char* engine, std::size_t request, double gbs, std::size_t chunk = 65536, int callers = 1) {
    gcfs::cli::BenchRow r;
    r.engine = engine;
    r.op = "seal";
    r.chunk_size = chunk;
    r.request_bytes = request;
    r.concurrency = callers;
    r.gb_per_s = gbs;
    return r;
  };
  const std::size_t K = 1024, M = K * K;
  std::vector<gcfs::cli::BenchRow> rows = {
      row("cpu-1t", 64 * K, 2.0),  row("cpu-all", 64 * K, 2.5), row("gpu", 64 * K, 2.0),
      row("cpu-1t", 256 * K, 3.0), row("cpu-all", 256 * K, 4.0), row("gpu", 256 * K, 6.0),
      row("cpu-all", 1 * M, 14.0), row("gpu", 1 * M, 8.0),
      row("cpu-all", 16 * M, 40.0), row("gpu", 16 * M, 50.0),
      // A request smaller than the chunk, measured at a smaller chunk: the same work.
      row("cpu-1t", 4 * K, 2.0, 4096), row("gpu", 4 * K, 1.0, 4096),
      // Other chunk sizes and several callers do not count.
      row("gpu", 1 * M, 99.0, 4096), row("gpu", 1 * M, 99.0, 65536, 8)};
  const std::string s = gcfs::cli::crossover_summary(rows, 64 * K);
  EXPECT_NE(s.find("4K 0.50x, 64K 0.80x, 256K 1.50x, 1M 0.57x, 16M 1.25x"), std::string::npos) << s;
  EXPECT_NE(s.find("faster at: 256K, 16M"), std::string::npos) << s;
  rows = {row("cpu-all", 64 * K, 2.5), row("gpu", 64 * K, 2.0)};
  EXPECT_NE(gcfs::cli::crossover_summary(rows, 64 * K).find("faster at: no request size"), std::string::npos);
  EXPECT_EQ(gcfs::cli::crossover_summary({row("cpu-all", 64 * K, 2.5)}, 64 * K), "");
}
