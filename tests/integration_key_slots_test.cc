// Key slots end to end (docs/USAGE.md, "Key slots"): several ways into one vault or volume, each
// opening it (mounted, a file read back), each removable on its own; the last is kept; a key
// file with one byte changed, a removed slot and an edited config are refused with their exit
// statuses; the stored vaults of config version 1 keep opening and take a slot.
#include <sys/stat.h>

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "support/mounted_vault.h"

#ifndef GCFS_SOURCE_DIR
#error "GCFS_SOURCE_DIR must name the source tree (for tests/data)"
#endif

namespace gcfs::test {
namespace {

using json = nlohmann::json;

std::string q(const std::string& s) { return shell_quote(s); }

class KeySlotCli : public ::testing::Test {
 protected:
  KeySlotCli() : root_("gcfs-keyslots") {
    cipher_ = root_.path() + "/cipher";
    plain_ = root_.path() + "/plain";
    log_ = root_.path() + "/log";
    ::mkdir(cipher_.c_str(), 0700);
    ::mkdir(plain_.c_str(), 0700);
    secret("pw0", "first password\n");
    secret("pw1", "second password\n");
    secret("pw2", "third password\n");
    // A key file's whole content is its secret: binary, with a NUL and newlines.
    std::string key(4096, '\0');
    for (std::size_t i = 0; i < key.size(); ++i) key[i] = static_cast<char>((i * 131 + 7) % 256);
    key[10] = '\n';
    secret("kf", key);
    key[2000] ^= 1;
    secret("kf-changed", key);
  }
  ~KeySlotCli() override { unmount(); }

  void secret(const std::string& name, const std::string& content) {
    write_file(file(name), content);
    ::chmod(file(name).c_str(), 0600);
  }
  std::string file(const std::string& name) const { return root_.path() + "/" + name; }
  // `gpucryptfs ARGS`, standard input closed to prompts.
  CommandResult gc(const std::string& args) const { return run_shell(test_binary() + " " + args + " </dev/null"); }
  std::string config_path() const { return cipher_ + "/gpucryptfs.conf"; }

