// Where a GPU sits on its host (cuda/host_numa.h): the NUMA node of a PCI slot and that node's CPUs,
// read from a made-up sysfs tree, so that the two-socket case is tested on any machine.
#include <gtest/gtest.h>
#include <sched.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "cuda/host_numa.h"

namespace gcfs::numa {
namespace {

namespace fs = std::filesystem;

class FakeSysfs {
 public:
  FakeSysfs() {
    std::string tmpl = (fs::temp_directory_path() / "gcfs-sysfs-XXXXXX").string();
    root_ = ::mkdtemp(tmpl.data());
  }
  ~FakeSysfs() { fs::remove_all(root_); }
  void write(const std::string& rel, const std::string& text) {
    const fs::path p = fs::path(root_) / rel;
    fs::create_directories(p.parent_path());
    std::ofstream(p) << text << "\n";
  }
  const std::string& root() const { return root_; }

 private:
  std::string root_;
};

TEST(HostNuma, ParsesKernelCpuLists) {
  EXPECT_EQ(parse_cpu_list("0-3,8,10-11"), (std::vector<int>{0, 1, 2, 3, 8, 10, 11}));
  EXPECT_EQ(parse_cpu_list("5"), (std::vector<int>{5}));
  EXPECT_EQ(parse_cpu_list(""), std::vector<int>{});
  EXPECT_EQ(parse_cpu_list("0-1\n"), (std::vector<int>{0, 1}));
  EXPECT_EQ(parse_cpu_list("3-1"), std::vector<int>{}) << "a range backwards is malformed";
  EXPECT_EQ(parse_cpu_list("1,x"), std::vector<int>{});
  EXPECT_EQ(parse_cpu_list("1-2-3"), std::vector<int>{});
}

TEST(HostNuma, FindsTheNodeOfAGpuOnATwoSocketHost) {
  FakeSysfs sys;
  sys.write("devices/system/node/online", "0-1");
  sys.write("devices/system/node/node0/cpulist", "0-15,32-47");
  sys.write("devices/system/node/node1/cpulist", "16-31,48-63");
  sys.write("bus/pci/devices/0000:3b:00.0/numa_node", "0");
  sys.write("bus/pci/devices/0000:af:00.0/numa_node", "1");
  sys.write("bus/pci/devices/0000:01:00.0/numa_node", "-1");
  EXPECT_EQ(online_nodes(sys.root()), 2);
  // CUDA names the bus in capitals; sysfs in lower case.
  EXPECT_EQ(node_of_pci_device("0000:3B:00.0", sys.root()), 0);
  EXPECT_EQ(node_of_pci_device("0000:AF:00.0", sys.root()), 1);
  EXPECT_EQ(node_of_pci_device("0000:01:00.0", sys.root()), -1) << "the firmware did not say";
  EXPECT_EQ(node_of_pci_device("0000:99:00.0", sys.root()), -1) << "no such device";
  EXPECT_EQ(node_of_pci_device("../../../etc", sys.root()), -1);
  const auto cpus = cpus_of_node(1, sys.root());
  ASSERT_EQ(cpus.size(), 32u);
  EXPECT_EQ(cpus.front(), 16);
  EXPECT_EQ(cpus.back(), 63);
  EXPECT_TRUE(cpus_of_node(-1, sys.root()).empty());
  EXPECT_TRUE(cpus_of_node(7, sys.root()).empty());
}

TEST(HostNuma, OneNodeOrAnUnknownNodeChangesNothing) {
  FakeSysfs sys;
  sys.write("devices/system/node/online", "0");
  EXPECT_EQ(online_nodes(sys.root()), 1);
  ScopedPreferredNode one_node(0, sys.root());
  EXPECT_FALSE(one_node.active());
  ScopedPreferredNode unknown(-1);
  EXPECT_FALSE(unknown.active());
  FakeSysfs empty;
  EXPECT_EQ(online_nodes(empty.root()), 1) << "no node information reads as one node";
}

TEST(HostNuma, BindsAThreadToTheGivenCpus) {
  cpu_set_t mine;
  ASSERT_EQ(sched_getaffinity(0, sizeof mine, &mine), 0);
  int allowed = -1;
  for (int c = 0; c < CPU_SETSIZE && allowed < 0; ++c)
    if (CPU_ISSET(c, &mine)) allowed = c;
  ASSERT_GE(allowed, 0);
  bool bound = false;
  int count = 0, which = -1;
  std::thread([&] {  // a thread of its own: the test's thread keeps its affinity
    bound = bind_thread_to_cpus({allowed});
    cpu_set_t now;
    sched_getaffinity(0, sizeof now, &now);
    count = CPU_COUNT(&now);
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &now)) which = c;
  }).join();
  EXPECT_TRUE(bound);
  EXPECT_EQ(count, 1);
  EXPECT_EQ(which, allowed);
  EXPECT_FALSE(bind_thread_to_cpus({})) << "an empty list binds nothing";
}

}  // namespace
}  // namespace gcfs::numa
