// Orderings that the kernel gives and ThreadSanitizer cannot see. A file handle made by OPEN on
// one thread is used by READs on others only after the kernel had OPEN's reply, and RELEASE comes
// only after every READ and WRITE on it was answered: the syscalls in between order the threads.
// TSan sees only user-space synchronisation; libfuse's session mutex, which every request it
// parses takes, used to stand in for it. READ and WRITE now bypass libfuse (mount/transport/session_io.h),
// so the hand-overs of a handle are told to TSan here. Nothing at all outside TSan builds.
#pragma once

#if defined(__SANITIZE_THREAD__)
#define GCFS_TSAN_HANDOVER 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define GCFS_TSAN_HANDOVER 1
#endif
#endif

#ifdef GCFS_TSAN_HANDOVER
extern "C" void __tsan_acquire(void* addr);
extern "C" void __tsan_release(void* addr);
#endif

namespace gcfs::mount {

// What this thread did to *p so far happens before whatever a later handover_acquire(p) follows.
inline void handover_release([[maybe_unused]] void* p) {
#ifdef GCFS_TSAN_HANDOVER
  __tsan_release(p);
#endif
}
inline void handover_acquire([[maybe_unused]] void* p) {
#ifdef GCFS_TSAN_HANDOVER
  __tsan_acquire(p);
#endif
}

}  // namespace gcfs::mount