  // Mounts with the unlock options given, reads the file "f" back and unmounts; the exit status
  // of the mount and what was read.
  std::pair<int, std::string> mount_and_read(const std::string& unlock) {
    const CommandResult m = gc("mount --engine cpu" + transport_arg() + " --log " + q(log_) + " " + unlock + " " +
                               q(cipher_) + " " + q(plain_));
    if (m.status != 0) return {m.status, m.output};
    mounted_ = true;
    const std::string got = read_file(plain_ + "/f");
    unmount();
    return {0, got};
  }
  void unmount() {
    if (!mounted_) return;
    run_shell(MountedVault::unmount_command(false) + q(plain_) + " || " + MountedVault::unmount_command(true) + q(plain_));
    mounted_ = false;
  }
  // A vault with "f" in it and three slots: 0 pw0, 1 pw1, 2 the key file.
  void three_slots() {
    ASSERT_EQ(gc("init -q --scrypt-logn 10 --passfile " + q(file("pw0")) + " " + q(cipher_)).status, 0);
    ASSERT_EQ(gc("mount --engine cpu" + transport_arg() + " --log " + q(log_) + " --passfile " + q(file("pw0")) + " " +
                 q(cipher_) + " " + q(plain_)).status, 0);
    mounted_ = true;
    write_file(plain_ + "/f", "the contents\n");
    unmount();
    CommandResult r = gc("keyslot add --passfile " + q(file("pw0")) + " --new-passfile " + q(file("pw1")) + " " + q(cipher_));
    ASSERT_EQ(r.status, 0) << r.output;
    EXPECT_NE(r.output.find("Added key slot 1 (a password"), std::string::npos) << r.output;
    r = gc("keyslot add --passfile " + q(file("pw1")) + " --new-keyfile " + q(file("kf")) + " " + q(cipher_));
    ASSERT_EQ(r.status, 0) << r.output;
    EXPECT_NE(r.output.find("Unlocked with key slot 1"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("Added key slot 2 (a key file"), std::string::npos) << r.output;
  }
  void edit_config(const std::function<void(json&)>& f) {
    json j = json::parse(read_file(config_path()));
    f(j);
    write_file(config_path(), j.dump(2));
  }

  TempDir root_;
  std::string cipher_, plain_, log_;
  bool mounted_ = false;
};

TEST_F(KeySlotCli, ThreeSlotsEachMountTheVaultAndTheLogSaysWhich) {
  three_slots();
  CommandResult list = gc("keyslot list " + q(cipher_));
  ASSERT_EQ(list.status, 0) << list.output;
  EXPECT_EQ(list.output, "slot 0: password, scrypt N=2^10 r=8 p=1\nslot 1: password, scrypt N=2^10 r=8 p=1\n"
                         "slot 2: key file, scrypt N=2^10 r=8 p=1\n");
  const CommandResult info = gc("info " + q(cipher_));
  EXPECT_NE(info.output.find("Keys:         config version 2, 3 key slots"), std::string::npos) << info.output;
  const std::pair<std::string, std::string> ways[] = {{"--passfile " + q(file("pw0")), "key slot 0 (a password)"},
                                                      {"--passfile " + q(file("pw1")), "key slot 1 (a password)"},
                                                      {"--keyfile " + q(file("kf")), "key slot 2 (a key file)"}};
  for (const auto& [unlock, slot] : ways) {
    SCOPED_TRACE(unlock);
    ::truncate(log_.c_str(), 0);
    EXPECT_EQ(mount_and_read(unlock), std::make_pair(0, std::string("the contents\n")));
    EXPECT_NE(read_file(log_).find("unlocked with " + slot), std::string::npos) << read_file(log_);
  }
  // The fstab form takes keyfile= as mount takes --keyfile.
  const CommandResult helper = run_shell(test_binary() + " " + q(cipher_) + " " + q(plain_) + " -o keyfile=" +
                                         file("kf") + ",engine=cpu,log=" + log_ + ",transport=" + test_transport() +
                                         " </dev/null");
  ASSERT_EQ(helper.status, 0) << helper.output;
  mounted_ = true;
  EXPECT_EQ(read_file(plain_ + "/f"), "the contents\n");
}

TEST_F(KeySlotCli, RemovedSlotOpensNothingAndTheLastSlotIsKept) {
  three_slots();
  CommandResult r = gc("keyslot remove --slot 1 --keyfile " + q(file("kf")) + " " + q(cipher_));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(mount_and_read("--passfile " + q(file("pw1"))).first, 12);
  EXPECT_EQ(mount_and_read("--passfile " + q(file("pw0"))).first, 0);
  ASSERT_EQ(gc("keyslot remove --slot 0 --passfile " + q(file("pw0")) + " " + q(cipher_)).status, 0);
  const std::string before = read_file(config_path());
  r = gc("keyslot remove --slot 2 --keyfile " + q(file("kf")) + " " + q(cipher_));
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("is the last one"), std::string::npos) << r.output;
  EXPECT_EQ(read_file(config_path()), before) << "a refused remove changes nothing";
  EXPECT_EQ(mount_and_read("--keyfile " + q(file("kf"))), std::make_pair(0, std::string("the contents\n")));
  // A slot that is not there; a key file where a password is needed.
  EXPECT_EQ(gc("keyslot remove --slot 5 --keyfile " + q(file("kf")) + " " + q(cipher_)).status, 1);
  EXPECT_EQ(mount_and_read("--passfile " + q(file("pw0"))).first, 12);
}

TEST_F(KeySlotCli, KeyFileWithOneByteChangedOrEmptyIsRefused) {
  three_slots();
  auto changed = mount_and_read("--keyfile " + q(file("kf-changed")));
  EXPECT_EQ(changed.first, 12) << changed.second;
  EXPECT_NE(changed.second.find("wrong key file"), std::string::npos) << changed.second;
  secret("empty", "");
  EXPECT_EQ(mount_and_read("--keyfile " + q(file("empty"))).first, 22);
  EXPECT_EQ(mount_and_read("--keyfile " + q(file("kf")) + " --passfile " + q(file("pw0"))).first, 2);
  EXPECT_EQ(gc("fsck --keyfile " + q(file("kf-changed")) + " " + q(cipher_)).status, 12);
  EXPECT_EQ(gc("fsck --keyfile " + q(file("kf")) + " " + q(cipher_)).status, 0);
}

// Edits by someone who can write the config but knows no secret.
TEST_F(KeySlotCli, EditedConfigIsRefusedWithTheRightExit) {
  three_slots();
  const std::string good = read_file(config_path());
  // A slot's wrap changed: that slot opens nothing (12), the others still do.
  edit_config([](json& j) { j["keyslots"][1]["encrypted_key"]["tag"] = "AAAAAAAAAAAAAAAAAAAAAA=="; });
  EXPECT_EQ(mount_and_read("--passfile " + q(file("pw1"))).first, 12);
  EXPECT_EQ(mount_and_read("--passfile " + q(file("pw0"))).first, 0);
  // A slot taken out of the file: its secret opens nothing.
  write_file(config_path(), good);
  edit_config([](json& j) { j["keyslots"].erase(2); });
  EXPECT_EQ(mount_and_read("--keyfile " + q(file("kf"))).first, 12);
  // Every slot taken out: damage, said plainly (23).
  edit_config([](json& j) { j["keyslots"] = json::array(); });
  auto none = mount_and_read("--passfile " + q(file("pw0")));
  EXPECT_EQ(none.first, 23) << none.second;
  EXPECT_NE(none.second.find("no key slot left"), std::string::npos) << none.second;
  EXPECT_EQ(gc("keyslot list " + q(cipher_)).status, 23);
  // A cost raised: within init's range the slot's wrap fails (12); above it, refused at once (23).
  write_file(config_path(), good);
  edit_config([](json& j) { j["keyslots"][0]["kdf"]["log_n"] = 11; });
  EXPECT_EQ(mount_and_read("--passfile " + q(file("pw0"))).first, 12);
  write_file(config_path(), good);
  edit_config([](json& j) { j["keyslots"][1]["kdf"]["p"] = 4; });
  auto costly = mount_and_read("--passfile " + q(file("pw0")));
  EXPECT_EQ(costly.first, 23) << costly.second;
  EXPECT_NE(costly.second.find("key slot 1 of the config asks for scrypt N=2^10, r=8, p=4"), std::string::npos)
      << costly.second;
  // A field that decides how the vault is read: no slot opens (12).
  write_file(config_path(), good);
  edit_config([](json& j) { j["chunk_size"] = 65536; });
  EXPECT_EQ(mount_and_read("--keyfile " + q(file("kf"))).first, 12);
  write_file(config_path(), good);
  EXPECT_EQ(mount_and_read("--keyfile " + q(file("kf"))).first, 0);
}

TEST_F(KeySlotCli, PasswdChangesTheSlotThatOpenedIt) {
  three_slots();
  const CommandResult r =
      gc("passwd --passfile " + q(file("pw1")) + " --new-passfile " + q(file("pw2")) + " " + q(cipher_));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("Key slot 1 changed"), std::string::npos) << r.output;
  EXPECT_EQ(mount_and_read("--passfile " + q(file("pw1"))).first, 12);
  EXPECT_EQ(mount_and_read("--passfile " + q(file("pw2"))).first, 0);
  EXPECT_EQ(mount_and_read("--passfile " + q(file("pw0"))).first, 0);
  EXPECT_EQ(mount_and_read("--keyfile " + q(file("kf"))).first, 0);
}

TEST_F(KeySlotCli, MasterKeyAddsASlot) {
  const CommandResult init = gc("init --scrypt-logn 10 --passfile " + q(file("pw0")) + " " + q(cipher_));
  ASSERT_EQ(init.status, 0) << init.output;
  const std::string marker = "Your master key is:\n\n    ";
  const auto at = init.output.find(marker);
  ASSERT_NE(at, std::string::npos) << init.output;
  secret("mk", init.output.substr(at + marker.size(), 71) + "\n");
  CommandResult r = gc("keyslot add --masterkey-file " + q(file("mk")) + " --new-keyfile " + q(file("kf")) + " " + q(cipher_));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("Added key slot 1 (a key file"), std::string::npos) << r.output;
  secret("mk-wrong", std::string(71, '0') + "\n");
  r = gc("keyslot add --masterkey-file " + q(file("mk-wrong")) + " --new-passfile " + q(file("pw1")) + " " + q(cipher_));
  EXPECT_EQ(r.status, 14) << r.output;
  const CommandResult list = gc("keyslot list " + q(cipher_));
  EXPECT_EQ(list.output, "slot 0: password, scrypt N=2^10 r=8 p=1\nslot 1: key file, scrypt N=2^10 r=8 p=1\n");
}

