#include "host_client/compiler/buckets.h"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <set>

namespace remex::compiler {
namespace {

std::vector<std::string_view> Split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (true) {
    size_t end = s.find(sep, start);
    out.push_back(s.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start));
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  return out;
}

StatusOr<int64_t> ParseInt(std::string_view text, std::string_view spec, const char* what) {
  int64_t v = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || ptr != text.data() + text.size() || v < 0) {
    return InvalidArgument("--dispatch '" + std::string(spec) + "': " + what + " '" + std::string(text) +
                           "' is not a non-negative integer");
  }
  return v;
}

std::string RangeText(int64_t lo, int64_t hi) {
  return lo == hi ? std::to_string(lo) : std::to_string(lo) + ".." + std::to_string(hi);
}

}  // namespace

StatusOr<DispatchSpec> ParseDispatchSpec(std::string_view text) {
  const std::string usage = "--dispatch '" + std::string(text) +
                            "' is not SYMBOL=log:BASE[:MIN:MAX], SYMBOL=uniform:STEP[:MIN:MAX] or "
                            "SYMBOL=edges:E1,E2,...";
  size_t eq = text.rfind('=');
  if (eq == std::string_view::npos || eq == 0) return InvalidArgument(usage);
  DispatchSpec spec;
  spec.symbol = std::string(text.substr(0, eq));
  std::vector<std::string_view> parts = Split(text.substr(eq + 1), ':');
  const std::string_view kind = parts[0];
  if (kind == "edges") {
    spec.kind = DispatchSpec::Kind::kEdges;
    if (parts.size() != 2 || parts[1].empty()) return InvalidArgument(usage);
    for (std::string_view e : Split(parts[1], ',')) {
      REMEX_ASSIGN_OR_RETURN(int64_t v, ParseInt(e, text, "edge"));
      if (!spec.edges.empty() && v <= spec.edges.back()) {
        return InvalidArgument("--dispatch '" + std::string(text) + "': edges must increase");
      }
      spec.edges.push_back(v);
    }
    return spec;
  }
  if (kind != "log" && kind != "uniform") return InvalidArgument(usage);
  if (parts.size() != 2 && parts.size() != 4) return InvalidArgument(usage);
  if (kind == "log") {
    spec.kind = DispatchSpec::Kind::kLogarithmic;
    REMEX_ASSIGN_OR_RETURN(spec.base, ParseInt(parts[1], text, "base"));
    if (spec.base < 2) return InvalidArgument("--dispatch '" + std::string(text) + "': the base must be >= 2");
  } else {
    spec.kind = DispatchSpec::Kind::kUniform;
    REMEX_ASSIGN_OR_RETURN(spec.step, ParseInt(parts[1], text, "step"));
    if (spec.step < 1) return InvalidArgument("--dispatch '" + std::string(text) + "': the step must be >= 1");
  }
  if (parts.size() == 4) {
    REMEX_ASSIGN_OR_RETURN(spec.min, ParseInt(parts[2], text, "MIN"));
    REMEX_ASSIGN_OR_RETURN(spec.max, ParseInt(parts[3], text, "MAX"));
    if (spec.max < spec.min) return InvalidArgument("--dispatch '" + std::string(text) + "': MAX is below MIN");
    if (spec.kind == DispatchSpec::Kind::kLogarithmic && spec.min < 1) {
      return InvalidArgument("--dispatch '" + std::string(text) + "': a logarithmic MIN must be >= 1");
    }
  }
  return spec;
}

std::string Bucket::FunctionName(const std::string& base) const {
  std::string name = base + "[";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i) name += ",";
    name += dims[i].symbol + "=" + RangeText(dims[i].min, dims[i].max);
  }
  return name + "]";
}

StatusOr<std::vector<std::pair<int64_t, int64_t>>> BucketRanges(const DispatchSpec& spec, DimBounds bounds) {
  std::vector<int64_t> edges = spec.edges;
  if (spec.kind != DispatchSpec::Kind::kEdges) {
    int64_t lo = spec.min >= 0 ? spec.min : bounds.min;
    int64_t hi = spec.max >= 0 ? spec.max : bounds.max;
    if (hi < 0) {
      return InvalidArgument("--dispatch for '" + spec.symbol + "' needs MIN:MAX or an upper bound (--bound " +
                             spec.symbol + "=MIN:MAX)");
    }
    int64_t first = std::max<int64_t>(lo, 1);
    if (spec.kind == DispatchSpec::Kind::kUniform) first = (first + spec.step - 1) / spec.step * spec.step;
    for (int64_t e = first;;) {
      edges.push_back(e);
      if (e >= hi) break;
      e = spec.kind == DispatchSpec::Kind::kLogarithmic ? e * spec.base : e + spec.step;
    }
  }
  std::vector<std::pair<int64_t, int64_t>> ranges;
  int64_t lo = bounds.min;
  for (int64_t e : edges) {
    int64_t hi = bounds.max >= 0 ? std::min(e, bounds.max) : e;
    if (hi >= lo) ranges.emplace_back(lo, hi);
    lo = std::max(lo, e + 1);
    if (bounds.max >= 0 && lo > bounds.max) break;
  }
  if (ranges.empty()) {
    return InvalidArgument("--dispatch for '" + spec.symbol + "' leaves no bucket inside its bounds [" +
                           std::to_string(bounds.min) + ", " +
                           (bounds.max >= 0 ? std::to_string(bounds.max) : std::string("inf")) + "]");
  }
  return ranges;
}

StatusOr<std::vector<Bucket>> MakeBucketGrid(const std::vector<DispatchSpec>& specs,
                                             const std::map<std::string, DimBounds>& bounds, size_t max_buckets) {
  std::vector<Bucket> grid(1);
  std::set<std::string> seen;
  for (const DispatchSpec& spec : specs) {
    if (!seen.insert(spec.symbol).second) {
      return InvalidArgument("--dispatch names '" + spec.symbol + "' twice");
    }
    auto b = bounds.find(spec.symbol);
    REMEX_ASSIGN_OR_RETURN(auto ranges, BucketRanges(spec, b != bounds.end() ? b->second : DimBounds{}));
    if (grid.size() * ranges.size() > max_buckets) {
      return InvalidArgument("--dispatch makes more than " + std::to_string(max_buckets) + " buckets");
    }
    std::vector<Bucket> next;
    for (const Bucket& cell : grid) {
      for (const auto& [lo, hi] : ranges) {
        Bucket c = cell;
        c.dims.push_back({spec.symbol, lo, hi});
        next.push_back(std::move(c));
      }
    }
    grid = std::move(next);
  }
  return grid;
}

}  // namespace remex::compiler
