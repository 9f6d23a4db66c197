/* A wrapper for tests: runs a program under a seccomp filter that fails every io_uring_setup
 * with the errno given, as the kernel does when io_uring is disabled (kernel.io_uring_disabled=2:
 * EPERM), when the process is out of descriptors (EMFILE) or memory (ENOMEM). Unlike the sysctl,
 * it touches nothing outside the process tree it starts.
 *
 *   deny_io_uring EPERM|EMFILE|ENOMEM PROGRAM [ARGS...]
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(__x86_64__)
#define GCFS_AUDIT_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define GCFS_AUDIT_ARCH AUDIT_ARCH_AARCH64
#else
#error "deny_io_uring: add this architecture's AUDIT_ARCH"
#endif

#ifndef __NR_io_uring_setup
#define __NR_io_uring_setup 425 /* the same on every architecture's unified table */
#endif

static int errno_named(const char* name) {
  if (strcmp(name, "EPERM") == 0) return EPERM;
  if (strcmp(name, "EMFILE") == 0) return EMFILE;
  if (strcmp(name, "ENOMEM") == 0) return ENOMEM;
  return 0;
}

int main(int argc, char** argv) {
  const int err = argc >= 3 ? errno_named(argv[1]) : 0;
  if (!err) {
    fprintf(stderr, "usage: deny_io_uring EPERM|EMFILE|ENOMEM PROGRAM [ARGS...]\n");
    return 2;
  }
  struct sock_filter filter[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, GCFS_AUDIT_ARCH, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_setup, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ((unsigned)err & SECCOMP_RET_DATA)),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  struct sock_fprog prog = {(unsigned short)(sizeof filter / sizeof filter[0]), filter};
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0) {
    perror("deny_io_uring: seccomp");
    return 1;
  }
  execvp(argv[2], argv + 2);
  perror("deny_io_uring: exec");
  return 127;
}