TEST_F(KeySlotCli, VolumeSlotsOpenAndComeAndGo) {
  const std::string c = q(root_.path() + "/c.gcv"), mnt = q(plain_);
  ASSERT_EQ(gc("volume create --size 1M --scrypt-logn 10 --passfile " + q(file("pw0")) + " " + c).status, 0);
  CommandResult r = gc("volume keyslot add --passfile " + q(file("pw0")) + " --new-keyfile " + q(file("kf")) + " " + c);
  ASSERT_EQ(r.status, 0) << r.output;
  r = gc("volume keyslot list " + c);
  EXPECT_EQ(r.output, "slot 0: password, scrypt N=2^10 r=8 p=1\nslot 1: key file, scrypt N=2^10 r=8 p=1\n");
  EXPECT_NE(gc("volume info " + c).output.find("config version 2, 2 key slots"), std::string::npos);
  auto mount_volume = [&](const std::string& unlock) {
    return gc("volume mount --engine cpu" + transport_arg() + " --log " + q(log_) + " " + unlock + " " + c + " " + mnt);
  };
  // Written under the password, read back under the key file.
  ASSERT_EQ(mount_volume("--passfile " + q(file("pw0"))).status, 0);
  mounted_ = true;
  ASSERT_EQ(run_shell("printf 'volume bytes' | dd of=" + q(plain_ + "/volume.img") + " bs=4096 seek=3 conv=notrunc,fsync status=none").status, 0);
  unmount();
  ::truncate(log_.c_str(), 0);
  ASSERT_EQ(mount_volume("--keyfile " + q(file("kf"))).status, 0);
  mounted_ = true;
  EXPECT_EQ(run_shell("dd if=" + q(plain_ + "/volume.img") + " bs=4096 skip=3 count=1 status=none | head -c 12").output,
            "volume bytes");
  unmount();
  EXPECT_NE(read_file(log_).find("unlocked with key slot 1 (a key file)"), std::string::npos) << read_file(log_);
  EXPECT_EQ(mount_volume("--keyfile " + q(file("kf-changed"))).status, 12);
  // Slot 0 removed from both header copies: the password opens neither.
  const std::string container = root_.path() + "/c.gcv";
  const std::string before = read_file(container).substr(0, 8192);
  r = gc("volume keyslot remove --slot 0 --keyfile " + q(file("kf")) + " " + c);
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(mount_volume("--passfile " + q(file("pw0"))).status, 12);
  // A removal cut short after its first header write (the older copy still holds slot 0): the
  // password opens that copy, said as a fallback, and running the removal again finishes it.
  const std::string after = read_file(container).substr(0, 8192);
  const auto generation = [](const std::string& h, std::size_t at) {
    std::uint64_t g = 0;
    for (std::size_t i = 0; i < 8; ++i) g = (g << 8) | static_cast<unsigned char>(h[at + 8 + i]);
    return g;
  };
  const std::size_t first = generation(after, 0) < generation(after, 4096) ? 0 : 4096;
  std::string cut = before;
  cut.replace(first, 4096, after.substr(first, 4096));
  {
    std::fstream f(container, std::ios::in | std::ios::out | std::ios::binary);
    f.write(cut.data(), static_cast<std::streamsize>(cut.size()));
  }
  r = mount_volume("--passfile " + q(file("pw0")));
  ASSERT_EQ(r.status, 0) << r.output;
  mounted_ = true;
  EXPECT_NE(r.output.find("newest copy of the volume header was not used"), std::string::npos) << r.output;
  unmount();
  r = gc("volume keyslot remove --slot 0 --keyfile " + q(file("kf")) + " " + c);
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(mount_volume("--passfile " + q(file("pw0"))).status, 12);
  r = gc("volume keyslot remove --slot 1 --keyfile " + q(file("kf")) + " " + c);
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("is the last one"), std::string::npos) << r.output;
  // passwd and resize work through the remaining key file slot.
  r = gc("volume passwd --keyfile " + q(file("kf")) + " --new-passfile " + q(file("pw2")) + " " + c);
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("Key slot 1 changed"), std::string::npos) << r.output;
  r = gc("volume resize --size 2M --passfile " + q(file("pw2")) + " " + c);
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(gc("volume fsck --passfile " + q(file("pw2")) + " " + c).status, 0);
}

