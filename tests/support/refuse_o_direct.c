/* A preload library for tests: every open that asks for O_DIRECT fails with EINVAL, as it does on
 * a backing filesystem that refuses O_DIRECT (tmpfs before Linux 6.6, some network and FUSE
 * filesystems). The mounted suites preload it into the daemon to drive the buffered fallback of
 * --backing-io auto, and the refusal of --backing-io direct, on any machine. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <sys/types.h>

typedef int (*open_fn)(const char*, int, ...);
typedef int (*openat_fn)(int, const char*, int, ...);

static mode_t mode_of(int flags, va_list ap) {
  return (flags & (O_CREAT | O_TMPFILE)) ? (mode_t)va_arg(ap, int) : 0;
}

#define REFUSE_DIRECT(flags)    \
  do {                          \
    if ((flags) & O_DIRECT) {   \
      errno = EINVAL;           \
      return -1;                \
    }                           \
  } while (0)

int open(const char* path, int flags, ...) {
  va_list ap;
  va_start(ap, flags);
  mode_t mode = mode_of(flags, ap);
  va_end(ap);
  REFUSE_DIRECT(flags);
  return ((open_fn)dlsym(RTLD_NEXT, "open"))(path, flags, mode);
}

int open64(const char* path, int flags, ...) {
  va_list ap;
  va_start(ap, flags);
  mode_t mode = mode_of(flags, ap);
  va_end(ap);
  REFUSE_DIRECT(flags);
  return ((open_fn)dlsym(RTLD_NEXT, "open64"))(path, flags, mode);
}

int openat(int dirfd, const char* path, int flags, ...) {
  va_list ap;
  va_start(ap, flags);
  mode_t mode = mode_of(flags, ap);
  va_end(ap);
  REFUSE_DIRECT(flags);
  return ((openat_fn)dlsym(RTLD_NEXT, "openat"))(dirfd, path, flags, mode);
}

int openat64(int dirfd, const char* path, int flags, ...) {
  va_list ap;
  va_start(ap, flags);
  mode_t mode = mode_of(flags, ap);
  va_end(ap);
  REFUSE_DIRECT(flags);
  return ((openat_fn)dlsym(RTLD_NEXT, "openat64"))(dirfd, path, flags, mode);
}
