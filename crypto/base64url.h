// Unpadded base64url (RFC 4648 section 5): the alphabet that is safe in file names.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace gcfs {

std::string base64url_encode(std::span<const std::uint8_t> data);
// nullopt for characters outside the alphabet, padding, or an impossible length.
std::optional<std::vector<std::uint8_t>> base64url_decode(std::string_view text);
// Standard padded base64, as the config file stores binary fields.
std::string base64_encode(std::span<const std::uint8_t> data);
std::optional<std::vector<std::uint8_t>> base64_decode(std::string_view text);

}  // namespace gcfs
