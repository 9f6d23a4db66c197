// The table of content formats: the one place that maps a version number to its implementation.
#include "fs/content/content_format.h"

#include <stdexcept>
#include <string>

namespace gcfs {

const std::vector<const ContentFormat*>& content_formats() {
  static const std::vector<const ContentFormat*> all = {&content_format_v2(), &content_format_v1()};
  return all;
}

const ContentFormat& content_format(int version) {
  for (const ContentFormat* f : content_formats())
    if (f->version() == version) return *f;
  throw std::invalid_argument("unknown content format " + std::to_string(version));
}

}  // namespace gcfs
