// The pieces of issue 13 that need no mount: the mount helper's command line (mount.fuse3 and
// mount(8) forms), --idle's durations, and the master key's printed form.
#include <gtest/gtest.h>

#include <boost/program_options/errors.hpp>
#include <string>
#include <vector>

#include "crypto/errors.h"
#include "crypto/master_key_text.h"
#include "mount/cli/fstab_args.h"
#include "mount/daemon/idle_timer.h"

namespace gcfs::cli {
namespace {

using Args = std::vector<std::string>;

// mount.fuse3 (fuse3 3.14) for the fstab line
//   /srv/c /srv/p fuse.gpucryptfs passfile=/pw,engine=cpu,ro,allow_other,default_permissions,nofail,_netdev 0 0
// runs: gpucryptfs /srv/c /srv/p -o ro,passfile=/pw,engine=cpu,allow_other,default_permissions,dev,suid
// (it drops nofail and _netdev, and adds dev,suid); as seen with a wrapper script in its place.
TEST(MountHelperArgs, MountFuse3FormBecomesTheMountCommand) {
  const auto h = translate_mount_helper_args(
      {"/srv/c", "/srv/p", "-o", "ro,passfile=/pw,engine=cpu,allow_other,default_permissions,dev,suid"});
  EXPECT_FALSE(h.fake);
  EXPECT_EQ(h.mount, (Args{"mount", "--read-only", "--passfile", "/pw", "--engine", "cpu", "--allow-other", "/srv/c", "/srv/p"}));
}

// mount(8) running a mount.fuse.gpucryptfs link itself passes nofail and _netdev, and -t.
TEST(MountHelperArgs, MountHelperFormWithTypeAndUserspaceOptions) {
  const auto h = translate_mount_helper_args({"/srv/c", "/srv/p", "-o",
                                              "rw,extpass=pass show v,nofail,_netdev,x-systemd.automount,"
                                              "x-systemd.idle-timeout=5min,noexec,noatime,idle=15m,config=/etc/v.conf",
                                              "-t", "fuse.gpucryptfs"});
  EXPECT_EQ(h.mount, (Args{"mount", "--extpass", "pass show v", "--idle", "15m", "--config", "/etc/v.conf", "-o",
                           "noexec,noatime", "/srv/c", "/srv/p"}));
  EXPECT_EQ(translate_mount_helper_args({"-n", "-v", "-r", "/c", "/p"}).mount, (Args{"mount", "--read-only", "/c", "/p"}));
  EXPECT_TRUE(translate_mount_helper_args({"-f", "/c", "/p"}).fake);
  EXPECT_EQ(translate_mount_helper_args({"/c", "/p", "-opassfile=a\\,b"}).mount, (Args{"mount", "--passfile", "a,b", "/c", "/p"}));
}

// The mount options that came with FUSE over io_uring and direct backing I/O.
TEST(MountHelperArgs, BadnameRepeatsAndCtlsockBecomeMountOptions) {
  EXPECT_EQ(translate_mount_helper_args({"/c", "/p", "-o", "passfile=/pw,badname=*conflict*,badname=*.sync-conflict-*,ctlsock=/run/v.sock"}).mount,
            (Args{"mount", "--passfile", "/pw", "--badname", "*conflict*", "--badname", "*.sync-conflict-*", "--ctlsock",
                  "/run/v.sock", "/c", "/p"}));
}

TEST(MountHelperArgs, TransportAndBackingIoBecomeMountOptions) {
  EXPECT_EQ(translate_mount_helper_args({"/c", "/p", "-o", "passfile=/pw,transport=uring,backing-io=direct,nofail"}).mount,
            (Args{"mount", "--passfile", "/pw", "--transport", "uring", "--backing-io", "direct", "/c", "/p"}));
  for (const std::string v : {"auto", "classic"})
    EXPECT_EQ(translate_mount_helper_args({"/c", "/p", "-o", "transport=" + v}).mount, (Args{"mount", "--transport", v, "/c", "/p"}));
  for (const std::string v : {"auto", "buffered"})
    EXPECT_EQ(translate_mount_helper_args({"/c", "/p", "-obacking-io=" + v}).mount, (Args{"mount", "--backing-io", v, "/c", "/p"}));
  // Without a value, or with an empty one: refused by name (a value mount does not know is
  // refused by mount itself, naming the option).
  for (const std::string o : {"transport", "transport=", "backing-io", "backing-io="}) {
    try {
      translate_mount_helper_args({"/c", "/p", "-o", o});
      ADD_FAILURE() << "accepted " << o;
    } catch (const boost::program_options::error& e) {
      EXPECT_NE(std::string(e.what()).find("'" + o + "'"), std::string::npos) << e.what();
    }
  }
  // The spelling with an underscore is no option of ours.
  EXPECT_THROW(translate_mount_helper_args({"/c", "/p", "-o", "backing_io=direct"}), boost::program_options::error);
}

TEST(MountHelperArgs, UnknownOptionsAndFlagsAreRefusedByName) {
  for (const auto& [args, name] : std::vector<std::pair<Args, std::string>>{
           {{"/c", "/p", "-o", "passfile=/pw,bogus"}, "'bogus'"},
           {{"/c", "/p", "-o", "passfile=/pw,engine"}, "'engine'"},
           {{"/c", "/p", "-o", "passfile="}, "'passfile='"},
           {{"/c", "/p", "-o", "suid=1"}, "'suid=1'"},
           {{"/c", "/p", "-x"}, "'-x'"},
       }) {
    try {
      translate_mount_helper_args(args);
      ADD_FAILURE() << "accepted " << args.back();
    } catch (const boost::program_options::error& e) {
      EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(translate_mount_helper_args({"/c"}), boost::program_options::error);
  EXPECT_THROW(translate_mount_helper_args({"/c", "/p", "/q"}), boost::program_options::error);
  EXPECT_THROW(translate_mount_helper_args({"/c", "/p", "-o"}), boost::program_options::error);
}

TEST(MountHelperArgs, OnlyPathsOrAMountLinkSelectTheHelperForm) {
  auto call = [](Args a) {
    std::vector<char*> v;
    for (auto& s : a) v.push_back(s.data());
    return is_mount_helper_call(static_cast<int>(v.size()), v.data());
  };
  EXPECT_TRUE(call({"gpucryptfs", "/srv/c", "/srv/p", "-o", "ro"}));
  EXPECT_TRUE(call({"/sbin/mount.fuse.gpucryptfs", "c", "p"}));
  EXPECT_FALSE(call({"gpucryptfs", "mount", "c", "p"}));
  EXPECT_FALSE(call({"gpucryptfs", "mout", "c"}));  // a typo of a command stays "unknown command"
  EXPECT_FALSE(call({"gpucryptfs", "--help"}));
  EXPECT_FALSE(call({"gpucryptfs", "/srv/c"}));
}

TEST(IdleDuration, GocryptfsAndSystemdSpellings) {
  using std::chrono::milliseconds;
  EXPECT_EQ(mount::parse_duration("--idle", "90"), milliseconds(90'000));
  EXPECT_EQ(mount::parse_duration("--idle", "90s"), milliseconds(90'000));
  EXPECT_EQ(mount::parse_duration("--idle", "500ms"), milliseconds(500));
  EXPECT_EQ(mount::parse_duration("--idle", "15m"), milliseconds(900'000));
  EXPECT_EQ(mount::parse_duration("--idle", "15min"), milliseconds(900'000));
  EXPECT_EQ(mount::parse_duration("--idle", "2h45m"), milliseconds((2 * 3600 + 45 * 60) * 1000LL));
  EXPECT_EQ(mount::parse_duration("--idle", "1.5s"), milliseconds(1500));
  for (const char* bad : {"", "0", "0s", "s", "5x", "-5", "5 s", "1h 2", "10 20", "99999999999999999"})
    EXPECT_THROW(mount::parse_duration("--idle", bad), boost::program_options::error) << bad;
}

TEST(MasterKeyText, PrintedFormReadsBackWithOrWithoutDashes) {
  SecretBytes key(32);
  for (std::size_t i = 0; i < key.size(); ++i) key[i] = static_cast<std::uint8_t>(i * 37 + 5);
  const SecretString text = format_master_key(key);
  EXPECT_EQ(text.size(), 64u + 7u);
  EXPECT_EQ(std::string(text.view()).substr(0, 18), "052a4f74-99bee308-");
  EXPECT_EQ(parse_master_key(text), key);
  std::string plain;
  for (char c : text.view())
    if (c != '-') plain += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  EXPECT_EQ(parse_master_key(SecretString(plain)), key);
  EXPECT_EQ(parse_master_key(SecretString("  " + std::string(text.view()) + "\t")), key);
}

TEST(MasterKeyText, MalformedKeysAreRefusedWithoutQuotingThem) {
  const std::string good(64, 'a');
  for (const std::string& bad : {good.substr(1), good + "a", good.substr(1) + "g", std::string("")}) {
    try {
      parse_master_key(SecretString(bad));
      ADD_FAILURE() << "accepted " << bad;
    } catch (const UserError& e) {
      if (!bad.empty()) {
        EXPECT_EQ(std::string(e.what()).find(bad), std::string::npos) << e.what();
      }
    }
  }
}

}  // namespace
}  // namespace gcfs::cli
