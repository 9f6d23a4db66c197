// gpucryptfs info: a vault's format parameters (no password needed) and the GPUs this build can use.
#include <boost/program_options.hpp>
#include <iostream>

#include "crypto/gcm_impl.h"
#include "cuda/gpu_engine.h"
#include "fs/vault.h"
#include "mount/cli/cli_checks.h"
#include "mount/cli/cli_options.h"
#include "mount/cli/commands.h"
#include "mount/cli/config_option.h"
#include "mount/cli/exit_status.h"
#include "mount/cli/key_slot_text.h"

namespace po = boost::program_options;

namespace gcfs::cli {
namespace {

void print_gpus(std::ostream& out) {
  std::string why;
  auto gpus = list_gpus(&why);
  out << "GPU support:  " << (gpu_support_compiled() ? "compiled in" : "not compiled in (built without nvcc)") << "\n";
  if (gpus.empty()) {
    out << "GPUs:         none usable: " << why << "\n";
    return;
  }
  for (const auto& g : gpus)
    out << "GPU " << g.index << ":        " << g.name << ", " << g.sm_count << " SMs, compute capability " << g.cc_major
        << "." << g.cc_minor << ", " << (g.memory_bytes >> 20) << " MiB"
        << (g.pci_bus_id.empty() ? "" : ", PCI " + g.pci_bus_id)
        << (g.numa_node >= 0 ? ", NUMA node " + std::to_string(g.numa_node) : "") << "\n";
}

}  // namespace

int cmd_info(int argc, char** argv) {
  return run_command("info", [&]() -> int {
    std::string cipherdir, config_option;
    po::options_description opts("usage: gpucryptfs info [OPTIONS] [CIPHERDIR]\n\n"
                                 "Shows a vault's format parameters (no password needed, and never the master key) "
                                 "and the GPUs this build can use; without CIPHERDIR, just the GPUs.\n\noptions");
    opts.add_options()("help,h", "show this help");
    add_config_option(opts, &config_option);
    if (!parse_command_line(argc, argv, opts, {{"CIPHERDIR", &cipherdir, false}})) return kExitOk;
    if (!config_option.empty() && cipherdir.empty()) throw po::error("--config needs CIPHERDIR too");
    if (!cipherdir.empty()) {
      require_vault_directory(cipherdir, "info");
      const ConfigPlace place = config_place(cipherdir, config_option);
      VaultConfig c = load_vault_config(place);
      std::cout << "Vault:        " << cipherdir << "\n"
                << (place.outside ? "Config:       " + place.path() + "\n" : std::string())
                << "Format:       gpucryptfs version " << c.version
                << (c.version >= 2 ? " (chunk data 4 KiB-aligned: O_DIRECT)" : "") << ", directory\n"
                << "Cipher:       " << c.cipher << ", chunk size " << c.chunk_size << " bytes\n";
      // Nothing in the config is authenticated without the password: say what unlocking will refuse.
      print_key_slots(std::cout, c);
      std::cout << "Features:    ";
      for (const auto& f : c.features) std::cout << " " << f;
      std::cout << "\n";
      if (c.long_name_max)
        std::cout << "Names:        at most " << c.long_name_max << " bytes in CIPHERDIR (longer ones take the long form)\n";
      if (c.has_deterministic_names())
        std::cout << "Names:        deterministic (no per-directory IVs: the same name encrypts the same in every "
                     "directory)\n";
    }
    std::cout << "CPU engine:   AES-256-GCM by " << gcm_description() << "\n";
    print_gpus(std::cout);
    return kExitOk;
  });
}

}  // namespace gcfs::cli
