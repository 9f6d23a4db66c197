// The bench verb's results (bench_report.h): the terminal table, the CSV file and the plots.
#include "mount/bench/bench_report.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "crypto/errors.h"

extern char** environ;

namespace gcfs::cli {
namespace {

std::string fixed(double v, int decimals) {
  if (std::isnan(v)) return "";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

// Three significant digits: 0.0123, 1.23, 123 (tables of throughput read best this way).
std::string sig3(double v) {
  if (std::isnan(v)) return "-";
  char buf[64];
  if (v >= 100) std::snprintf(buf, sizeof buf, "%.0f", v);
  else if (v >= 10) std::snprintf(buf, sizeof buf, "%.1f", v);
  else if (v >= 1) std::snprintf(buf, sizeof buf, "%.2f", v);
  else std::snprintf(buf, sizeof buf, "%.3f", v);
  return buf;
}

std::string gnuplot_quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '\n') {
      out += "\\n";  // gnuplot turns \n in a double-quoted string into a line break
      continue;
    }
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

// A series of (x, GB/s) points per legend entry, x ascending.
using Series = std::map<std::string, std::map<std::size_t, double>>;

// The op the plots show: seal (the write path) when measured, else whatever was.
std::string plot_op(const std::vector<BenchRow>& rows) {
  for (const auto& r : rows)
    if (r.op == "seal") return "seal";
  for (const auto& r : rows)
    if (r.op != "ctr") return r.op;
  return "ctr";
}

bool shown(const BenchRow& r, const std::string& op) { return r.op == op || (r.engine == "gpu-kernel" && r.op == "seal"); }

// Whether a row belongs on a curve at `chunk`: measured at that chunk, or a request no larger
// than its chunk, which is one op whatever the chunk size (the sweep measures those once, at the
// smallest chunk that holds them).
bool belongs_to_chunk(const BenchRow& r, std::size_t chunk) {
  return r.chunk_size == chunk || (r.request_bytes < chunk && r.request_bytes <= r.chunk_size);
}

Series by_request(const std::vector<BenchRow>& rows, std::size_t chunk) {
  const std::string op = plot_op(rows);
  Series s;
  for (const auto& r : rows) {
    if (!shown(r, op)) continue;
    if (belongs_to_chunk(r, chunk)) s[r.series()][r.request_bytes] = r.gb_per_s;
  }
  return s;
}

// Host CPU seconds per GB against request size: what a request costs the machine's cores, the
// second reason to offload. Engine rows only (kernel rows have no host cost to speak of).
Series cpu_cost_by_request(const std::vector<BenchRow>& rows, std::size_t chunk) {
  const std::string op = plot_op(rows);
  Series s;
  for (const auto& r : rows) {
    if (r.engine == "gpu-kernel" || r.op != op || std::isnan(r.cpu_s_per_gb) || r.cpu_s_per_gb <= 0) continue;
    if (belongs_to_chunk(r, chunk)) s[r.series()][r.request_bytes] = r.cpu_s_per_gb;
  }
  return s;
}

Series by_chunk(const std::vector<BenchRow>& rows, std::size_t request) {
  const std::string op = plot_op(rows);
  Series s;
  for (const auto& r : rows)
    if (shown(r, op) && r.request_bytes == request && r.chunk_size <= request) s[r.series()][r.chunk_size] = r.gb_per_s;
  return s;
}

void emit_plot(std::ostream& gp, const std::string& png, const Series& series, const std::string& title,
               const std::string& xlabel, const std::string& ylabel, const std::string& prefix) {
  if (series.empty()) return;
  std::set<std::size_t> xs;
  int i = 0;
  for (const auto& [name, pts] : series) {
    gp << "$" << prefix << i++ << " << EOD\n";
    for (const auto& [x, y] : pts) {
      gp << x << " " << y << "\n";
      xs.insert(x);
    }
    gp << "EOD\n";
  }
  gp << "set output " << gnuplot_quote(png) << "\n"
     << "set title " << gnuplot_quote(title) << "\n"
     << "set xlabel " << gnuplot_quote(xlabel) << "\n"
     << "set ylabel " << gnuplot_quote(ylabel) << "\n"
     << "set xtics (";
  bool first = true;
  for (std::size_t x : xs) {
    gp << (first ? "" : ", ") << gnuplot_quote(short_size(x)) << " " << x;
    first = false;
  }
  gp << ")\nplot ";
  i = 0;
  for (const auto& [name, pts] : series) {
    // Kernel-only rows are dashed: a ceiling no request through the filesystem reaches.
    const bool kernel_only = name.rfind("gpu kernel", 0) == 0;
    gp << (i ? ", \\\n     " : "") << "$" << prefix << i << " using 1:2 with linespoints ls " << (i + 1)
       << (kernel_only ? " dt 2" : "") << " title " << gnuplot_quote(name);
    ++i;
  }
  gp << "\n\n";
}

// Runs `gnuplot bench.gp` inside dir (the script names its PNGs relative to its folder, so it
// can be rerun wherever the folder is copied); output goes to dir/gnuplot.log. Returns "" on
// success, else why not.
std::string run_gnuplot(const std::string& dir) {
  const std::string script = dir + "/bench.gp";
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addchdir_np(&fa, dir.c_str());
  posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, "gnuplot.log", O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&fa, STDOUT_FILENO, STDERR_FILENO);
  const char* argv[] = {"gnuplot", "bench.gp", nullptr};
  pid_t pid = 0;
  int rc = posix_spawnp(&pid, "gnuplot", &fa, nullptr, const_cast<char**>(argv), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc == ENOENT)
    return "gnuplot is not installed (Debian: apt-get install gnuplot-nox), so no PNG was drawn; the CSV and " +
           script + " are written: run 'cd " + dir + " && gnuplot bench.gp' where gnuplot is available";
  if (rc != 0) return std::string("cannot run gnuplot: ") + std::strerror(rc);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return "gnuplot failed; its messages are in " + dir + "/gnuplot.log";
  return "";
}

}  // namespace

