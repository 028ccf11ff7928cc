// Generic access to a request's parts by reflection, for the code that handles every operator
// alike: decoding a Run (rpc/), graph keys (launch/), the start-up capture plan (daemon/).
#pragma once

#include <string>

#include "cakegrad/v1/service.pb.h"
#include "cakegrad/v1/tensor.pb.h"
#include "google/protobuf/message.h"

namespace cakegrad::server {

// The field of the `op` oneof that `request` sets (its name is the operator's), or null.
const google::protobuf::FieldDescriptor* OperatorField(const v1::RunRequest& request);

// Calls fn(field name, ref) for every TensorRef that `op_request` (an operator's request
// message) sets, in field order.
template <typename Fn>
void ForEachTensorRef(google::protobuf::Message* op_request, Fn&& fn) {
  const google::protobuf::Reflection* refl = op_request->GetReflection();
  const google::protobuf::Descriptor* desc = op_request->GetDescriptor();
  for (int i = 0; i < desc->field_count(); ++i) {
    const google::protobuf::FieldDescriptor* f = desc->field(i);
    if (f->message_type() != v1::TensorRef::descriptor() || !refl->HasField(*op_request, f)) {
      continue;
    }
    fn(f->name(), static_cast<v1::TensorRef*>(refl->MutableMessage(op_request, f)));
  }
}

}  // namespace cakegrad::server
