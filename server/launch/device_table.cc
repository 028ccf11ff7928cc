#include "launch/device_table.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"

namespace cakegrad::server {
namespace {

std::string Canonical(absl::string_view uuid) {
  std::string s = absl::AsciiStrToLower(absl::StripAsciiWhitespace(uuid));
  absl::string_view body = s;
  absl::ConsumePrefix(&body, "gpu-");
  return std::string(body);
}

}  // namespace

absl::StatusOr<int> DeviceTable::Find(absl::string_view uuid) const {
  if (absl::StripAsciiWhitespace(uuid).empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("gpu_uuid is empty; this daemon serves ", absl::StrJoin(uuids_, ", ")));
  }
  const std::string wanted = Canonical(uuid);
  for (int i = 0; i < size(); ++i) {
    if (Canonical(uuids_[i]) == wanted) return i;
  }
  return absl::NotFoundError(absl::StrCat("no GPU with UUID \"", uuid,
                                          "\" in this daemon; it serves ",
                                          uuids_.empty() ? "none" : absl::StrJoin(uuids_, ", ")));
}

}  // namespace cakegrad::server