// A vault, a volume and a reverse view whose first slot is a key file: no password anywhere.
TEST_F(KeySlotCli, InitVolumeCreateAndReverseWithAKeyFileOnly) {
  const std::string kf = " --keyfile " + q(file("kf")) + " ";
  ASSERT_EQ(gc("init -q --scrypt-logn 10" + kf + q(cipher_)).status, 0);
  EXPECT_EQ(gc("keyslot list " + q(cipher_)).output, "slot 0: key file, scrypt N=2^10 r=8 p=1\n");
  EXPECT_EQ(mount_and_read(kf).first, 0);
  const auto pw = mount_and_read("--passfile " + q(file("pw0")));
  EXPECT_EQ(pw.first, 12) << pw.second;
  EXPECT_NE(pw.second.find("no password slot"), std::string::npos) << pw.second;

  const std::string c = q(root_.path() + "/c.gcv");
  ASSERT_EQ(gc("volume create --size 1M --scrypt-logn 10" + kf + c).status, 0);
  ASSERT_EQ(gc("volume mount --engine cpu" + transport_arg() + " --log " + q(log_) + kf + c + " " + q(plain_)).status, 0);
  mounted_ = true;
  struct stat st {};
  EXPECT_EQ(::stat((plain_ + "/volume.img").c_str(), &st), 0);
  EXPECT_EQ(st.st_size, 1 << 20);
  unmount();

  const std::string folder = root_.path() + "/folder";
  ::mkdir(folder.c_str(), 0700);
  write_file(folder + "/note", "plain\n");
  ASSERT_EQ(gc("init -q --reverse --scrypt-logn 10" + kf + q(folder)).status, 0);
  ASSERT_EQ(gc("mount --reverse" + kf + "--log " + q(log_) + " " + q(folder) + " " + q(plain_)).status, 0);
  mounted_ = true;
  EXPECT_NE(read_file(plain_ + "/gpucryptfs.conf").find("\"keyfile\""), std::string::npos);
  unmount();
}

