// Where a GPU sits on its host: the NUMA node of its PCI slot, that node's CPUs, and putting host
// memory and threads there. On a host with two sockets, a copy between a GPU and memory of the
// other socket crosses the socket link, and a thread feeding the GPU from the other socket pays for
// it on every launch; so each GPU's pinned buffers and its feeder threads belong on its own node.
// Plain C++ over sysfs and two system calls (no libnuma), with the sysfs root a parameter so that
// tests can hand it a made-up tree. On a host with one node, or where the node is unknown (-1),
// every call here does nothing.
#pragma once

#include <string>
#include <vector>

namespace gcfs::numa {

// "0-3,8,10-11" (a kernel cpulist or nodelist) -> {0,1,2,3,8,10,11}; empty where malformed.
std::vector<int> parse_cpu_list(const std::string& text);

// The NUMA node of a PCI device ("0000:3B:00.0" as CUDA names it; case does not matter), from
// <sysfs>/bus/pci/devices/<id>/numa_node; -1 where unknown.
int node_of_pci_device(const std::string& bus_id, const std::string& sysfs = "/sys");

// How many NUMA nodes are online (<sysfs>/devices/system/node/online); 1 where unknown.
int online_nodes(const std::string& sysfs = "/sys");

// The CPUs of a node (<sysfs>/devices/system/node/node<N>/cpulist); empty where unknown.
std::vector<int> cpus_of_node(int node, const std::string& sysfs = "/sys");

// Binds the calling thread to these CPUs. False (and no change) where the list is empty or the
// kernel refuses (a cpuset that excludes them, say).
bool bind_thread_to_cpus(const std::vector<int>& cpus);

// While alive, pages the calling thread touches for the first time come from `node` where it has
// free memory (MPOL_PREFERRED: never a failure where it has none); the thread's earlier policy is
// restored after. Does nothing for node < 0 or on a host with one node.
class ScopedPreferredNode {
 public:
  explicit ScopedPreferredNode(int node, const std::string& sysfs = "/sys");
  ~ScopedPreferredNode();
  ScopedPreferredNode(const ScopedPreferredNode&) = delete;
  ScopedPreferredNode& operator=(const ScopedPreferredNode&) = delete;
  bool active() const { return active_; }

 private:
  bool active_ = false;
  int old_mode_ = 0;
  unsigned long old_mask_[16] = {};  // up to 1024 nodes
};

}  // namespace gcfs::numa
