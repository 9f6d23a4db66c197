# Included from the top-level CMakeLists.txt, before include(CPack), which reads these there.
# cpack -G DEB: one package with all of the above. Its library dependencies come from
# dpkg-shlibdeps; fuse3 is named for fusermount3 and mount.fuse3, which are programs, not libraries.
set(CPACK_PACKAGE_NAME gpucryptfs)
set(CPACK_PACKAGE_VENDOR "gpucryptfs")
set(CPACK_PACKAGE_CONTACT "gpucryptfs maintainers")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "encrypted FUSE filesystem whose cipher work can run on a GPU")
set(CPACK_PACKAGE_DESCRIPTION "Directory vaults, block volumes and a reverse view for backups, with AES-256-GCM contents\
 and AES-256-SIV names; the cipher engine is the CPU (OpenSSL), a CUDA GPU, or both.")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION utils)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_STRIP_FILES ON)  # the debug info of RelWithDebInfo stays in the build tree
set(CPACK_DEBIAN_PACKAGE_DEPENDS "fuse3")
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "bash-completion")
set(CPACK_GENERATOR DEB)
