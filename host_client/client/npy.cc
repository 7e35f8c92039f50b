#include "host_client/client/npy.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <regex>

#include "base/file_error.h"

namespace remex::npy {
namespace {

constexpr char kMagic[] = "\x93NUMPY";

struct Descr {
  const char* code;  // without byte order
  DType dtype;
};
constexpr Descr kDescrs[] = {
    {"f4", DType::kFloat32}, {"f2", DType::kFloat16}, {"f8", DType::kFloat64},
    {"i1", DType::kInt8},    {"i2", DType::kInt16},   {"i4", DType::kInt32},
    {"i8", DType::kInt64},   {"u1", DType::kUint8},   {"u2", DType::kUint16},
    {"u4", DType::kUint32},  {"u8", DType::kUint64},  {"b1", DType::kBool},
};

StatusOr<DType> DTypeFromDescr(const std::string& descr) {
  if (descr.size() < 3) return InvalidArgument("npy: unsupported descr '" + descr + "'");
  char order = descr[0];
  std::string code = descr.substr(1);
  bool one_byte = code == "i1" || code == "u1" || code == "b1";
  if (order == '>' && !one_byte) return InvalidArgument("npy: big-endian data is not supported");
  if (order != '<' && order != '|' && order != '=') {
    return InvalidArgument("npy: unsupported descr '" + descr + "'");
  }
  for (const auto& d : kDescrs) {
    if (code == d.code) return d.dtype;
  }
  return InvalidArgument("npy: unsupported dtype '" + descr + "'");
}

std::string DescrOf(DType dtype) {
  for (const auto& d : kDescrs) {
    if (d.dtype == dtype) {
      std::string code = d.code;
      bool one_byte = DTypeSize(dtype) == 1;
      return (one_byte ? "|" : "<") + code;
    }
  }
  return "";
}

}  // namespace

StatusOr<Array> Parse(const std::vector<std::byte>& bytes) {
  if (bytes.size() < 10 || std::memcmp(bytes.data(), kMagic, 6) != 0) {
    return InvalidArgument("npy: not a .npy file (bad magic)");
  }
  uint8_t major = static_cast<uint8_t>(bytes[6]);
  size_t header_len = 0, offset = 0;
  if (major == 1) {
    header_len = static_cast<uint8_t>(bytes[8]) | (static_cast<size_t>(static_cast<uint8_t>(bytes[9])) << 8);
    offset = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) return InvalidArgument("npy: truncated header");
    uint32_t len;
    std::memcpy(&len, bytes.data() + 8, 4);
    header_len = len;
    offset = 12;
  } else {
    return InvalidArgument("npy: unsupported format version " + std::to_string(major));
  }
  if (header_len > bytes.size() - offset) return InvalidArgument("npy: truncated header");
  std::string header(reinterpret_cast<const char*>(bytes.data() + offset), header_len);
  std::smatch m;
  static const std::regex descr_re(R"('descr'\s*:\s*'([^']*)')");
  static const std::regex order_re(R"('fortran_order'\s*:\s*(True|False))");
  static const std::regex shape_re(R"('shape'\s*:\s*\(([^)]*)\))");
  if (!std::regex_search(header, m, descr_re)) return InvalidArgument("npy: header has no descr");
  REMEX_ASSIGN_OR_RETURN(DType dtype, DTypeFromDescr(m[1]));
  if (!std::regex_search(header, m, order_re)) return InvalidArgument("npy: header has no fortran_order");
  if (m[1] == "True") return InvalidArgument("npy: Fortran-order arrays are not supported");
  if (!std::regex_search(header, m, shape_re)) return InvalidArgument("npy: header has no shape");
  Array a;
  a.dtype = dtype;
  std::string dims = m[1];
  static const std::regex dim_re(R"(\d+)");
  for (auto it = std::sregex_iterator(dims.begin(), dims.end(), dim_re); it != std::sregex_iterator(); ++it) {
    a.shape.push_back(std::stoll(it->str()));
  }
  auto n = NumElements(a.shape);
  if (!n) return InvalidArgument("npy: shape overflows");
  size_t data_offset = offset + header_len;
  size_t expected = static_cast<size_t>(*n) * DTypeSize(dtype);
  if (bytes.size() - data_offset != expected) {
    return InvalidArgument("npy: payload is " + std::to_string(bytes.size() - data_offset) +
                           " bytes, shape " + ShapeToString(a.shape) + " needs " + std::to_string(expected));
  }
  a.data.assign(bytes.begin() + data_offset, bytes.end());
  return a;
}

StatusOr<Array> Read(const std::string& path) {
  errno = 0;
  std::ifstream in(path, std::ios::binary);
  if (!in) return FileError("cannot open", path, errno ? errno : ENOENT);
  std::vector<char> raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::byte> bytes(raw.size());
  if (!raw.empty()) std::memcpy(bytes.data(), raw.data(), raw.size());
  auto a = Parse(bytes);
  if (!a.ok()) return a.status().WithContext(path);
  return a;
}

std::vector<std::byte> Serialize(const Array& array) {
  std::string header = "{'descr': '" + DescrOf(array.dtype) + "', 'fortran_order': False, 'shape': (";
  for (size_t i = 0; i < array.shape.size(); ++i) {
    header += std::to_string(array.shape[i]);
    if (array.shape.size() == 1 || i + 1 < array.shape.size()) header += ",";
    if (i + 1 < array.shape.size()) header += " ";
  }
  header += "), }";
  bool v2 = header.size() + 11 > 65535;
  size_t prefix = v2 ? 12 : 10;
  size_t total = prefix + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::vector<std::byte> out(prefix + header.size() + array.data.size());
  std::memcpy(out.data(), kMagic, 6);
  out[6] = std::byte{static_cast<uint8_t>(v2 ? 2 : 1)};
  out[7] = std::byte{0};
  uint32_t len = static_cast<uint32_t>(header.size());
  if (v2) {
    std::memcpy(out.data() + 8, &len, 4);
  } else {
    out[8] = std::byte{static_cast<uint8_t>(len & 0xff)};
    out[9] = std::byte{static_cast<uint8_t>(len >> 8)};
  }
  std::memcpy(out.data() + prefix, header.data(), header.size());
  if (!array.data.empty()) std::memcpy(out.data() + prefix + header.size(), array.data.data(), array.data.size());
  return out;
}

Status Write(const std::string& path, const Array& array) {
  if (DescrOf(array.dtype).empty()) {
    return InvalidArgument("npy: cannot write dtype " + std::string(DTypeName(array.dtype)) +
                           (array.dtype == DType::kBFloat16 ? " (NumPy has no bfloat16 type)" : ""));
  }
  std::vector<std::byte> bytes = Serialize(array);
  errno = 0;
  std::ofstream out(path, std::ios::binary);
  if (!out) return FileError("cannot write", path, errno ? errno : EIO);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  out.flush();
  if (!out) return FileError("cannot write", path, errno ? errno : EIO);
  return OkStatus();
}

}  // namespace remex::npy
