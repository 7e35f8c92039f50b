#include "host_client/tooling/compare.h"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <algorithm>

namespace remex::compare {
namespace {

double HalfToDouble(uint16_t h) {
  int sign = h >> 15, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  double v;
  if (exp == 0) v = std::ldexp(mant, -24);
  else if (exp == 31) v = mant ? NAN : INFINITY;
  else v = std::ldexp(mant + 1024, exp - 25);
  return sign ? -v : v;
}

double At(const npy::Array& a, size_t i) {
  const std::byte* p = a.data.data() + i * DTypeSize(a.dtype);
  auto load = [p](auto v) { std::memcpy(&v, p, sizeof v); return static_cast<double>(v); };
  switch (a.dtype) {
    case DType::kFloat32: return load(float{});
    case DType::kFloat64: return load(double{});
    case DType::kFloat16: { uint16_t h; std::memcpy(&h, p, 2); return HalfToDouble(h); }
    case DType::kBFloat16: {  // the upper half of a float32
      uint16_t h;
      std::memcpy(&h, p, 2);
      const uint32_t bits = static_cast<uint32_t>(h) << 16;
      float f;
      std::memcpy(&f, &bits, 4);
      return f;
    }
    case DType::kInt8: return load(int8_t{});
    case DType::kInt16: return load(int16_t{});
    case DType::kInt32: return load(int32_t{});
    case DType::kInt64: return load(int64_t{});
    case DType::kUint8: case DType::kBool: return load(uint8_t{});
    case DType::kUint16: return load(uint16_t{});
    case DType::kUint32: return load(uint32_t{});
    case DType::kUint64: return load(uint64_t{});
    default: return NAN;
  }
}

bool IsIntegral(DType t) {
  switch (t) {
    case DType::kInt8: case DType::kInt16: case DType::kInt32: case DType::kInt64:
    case DType::kUint8: case DType::kUint16: case DType::kUint32: case DType::kUint64: case DType::kBool:
      return true;
    default:
      return false;
  }
}

}  // namespace

Status CheckTolerances(double rtol, double atol) {
  if (!ValidTolerances(rtol, atol)) {
    return InvalidArgument("--rtol and --atol must be finite and >= 0, got " + std::to_string(rtol) + " and " +
                           std::to_string(atol));
  }
  return OkStatus();
}

ArrayComparison CompareArrays(const npy::Array& expected, const npy::Array& actual, double rtol, double atol,
                              bool equal_nan) {
  ArrayComparison r;
  if (Status st = CheckTolerances(rtol, atol); !st.ok()) {
    r.reason = st.message();
    return r;
  }
  if (expected.dtype != actual.dtype) {
    r.reason = "cannot compare a " + std::string(DTypeName(actual.dtype)) + " array with an expected " +
               std::string(DTypeName(expected.dtype)) + " one";
    return r;
  }
  if (expected.shape != actual.shape) {
    r.reason = "cannot compare an array of shape " + ShapeToString(actual.shape) + " with an expected one of shape " +
               ShapeToString(expected.shape);
    return r;
  }
  const size_t n = static_cast<size_t>(NumElements(expected.shape).value_or(0));
  const bool integral = IsIntegral(expected.dtype);
  const size_t esize = DTypeSize(expected.dtype);
  AllcloseAccumulator acc(rtol, atol, equal_nan);
  for (size_t i = 0; i < n; ++i) {
    std::optional<bool> equal;
    if (integral) equal = std::memcmp(actual.data.data() + i * esize, expected.data.data() + i * esize, esize) == 0;
    acc.Add(At(actual, i), At(expected, i), equal);
  }
  static_cast<AllcloseStats&>(r) = acc.stats();
  r.comparable = true;
  r.ok = r.mismatches == 0;
  if (!r.ok) r.reason = std::to_string(r.mismatches) + " of " + std::to_string(n) + " values differ";
  return r;
}

bool PathComparison::match() const {
  for (const auto& f : files) {
    if (!f.match()) return false;
  }
  return !files.empty();
}

StatusOr<PathComparison> ComparePaths(const std::string& expected, const std::string& actual, double rtol,
                                      double atol, bool equal_nan) {
  namespace fs = std::filesystem;
  REMEX_RETURN_IF_ERROR(CheckTolerances(rtol, atol));
  std::error_code ec;
  if (!fs::exists(expected, ec)) return NotFound("'" + expected + "' does not exist");
  std::vector<std::pair<std::string, std::string>> pairs;
  if (fs::is_directory(expected)) {
    for (const auto& entry : fs::directory_iterator(expected)) {
      if (entry.path().extension() != ".npy") continue;
      pairs.emplace_back(entry.path().string(), (fs::path(actual) / entry.path().filename()).string());
    }
    std::sort(pairs.begin(), pairs.end());
    if (pairs.empty()) return NotFound("no .npy files in '" + expected + "'");
  } else {
    pairs.emplace_back(expected, actual);
  }
  PathComparison result;
  for (const auto& [e, a] : pairs) {
    FileComparison f;
    f.name = fs::path(e).filename().string();
    f.expected = e;
    f.actual = a;
    if (!fs::exists(a, ec)) {
      f.missing = true;
      result.files.push_back(std::move(f));
      continue;
    }
    REMEX_ASSIGN_OR_RETURN(npy::Array ea, npy::Read(e));
    REMEX_ASSIGN_OR_RETURN(npy::Array aa, npy::Read(a));
    ArrayComparison c = CompareArrays(ea, aa, rtol, atol, equal_nan);
    if (!c.comparable) return InvalidArgument(f.name + ": " + c.reason);
    f.stats = c;
    result.files.push_back(std::move(f));
  }
  return result;
}

}  // namespace remex::compare