// tests/data/vault-vN were made before key slots (config version 1, password "stored vault"):
// they keep opening, and the first `keyslot add` upgrades them in place.
class StoredVaultKeySlots : public ::testing::TestWithParam<int> {};

TEST_P(StoredVaultKeySlots, OldConfigOpensAndTakesAKeyFileSlot) {
  TempDir t("gcfs-stored-slots");
  const std::string cipher = t.path() + "/cipher", plain = t.path() + "/plain", pw = t.path() + "/pw",
                    kf = t.path() + "/kf", bin = test_binary();
  const std::string src = std::string(GCFS_SOURCE_DIR) + "/tests/data/vault-v" + std::to_string(GetParam());
  ASSERT_EQ(run_shell("cp -a " + q(src) + " " + q(cipher) + " && mkdir " + q(plain) + " && printf 'stored vault\\n' > " +
                      q(pw) + " && head -c 300 /dev/urandom > " + q(kf) + " && chmod 600 " + q(pw) + " " + q(kf))
                .status,
            0);
  auto r = run_shell(bin + " keyslot list " + q(cipher));
  EXPECT_NE(r.output.find("config version 1: one password"), std::string::npos) << r.output;
  EXPECT_EQ(run_shell(bin + " keyslot add --masterkey-file " + q(pw) + " --new-keyfile " + q(kf) + " " + q(cipher)).status, 1)
      << "the master key cannot carry the old password over";
  r = run_shell(bin + " keyslot add --passfile " + q(pw) + " --new-keyfile " + q(kf) + " " + q(cipher));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("Upgraded"), std::string::npos) << r.output;
  r = run_shell(bin + " info " + q(cipher));
  EXPECT_NE(r.output.find("gpucryptfs version " + std::to_string(GetParam())), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("config version 2, 2 key slots"), std::string::npos) << r.output;
  for (const std::string& unlock : {"--keyfile " + q(kf), "--passfile " + q(pw)}) {
    r = run_shell(bin + " mount --engine cpu" + transport_arg() + " " + unlock + " --log " + q(t.path() + "/log") + " " +
                  q(cipher) + " " + q(plain));
    ASSERT_EQ(r.status, 0) << unlock << ": " << r.output;
    EXPECT_EQ(run_shell("cd " + q(plain) + " && sha256sum -c MANIFEST.sha256").status, 0) << unlock;
    run_shell(MountedVault::unmount_command(false) + q(plain) + " || " + MountedVault::unmount_command(true) + q(plain));
  }
}

INSTANTIATE_TEST_SUITE_P(Versions, StoredVaultKeySlots, ::testing::Values(1, 2),
                         [](const auto& info) { return "v" + std::to_string(info.param); });

}  // namespace
}  // namespace gcfs::test
