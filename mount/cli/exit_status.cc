// A verb's failure as its one-line message and documented exit code (exit_status.h).
#include "mount/cli/exit_status.h"

#include <boost/program_options/errors.hpp>
#include <iostream>

#include "crypto/errors.h"
#include "fs/vault.h"
#include "mount/cli/commands.h"
#include "mount/lifecycle/fuse_runner.h"

namespace gcfs::cli {

int exit_code_for(const std::exception& e) {
  if (auto* m = dynamic_cast<const mount::MountFailure*>(&e)) return m->exit_code;
  if (auto* c = dynamic_cast<const CodedError*>(&e)) return c->exit_code;
  if (dynamic_cast<const WrongPassword*>(&e)) return kExitWrongPassword;
  if (dynamic_cast<const VaultInUse*>(&e)) return kExitVaultInUse;
  if (dynamic_cast<const NotAVault*>(&e) || dynamic_cast<const CorruptData*>(&e)) return kExitBadConfig;
  if (dynamic_cast<const boost::program_options::error*>(&e)) return kExitUsage;
  return kExitError;
}

int run_command(const char* command, const std::function<int()>& body) {
  try {
    return body();
  } catch (const boost::program_options::error& e) {
    std::cerr << "gpucryptfs " << command << ": " << e.what() << " (see 'gpucryptfs " << command << " --help')\n";
    return kExitUsage;
  } catch (const std::exception& e) {
    std::cerr << "gpucryptfs " << command << ": " << e.what() << "\n";
    return exit_code_for(e);
  }
}

}  // namespace gcfs::cli
