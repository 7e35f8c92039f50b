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

}  // namespace

ArrayComparison CompareArrays(const npy::Array& expected, const npy::Array& actual, double rtol, double atol) {
  ArrayComparison r;
  if (expected.dtype != actual.dtype) {
    r.reason = "dtype " + std::string(DTypeName(actual.dtype)) + ", expected " + std::string(DTypeName(expected.dtype));
    return r;
  }
  if (expected.shape != actual.shape) {
    r.reason = "shape " + ShapeToString(actual.shape) + ", expected " + ShapeToString(expected.shape);
    return r;
  }
  size_t n = static_cast<size_t>(NumElements(expected.shape).value_or(0));
  for (size_t i = 0; i < n; ++i) {
    double e = At(expected, i), a = At(actual, i);
    double err = std::fabs(a - e);
    bool close = err <= atol + rtol * std::fabs(e) || (std::isinf(e) && a == e);
    if (!std::isnan(err)) {
      r.max_abs_error = std::max(r.max_abs_error, err);
      if (e != 0) r.max_rel_error = std::max(r.max_rel_error, err / std::fabs(e));
    }
    if (!close) {
      if (r.mismatches == 0) r.first_mismatch = static_cast<int64_t>(i);
      r.mismatches++;
    }
  }
  r.ok = r.mismatches == 0;
  if (!r.ok) r.reason = std::to_string(r.mismatches) + " of " + std::to_string(n) + " values differ";
  return r;
}

StatusOr<PathComparison> ComparePaths(const std::string& expected, const std::string& actual, double rtol,
                                      double atol) {
  namespace fs = std::filesystem;
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
  result.ok = true;
  for (const auto& [e, a] : pairs) {
    std::string name = fs::path(e).filename().string();
    if (!fs::exists(a)) {
      result.ok = false;
      result.lines.push_back(name + ": missing from '" + actual + "'");
      continue;
    }
    REMEX_ASSIGN_OR_RETURN(npy::Array ea, npy::Read(e));
    REMEX_ASSIGN_OR_RETURN(npy::Array aa, npy::Read(a));
    ArrayComparison c = CompareArrays(ea, aa, rtol, atol);
    char buf[160];
    std::snprintf(buf, sizeof buf, "max abs error %.3g, max rel error %.3g", c.max_abs_error, c.max_rel_error);
    result.lines.push_back(name + ": " + (c.ok ? "ok" : "MISMATCH (" + c.reason + ")") + ", " + buf);
    result.ok &= c.ok;
  }
  return result;
}

}  // namespace remex::compare
