// Memory for key material and passwords: locked against swapping where the system allows it, and
// wiped before it is given back, so secrets neither reach disk through swap nor linger in freed
// heap blocks.
//
// Where it comes from (crypto/secret.cc): small blocks from OpenSSL's secure heap, one locked
// arena set up on first use that holds nothing but secrets; blocks too large for it, or any once
// it is full, get anonymous pages of their own. So no secret shares a page with other data, and
// freeing one secret never unlocks the page of another (a plain munlock of a small block unlocks
// its whole page, which may hold other secrets). A child made by fork(), which does not inherit
// memory locks, locks both again.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace gcfs {

void secure_wipe(void* p, std::size_t n);

// Never null (throws std::bad_alloc). Locking is best effort: RLIMIT_MEMLOCK may refuse it.
void* allocate_secret(std::size_t n);
// Wipes the n bytes, then gives the block back. p must come from allocate_secret(n).
void free_secret(void* p, std::size_t n) noexcept;

// Whether [p, p + n) lies in the secure heap's arena (for tests and diagnostics).
bool in_secure_heap(const void* p, std::size_t n);

template <class T>
struct SecureAllocator {
  using value_type = T;
  SecureAllocator() = default;
  template <class U>
  SecureAllocator(const SecureAllocator<U>&) noexcept {}
  T* allocate(std::size_t n) { return static_cast<T*>(allocate_secret(n * sizeof(T))); }
  void deallocate(T* p, std::size_t n) noexcept { free_secret(p, n * sizeof(T)); }
  template <class U>
  bool operator==(const SecureAllocator<U>&) const noexcept { return true; }
};

using SecretBytes = std::vector<std::uint8_t, SecureAllocator<std::uint8_t>>;

// A password or other secret text. Its bytes live in a SecretBytes, never in a std::string: a
// std::string keeps short text inside the object itself (the small-string buffer), which a move
// or a reallocation leaves behind unwiped. Moving a SecretString moves the block; every copy is
// wiped when it is destroyed, on error paths (exceptions) too.
class SecretString {
 public:
  SecretString() = default;
  explicit SecretString(std::string_view s) { append(s); }
  const char* data() const { return reinterpret_cast<const char*>(bytes_.data()); }
  std::size_t size() const { return bytes_.size(); }
  bool empty() const { return bytes_.empty(); }
  std::string_view view() const { return {data(), size()}; }
  void append(std::string_view s) { bytes_.insert(bytes_.end(), s.begin(), s.end()); }
  void push_back(char c) { bytes_.push_back(static_cast<std::uint8_t>(c)); }
  void pop_back() { bytes_.back() = 0, bytes_.pop_back(); }
  // Keeps the first n bytes and wipes the rest (the block's capacity is wiped when it is freed).
  void truncate(std::size_t n);
  void clear() { truncate(0); }
  // Constant time in the contents (a length difference shows).
  bool equals(const SecretString& o) const;

 private:
  SecretBytes bytes_;
};

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
