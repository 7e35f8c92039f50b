#include "rpc/wire_util.h"

#include <capnp/dynamic.h>

#include <string>

namespace remex::rpc {

void WriteTensorDesc(wire::TensorDesc::Builder out, DType dtype, const Shape& shape) {
  out.setDtype(static_cast<int32_t>(dtype));
  auto s = out.initShape(static_cast<unsigned>(shape.size()));
  for (size_t i = 0; i < shape.size(); ++i) s.set(static_cast<unsigned>(i), shape[i]);
}

StatusOr<std::pair<DType, Shape>> ReadTensorDesc(wire::TensorDesc::Reader desc) {
  auto dtype = DTypeFromOnnx(desc.getDtype());
  if (!dtype) return InvalidArgument("unsupported dtype " + std::to_string(desc.getDtype()));
  Shape shape;
  shape.reserve(desc.getShape().size());
  for (int64_t d : desc.getShape()) shape.push_back(d);
  return std::make_pair(*dtype, std::move(shape));
}

std::string RequestKindName(wire::Request::Reader request) {
  KJ_IF_MAYBE(field, capnp::toDynamic(request).which()) { return field->getProto().getName(); }
  return "unknown";
}

}  // namespace remex::rpc
