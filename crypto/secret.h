// Memory for key material: locked against swapping where the system allows it, and wiped before
// it is given back, so keys neither reach disk through swap nor linger in freed heap blocks.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace gcfs {

void secure_wipe(void* p, std::size_t n);
void lock_memory(void* p, std::size_t n);    // best effort: mlock may be limited by RLIMIT_MEMLOCK
void unlock_memory(void* p, std::size_t n);

template <class T>
struct SecureAllocator {
  using value_type = T;
  SecureAllocator() = default;
  template <class U>
  SecureAllocator(const SecureAllocator<U>&) noexcept {}
  T* allocate(std::size_t n) {
    T* p = std::allocator<T>{}.allocate(n);
    lock_memory(p, n * sizeof(T));
    return p;
  }
  void deallocate(T* p, std::size_t n) noexcept {
    secure_wipe(p, n * sizeof(T));
    unlock_memory(p, n * sizeof(T));
    std::allocator<T>{}.deallocate(p, n);
  }
  template <class U>
  bool operator==(const SecureAllocator<U>&) const noexcept { return true; }
};

using SecretBytes = std::vector<std::uint8_t, SecureAllocator<std::uint8_t>>;

// A fixed-size key that wipes itself. Held by value inside long-lived objects (key rings, file
// state), so its bytes are locked together with the owner only when the owner uses SecretBytes;
// the wipe on destruction is what matters most here.
template <std::size_t N>
struct SecretKey {
  std::array<std::uint8_t, N> bytes{};
  SecretKey() = default;
  SecretKey(const SecretKey&) = default;
  SecretKey& operator=(const SecretKey&) = default;
  ~SecretKey() { secure_wipe(bytes.data(), N); }
  const std::uint8_t* data() const { return bytes.data(); }
  std::uint8_t* data() { return bytes.data(); }
  static constexpr std::size_t size() { return N; }
  bool operator==(const SecretKey& o) const = default;
};

}  // namespace gcfs
