#include "cuda/host_numa.h"

#include <linux/mempolicy.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <sstream>

namespace gcfs::numa {
namespace {

std::string read_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line)) return {};
  return line;
}

constexpr unsigned long kMaskBits = 16 * 8 * sizeof(unsigned long);

}  // namespace

std::vector<int> parse_cpu_list(const std::string& text) {
  std::vector<int> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    item.erase(std::remove_if(item.begin(), item.end(), [](unsigned char c) { return std::isspace(c); }), item.end());
    if (item.empty()) continue;
    const auto dash = item.find('-');
    try {
      std::size_t used = 0;
      const int a = std::stoi(item.substr(0, dash), &used);
      if (used != (dash == std::string::npos ? item.size() : dash) || a < 0) return {};
      int b = a;
      if (dash != std::string::npos) {
        const std::string rest = item.substr(dash + 1);
        b = std::stoi(rest, &used);
        if (used != rest.size() || b < a) return {};
      }
      if (b - a > 65536) return {};
      for (int c = a; c <= b; ++c) out.push_back(c);
    } catch (const std::exception&) {
      return {};
    }
  }
  return out;
}

int node_of_pci_device(const std::string& bus_id, const std::string& sysfs) {
  std::string id = bus_id;
  for (char& c : id) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (id.empty() || id.find('/') != std::string::npos || id.find("..") != std::string::npos) return -1;
  const std::string text = read_line(sysfs + "/bus/pci/devices/" + id + "/numa_node");
  try {
    std::size_t used = 0;
    const int node = std::stoi(text, &used);
    return used > 0 && node >= 0 ? node : -1;
  } catch (const std::exception&) {
    return -1;
  }
}

int online_nodes(const std::string& sysfs) {
  const auto nodes = parse_cpu_list(read_line(sysfs + "/devices/system/node/online"));
  return nodes.empty() ? 1 : static_cast<int>(nodes.size());
}

std::vector<int> cpus_of_node(int node, const std::string& sysfs) {
  if (node < 0) return {};
  return parse_cpu_list(read_line(sysfs + "/devices/system/node/node" + std::to_string(node) + "/cpulist"));
}

bool bind_thread_to_cpus(const std::vector<int>& cpus) {
  if (cpus.empty()) return false;
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : cpus)
    if (c >= 0 && c < CPU_SETSIZE) CPU_SET(c, &set);
  return CPU_COUNT(&set) > 0 && sched_setaffinity(0, sizeof set, &set) == 0;
}

ScopedPreferredNode::ScopedPreferredNode(int node, const std::string& sysfs) {
  if (node < 0 || static_cast<unsigned long>(node) >= kMaskBits || online_nodes(sysfs) < 2) return;
  if (syscall(SYS_get_mempolicy, &old_mode_, old_mask_, kMaskBits, nullptr, 0UL) != 0) return;
  unsigned long mask[16] = {};
  mask[node / (8 * sizeof(unsigned long))] |= 1UL << (node % (8 * sizeof(unsigned long)));
  active_ = syscall(SYS_set_mempolicy, MPOL_PREFERRED, mask, kMaskBits) == 0;
}

ScopedPreferredNode::~ScopedPreferredNode() {
  if (!active_) return;
  // The earlier policy back (the default one, almost always: no mask then).
  if (old_mode_ == MPOL_DEFAULT) syscall(SYS_set_mempolicy, MPOL_DEFAULT, nullptr, 0UL);
  else syscall(SYS_set_mempolicy, old_mode_, old_mask_, kMaskBits);
}

}  // namespace gcfs::numa
