#include "ops/request_fields.h"

namespace cakegrad::server {

const google::protobuf::FieldDescriptor* OperatorField(const v1::RunRequest& request) {
  static const google::protobuf::OneofDescriptor* const op =
      v1::RunRequest::descriptor()->FindOneofByName("op");
  return request.GetReflection()->GetOneofFieldDescriptor(request, op);
}

}  // namespace cakegrad::server
