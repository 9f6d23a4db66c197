// PosixAcl on its own: the kernel's xattr form read and written back, and the kernel's rules for
// the mode an ACL implies, chmod and inheritance (fs/posix_acl.c), on hand-made ACLs.
#include <sys/stat.h>

#include <gtest/gtest.h>

#include "fs/posix_acl.h"

namespace gcfs {
namespace {

std::vector<std::uint8_t> acl_bytes(std::initializer_list<AclEntry> entries) {
  std::vector<std::uint8_t> out = {2, 0, 0, 0};
  for (const AclEntry& e : entries) {
    out.push_back(static_cast<std::uint8_t>(e.tag));
    out.push_back(static_cast<std::uint8_t>(e.tag >> 8));
    out.push_back(static_cast<std::uint8_t>(e.perm));
    out.push_back(0);
    for (int i = 0; i < 4; ++i) out.push_back(static_cast<std::uint8_t>(e.id >> (8 * i)));
  }
  return out;
}

constexpr std::uint32_t kNone = 0xffffffff;

TEST(PosixAclRules, ParsesTheKernelFormAndWritesItBack) {
  auto raw = acl_bytes({{PosixAcl::kUserObj, 6, kNone}, {PosixAcl::kUser, 4, 65534}, {PosixAcl::kGroupObj, 0, kNone},
                        {PosixAcl::kMask, 4, kNone}, {PosixAcl::kOther, 0, kNone}});
  auto acl = PosixAcl::parse(raw);
  ASSERT_TRUE(acl);
  EXPECT_EQ(acl->serialize(), raw);
  EXPECT_EQ(acl->permission_bits(), 0640u) << "the group bits show the mask";
  EXPECT_FALSE(acl->equivalent_to_mode());
  acl->apply_chmod(0750);
  EXPECT_EQ(acl->permission_bits(), 0750u);
  EXPECT_EQ(acl->entries()[1].perm, 4) << "named entries keep their permissions";
  EXPECT_EQ(acl->entries()[2].perm, 0) << "with a mask, chmod's group bits go to the mask";
}

TEST(PosixAclRules, RefusesMalformedAcls) {
  EXPECT_FALSE(PosixAcl::parse(std::vector<std::uint8_t>{}));
  auto good = acl_bytes({{PosixAcl::kUserObj, 6, kNone}, {PosixAcl::kGroupObj, 4, kNone}, {PosixAcl::kOther, 4, kNone}});
  auto wrong_version = good;
  wrong_version[0] = 1;
  EXPECT_FALSE(PosixAcl::parse(wrong_version));
  EXPECT_FALSE(PosixAcl::parse(std::span(good).first(good.size() - 1))) << "a partial entry";
  EXPECT_FALSE(PosixAcl::parse(acl_bytes({{PosixAcl::kUserObj, 6, kNone}, {PosixAcl::kOther, 4, kNone}})))
      << "no group entry";
  EXPECT_FALSE(PosixAcl::parse(acl_bytes({{PosixAcl::kUserObj, 6, kNone}, {PosixAcl::kUser, 4, 7},
                                          {PosixAcl::kGroupObj, 4, kNone}, {PosixAcl::kOther, 4, kNone}})))
      << "a named entry needs a mask";
  EXPECT_FALSE(PosixAcl::parse(acl_bytes({{PosixAcl::kUserObj, 6, kNone}, {0x40, 4, kNone},
                                          {PosixAcl::kGroupObj, 4, kNone}, {PosixAcl::kOther, 4, kNone}})));
  auto acl = PosixAcl::parse(good);
  ASSERT_TRUE(acl);
  EXPECT_TRUE(acl->equivalent_to_mode());
  EXPECT_EQ(acl->permission_bits(), 0644u);
}

TEST(PosixAclRules, NewEntriesInheritTheDefaultAclLimitedByTheRequestedMode) {
  // default: u::rwx u:nobody:rwx g::r-x m::rwx o::---; open(..., 0666) as creat does.
  auto def = PosixAcl::parse(acl_bytes({{PosixAcl::kUserObj, 7, kNone}, {PosixAcl::kUser, 7, 65534},
                                        {PosixAcl::kGroupObj, 5, kNone}, {PosixAcl::kMask, 7, kNone},
                                        {PosixAcl::kOther, 0, kNone}}));
  ASSERT_TRUE(def);
  mode_t mode = S_IFREG | 0666;
  PosixAcl access = def->inherit_for_new_entry(&mode);
  EXPECT_EQ(mode, S_IFREG | 0660u);
  EXPECT_EQ(access.permission_bits(), 0660u);
  EXPECT_EQ(access.entries()[1].perm, 7) << "named entries are inherited whole; the mask limits them";
  EXPECT_EQ(access.entries()[3].perm, 6);
  mode_t setgid_dir = S_IFDIR | S_ISGID | 0777;
  def->inherit_for_new_entry(&setgid_dir);
  EXPECT_EQ(setgid_dir, S_IFDIR | S_ISGID | 0770u) << "type and setid bits are kept";
}

}  // namespace
}  // namespace gcfs