const char* const kBenchCsvHeader =
    "engine,variant,threads,op,chunk_size,request_bytes,concurrency,bytes,seconds,gb_per_s,cpu_s_per_gb,median_latency_us";

std::string BenchRow::series() const {
  if (engine == "gpu-kernel") return "gpu kernel only, " + variant + " (" + op + ")";
  std::string s;
  if (engine == "cpu-1t") s = "cpu, 1 thread";
  else if (engine == "cpu-all") s = "cpu, " + std::to_string(threads) + " threads";
  else if (engine == "gpu") s = "gpu, host-GPU-host";
  else s = engine;
  if (concurrency > 1) s += ", " + std::to_string(concurrency) + " callers";
  return s;
}

std::string short_size(std::size_t b) {
  if (b >= (1u << 20) && b % (1u << 20) == 0) return std::to_string(b >> 20) + "M";
  if (b >= 1024 && b % 1024 == 0) return std::to_string(b >> 10) + "K";
  return std::to_string(b);
}

std::string csv_line(const BenchRow& r) {
  std::ostringstream o;
  o << r.engine << "," << r.variant << "," << r.threads << "," << r.op << "," << r.chunk_size << "," << r.request_bytes
    << "," << r.concurrency << "," << r.bytes << "," << fixed(r.seconds, 6) << "," << fixed(r.gb_per_s, 4) << ","
    << fixed(r.cpu_s_per_gb, 4) << "," << fixed(r.median_us, 1);
  return o.str();
}

void print_table(std::ostream& out, const std::vector<BenchRow>& rows) {
  const std::vector<std::string> head = {"engine", "variant", "thr", "op", "chunk", "request", "callers", "GB/s",
                                         "CPU s/GB", "median us"};
  std::vector<std::vector<std::string>> cells;
  for (const auto& r : rows)
    cells.push_back({r.engine, r.variant, r.threads ? std::to_string(r.threads) : "-", r.op, short_size(r.chunk_size),
                     short_size(r.request_bytes), std::to_string(r.concurrency), sig3(r.gb_per_s), sig3(r.cpu_s_per_gb),
                     std::isnan(r.median_us) ? "-" : fixed(r.median_us, 0)});
  std::vector<std::size_t> w(head.size());
  for (std::size_t c = 0; c < head.size(); ++c) {
    w[c] = head[c].size();
    for (const auto& row : cells) w[c] = std::max(w[c], row[c].size());
  }
  // Text columns left-aligned, numbers right-aligned.
  auto line = [&](const std::vector<std::string>& v) {
    for (std::size_t c = 0; c < v.size(); ++c) {
      const std::string pad(w[c] - v[c].size(), ' ');
      out << (c ? "  " : "") << (c < 4 ? v[c] + pad : pad + v[c]);
    }
    out << "\n";
  };
  line(head);
  std::size_t total = 0;
  for (auto x : w) total += x + 2;
  out << std::string(total - 2, '-') << "\n";
  for (const auto& row : cells) line(row);
}

void write_csv(const std::string& path, const std::vector<BenchRow>& rows) {
  std::ofstream out(path, std::ios::trunc);
  if (!out) throw UserError("cannot write " + path + ": " + std::strerror(errno));
  out << kBenchCsvHeader << "\n";
  for (const auto& r : rows) out << csv_line(r) << "\n";
  out.flush();
  if (!out) throw UserError("cannot write " + path + ": " + std::strerror(errno));
}

