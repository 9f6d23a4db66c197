#include "crypto/config_fields.h"

#include <algorithm>
#include <climits>

#include "crypto/base64url.h"
#include "crypto/errors.h"

namespace gcfs::config_fields {

using json = nlohmann::json;

std::vector<std::uint8_t> decode_base64(const json& j, const char* name, std::size_t want_len) {
  if (!j.contains(name) || !j[name].is_string())
    throw CorruptData(std::string("config field '") + name + "' is missing or not a string");
  auto v = base64_decode(j[name].get<std::string>());
  if (!v || (want_len && v->size() != want_len))
    throw CorruptData(std::string("config field '") + name + "' is not valid base64 of the right length");
  return *v;
}

std::int64_t integer(const json& j, const char* name) {
  const json& v = j.at(name);
  if (!v.is_number_integer()) throw CorruptData(std::string("config field '") + name + "' is not an integer");
  if (v.is_number_unsigned() && v.get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX))
    throw CorruptData(std::string("config field '") + name + "' is out of range");
  return v.get<std::int64_t>();
}

const json& object(const json& j, const char* name) {
  const json& v = j.at(name);
  if (!v.is_object()) throw CorruptData(std::string("config field '") + name + "' is not an object");
  return v;
}

std::string string(const json& j, const char* name) {
  const json& v = j.at(name);
  if (!v.is_string()) throw CorruptData(std::string("config field '") + name + "' is not a string");
  return v.get<std::string>();
}

std::vector<std::string> string_list(const json& j, const char* name) {
  const json& v = j.at(name);
  if (!v.is_array() || !std::all_of(v.begin(), v.end(), [](const json& e) { return e.is_string(); }))
    throw CorruptData(std::string("config field '") + name + "' is not a list of strings");
  return v.get<std::vector<std::string>>();
}

}  // namespace gcfs::config_fields
