#include "launch/graph_key.h"

#include <memory>

#include "cakegrad/v1/tensor.pb.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "ops/request_fields.h"

namespace cakegrad::server {

std::string GraphKey(const BoundCall& call) {
  namespace pb = google::protobuf;
  std::unique_ptr<pb::Message> shape_only(call.request->New());
  shape_only->CopyFrom(*call.request);
  if (call.op->canonicalize) call.op->canonicalize(shape_only.get());
  ForEachTensorRef(shape_only.get(), [](const std::string&, v1::TensorRef* ref) {
    ref->clear_region_id();
    ref->clear_offset();
    ref->clear_strides();
  });
  std::string key = call.op->name + '\0';
  pb::io::StringOutputStream out(&key);
  pb::io::CodedOutputStream coded(&out);
  coded.SetSerializationDeterministic(true);
  shape_only->SerializeToCodedStream(&coded);
  return key;
}

}  // namespace cakegrad::server
