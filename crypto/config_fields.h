// Typed reads of the config's JSON fields that name the field when it is wrong: nlohmann's own
// type errors ("type must be string, but is number") do not say which field of the file is wrong.
// Shared by the config (vault_config.cc) and its key slots (key_slot.cc).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace gcfs::config_fields {

// base64 of want_len bytes (any length when 0). Throws CorruptData naming the field.
std::vector<std::uint8_t> decode_base64(const nlohmann::json& j, const char* name, std::size_t want_len = 0);
// A JSON integer: get<int>() on 1e300 would convert a double out of range, which is undefined
// behaviour (the config fuzzer found it).
std::int64_t integer(const nlohmann::json& j, const char* name);
const nlohmann::json& object(const nlohmann::json& j, const char* name);
std::string string(const nlohmann::json& j, const char* name);
std::vector<std::string> string_list(const nlohmann::json& j, const char* name);

}  // namespace gcfs::config_fields
