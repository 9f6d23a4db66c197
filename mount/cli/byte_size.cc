// Byte sizes parsed from the command line and written into messages (byte_size.h).
#include "mount/cli/byte_size.h"

#include <cctype>
#include <cstdio>

#include "crypto/errors.h"

namespace gcfs::cli {

std::uint64_t parse_byte_size(const std::string& text) {
  std::size_t i = 0;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) ++i;
  if (i == 0 || i > 19) throw UserError("'" + text + "' is not a size (examples: 4096, 512K, 64M, 10G, 1T)");
  const std::uint64_t n = std::stoull(text.substr(0, i));
  if (i < text.size() && (text[i] == '.' || text[i] == ','))
    throw UserError("'" + text + "' is not a whole number: give the size in a smaller unit (1536M, not 1.5G)");
  std::string unit = text.substr(i);
  for (auto& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (unit.size() > 1 && (unit.substr(1) == "IB" || unit.substr(1) == "B")) unit.resize(1);
  int shift = 0;
  if (unit.empty() || unit == "B") shift = 0;
  else if (unit == "K") shift = 10;
  else if (unit == "M") shift = 20;
  else if (unit == "G") shift = 30;
  else if (unit == "T") shift = 40;
  else throw UserError("'" + text + "' has an unknown unit (use K, M, G or T)");
  if (shift && n > (~std::uint64_t{0} >> shift)) throw UserError("'" + text + "' is too large");
  return n << shift;
}

std::string format_byte_size(std::uint64_t bytes) {
  static const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB"};
  int u = 0;
  double v = static_cast<double>(bytes);
  while (v >= 1024 && u < 5) {
    v /= 1024;
    ++u;
  }
  char buf[64];
  if (u == 0) std::snprintf(buf, sizeof buf, "%llu bytes", static_cast<unsigned long long>(bytes));
  else if (v == static_cast<double>(static_cast<std::uint64_t>(v))) std::snprintf(buf, sizeof buf, "%.0f %s", v, units[u]);
  else std::snprintf(buf, sizeof buf, "%.2f %s", v, units[u]);
  return buf;
}

}  // namespace gcfs::cli
