// An allocator for objects that come and go by the thousand beside objects that stay: a file's
// ContentFile (3.5 KiB, made at open, freed at the last close) beside its Inode (kept while the
// kernel knows the file). From malloc, every freed ContentFile left a hole of 3.5 KiB among
// inodes that the next small allocations split, so the next ContentFile came from fresh memory:
// creating 100,000 empty files left some 40 MB free but resident in malloc's heaps (mallinfo2)
// for 77 MB in use. Blocks given back here are kept for the next object of the same size instead,
// up to kKeptBlocks of them (beyond, back to malloc).
#pragma once

#include <cstddef>
#include <mutex>
#include <new>
#include <vector>

namespace gcfs::mount {

template <std::size_t Size, std::size_t Align>
class BlockRecycler {
 public:
  static constexpr std::size_t kKeptBlocks = 4096;
  static BlockRecycler& instance() {
    static BlockRecycler* r = new BlockRecycler;  // never destroyed: blocks may be freed at exit
    return *r;
  }
  void* take() {
    {
      std::lock_guard lk(mu_);
      if (!free_.empty()) {
        void* p = free_.back();
        free_.pop_back();
        return p;
      }
    }
    return ::operator new(Size, std::align_val_t{Align});
  }
  void give(void* p) noexcept {
    {
      std::lock_guard lk(mu_);
      if (free_.size() < kKeptBlocks) {
        free_.push_back(p);  // within the reserved capacity: never allocates
        return;
      }
    }
    ::operator delete(p, std::align_val_t{Align});
  }

 private:
  BlockRecycler() { free_.reserve(kKeptBlocks); }
  std::mutex mu_;
  std::vector<void*> free_;
};

// For std::allocate_shared: the object and its control block come from one recycled block.
template <class T>
struct RecyclingAllocator {
  using value_type = T;
  RecyclingAllocator() = default;
  template <class U>
  RecyclingAllocator(const RecyclingAllocator<U>&) noexcept {}
  T* allocate(std::size_t n) {
    if (n != 1) return static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t{alignof(T)}));
    return static_cast<T*>(BlockRecycler<sizeof(T), alignof(T)>::instance().take());
  }
  void deallocate(T* p, std::size_t n) noexcept {
    if (n != 1) return ::operator delete(p, std::align_val_t{alignof(T)});
    BlockRecycler<sizeof(T), alignof(T)>::instance().give(p);
  }
  template <class U>
  bool operator==(const RecyclingAllocator<U>&) const noexcept {
    return true;
  }
};

}  // namespace gcfs::mount