PlotOutcome write_plots(const std::string& dir, const std::vector<BenchRow>& rows, std::size_t plot_chunk,
                        std::size_t plot_request, const std::string& title) {
  PlotOutcome outcome;
  const std::string script = dir + "/bench.gp";
  const std::string by_req_png = dir + "/throughput_vs_request.png";
  const std::string by_chunk_png = dir + "/throughput_vs_chunk.png";
  const std::string cost_png = dir + "/cpu_cost_vs_request.png";
  const Series s1 = by_request(rows, plot_chunk);
  const Series s2 = by_chunk(rows, plot_request);
  const Series s3 = cpu_cost_by_request(rows, plot_chunk);
  if (s1.empty() && s2.empty()) {
    outcome.note = "nothing to plot";
    return outcome;
  }
  {
    std::ofstream gp(script, std::ios::trunc);
    if (!gp) throw UserError("cannot write " + script + ": " + std::strerror(errno));
    gp << "# Written by gpucryptfs bench; redraw with: cd THIS_FOLDER && gnuplot bench.gp\n"
       << "set terminal pngcairo size 1280,800 enhanced font 'Sans,11'\n"
       << "set logscale xy\n"
       << "set grid xtics ytics mytics lc rgb '#dddddd'\n"
       << "set key top left box opaque\n"
       << "set format y '%g'\n"
       << "set style line 1 lw 2 pt 7 lc rgb '#1f77b4'\n"
       << "set style line 2 lw 2 pt 5 lc rgb '#ff7f0e'\n"
       << "set style line 3 lw 2 pt 9 lc rgb '#2ca02c'\n"
       << "set style line 4 lw 2 pt 11 lc rgb '#d62728'\n"
       << "set style line 5 lw 2 pt 13 lc rgb '#9467bd'\n"
       << "set style line 6 lw 2 pt 4 lc rgb '#8c564b'\n"
       << "set style line 7 lw 2 pt 6 lc rgb '#e377c2'\n"
       << "set style line 8 lw 2 pt 8 lc rgb '#7f7f7f'\n"
       << "set style line 9 lw 2 pt 10 lc rgb '#bcbd22'\n"
       << "set style line 10 lw 2 pt 12 lc rgb '#17becf'\n\n";
    const std::string op = plot_op(rows);
    const std::string gbs = "throughput (GB/s, 10^9 bytes per second)";
    const std::string request_axis = "request size (bytes per call; the plaintext one FUSE request hands the engine)";
    emit_plot(gp, "throughput_vs_request.png", s1,
              "AES-256-GCM " + op + " throughput vs request size (chunk " + short_size(plot_chunk) + ")\n" + title,
              request_axis, gbs, "r");
    emit_plot(gp, "throughput_vs_chunk.png", s2,
              "AES-256-GCM " + op + " throughput vs chunk size (requests of " + short_size(plot_request) + ")\n" + title,
              "chunk size (bytes sealed under one nonce and tag)", gbs, "c");
    emit_plot(gp, "cpu_cost_vs_request.png", s3,
              "Host CPU time per GB of AES-256-GCM " + op + " vs request size (chunk " + short_size(plot_chunk) +
                  "; lower is better)\n" + title,
              request_axis, "CPU seconds per GB (user + system, all threads of the process)", "u");
    if (!gp) throw UserError("cannot write " + script);
  }
  outcome.note = run_gnuplot(dir);
  if (outcome.note.empty()) {
    if (!s1.empty()) outcome.images.push_back(by_req_png);
    if (!s2.empty()) outcome.images.push_back(by_chunk_png);
    if (!s3.empty()) outcome.images.push_back(cost_png);
  }
  return outcome;
}

// The crossover the plots show, in words: the gpu engine's throughput over the best cpu row's at
// each request size (at one chunk size, one caller), and where it is ahead. Not "from X on": on a host
// with many cores the all-threads cpu engine can pull ahead again at larger requests.
std::string crossover_summary(const std::vector<BenchRow>& rows, std::size_t chunk) {
  std::map<std::size_t, double> best_cpu, gpu;
  for (const auto& r : rows) {
    if (!belongs_to_chunk(r, chunk) || r.op != "seal" || r.concurrency != 1) continue;
    if (r.engine == "cpu-1t" || r.engine == "cpu-all") best_cpu[r.request_bytes] = std::max(best_cpu[r.request_bytes], r.gb_per_s);
    if (r.engine == "gpu") gpu[r.request_bytes] = r.gb_per_s;
  }
  std::string ratios, ahead;
  for (const auto& [req, g] : gpu) {
    auto c = best_cpu.find(req);
    if (c == best_cpu.end() || c->second <= 0) continue;
    char ratio[32];
    std::snprintf(ratio, sizeof ratio, "%.2fx", g / c->second);
    ratios += (ratios.empty() ? "" : ", ") + short_size(req) + " " + ratio;
    if (g > c->second) ahead += (ahead.empty() ? "" : ", ") + short_size(req);
  }
  if (ratios.empty()) return "";
  return "crossover (seal, chunk " + short_size(chunk) + ", one caller), gpu / best cpu by request size: " + ratios +
         "\n  the gpu engine is faster at: " + (ahead.empty() ? std::string("no request size") : ahead);
}

}  // namespace gcfs::cli
