// The results of `gpucryptfs bench`, one row per measured point, and the three ways they leave
// the program: an aligned table for the terminal, a CSV file, and gnuplot plots of throughput
// against request size and chunk size, one line per engine, so the CPU/GPU crossover shows.
#pragma once

#include <cmath>
#include <cstddef>
#include <ostream>
#include <string>
#include <vector>

namespace gcfs::cli {

struct BenchRow {
  std::string engine;       // cpu-1t | cpu-all | gpu | gpu-kernel
  std::string variant;      // kernel design (coarse, fine, ...) for gpu-kernel; "-" otherwise
  int threads = 0;          // cpu threads of the engine; 0 where it does not apply
  std::string op;           // seal | open | ctr (kernel keystream only)
  std::size_t chunk_size = 0;
  std::size_t request_bytes = 0;
  int concurrency = 1;      // callers issuing requests at once
  std::size_t bytes = 0;    // plaintext bytes processed in the measurement
  double seconds = 0;
  double gb_per_s = 0;      // 1e9 bytes per second
  double cpu_s_per_gb = NAN;  // process CPU seconds per 1e9 bytes; NaN where not measured
  double median_us = NAN;     // median latency of one request alone; NaN where not measured

  // The plot legend: everything but the sizes.
  std::string series() const;
};

extern const char* const kBenchCsvHeader;
std::string csv_line(const BenchRow& r);

void print_table(std::ostream& out, const std::vector<BenchRow>& rows);
// Writes the CSV (kBenchCsvHeader then one line per row); throws UserError if it cannot.
void write_csv(const std::string& path, const std::vector<BenchRow>& rows);

struct PlotOutcome {
  std::vector<std::string> images;  // PNG files written
  std::string note;                 // why a plot is missing, or empty
};
// Writes DIR/bench.gp (self-contained: data inline) and runs gnuplot on it to draw
// DIR/throughput_vs_request.png and DIR/cpu_cost_vs_request.png (at plot_chunk), and
// DIR/throughput_vs_chunk.png (at plot_request). Without gnuplot, keeps the script and says so.
PlotOutcome write_plots(const std::string& dir, const std::vector<BenchRow>& rows, std::size_t plot_chunk,
                        std::size_t plot_request, const std::string& title);

// One caller's seal throughput, gpu over the best cpu row, at each request size of `chunk`, and
// the sizes where the gpu engine is ahead: two lines, or "" where either side was not measured.
std::string crossover_summary(const std::vector<BenchRow>& rows, std::size_t chunk);

// 4096 -> "4K", 1048576 -> "1M", 102400 -> "100K".
std::string short_size(std::size_t bytes);

}  // namespace gcfs::cli
