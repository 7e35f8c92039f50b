// Scan, lowered to Loop by the ONNX importer (onnx_import.cc).
//
// Remex runs ONNX Loop in the VM (If and Loop are its control flow); Scan is a Loop
// whose trip count is the scan inputs' length and whose per-iteration slices and
// stacked outputs are expressed with Shape, Gather, Sub, Slice, Transpose and Identity.
// The lowering keeps Scan's semantics (ONNX Scan-8, -9, -11, -16,
// https://onnx.ai/onnx/operators/onnx__Scan.html):
//   - Scan-9 and later: N state variables then M scan inputs; each scan input is sliced
//     along scan_input_axes[j] (default 0; negative counts from the end from opset 11),
//     forward or in reverse (scan_input_directions); the body's K scan outputs are
//     stacked along scan_output_axes[k] (default 0), in iteration order or reversed
//     (scan_output_directions). The trip count is the length of scan input 0 along its
//     axis; every scan input must have that length (the Gather of a shorter one fails
//     at run time, naming the node).
//   - Scan-8: a batch axis 0 on every state and scan input, the scan axis 1 of the scan
//     inputs, `directions` for the scan inputs; lowered as a Loop over the batch around
//     the Scan-9 lowering of one batch element. sequence_lens (padding per batch
//     element) is UNIMPLEMENTED.
// A scan output axis other than 0, or a negative input axis, needs the rank of the
// body's output (input): taken from the body's declared type, else UNIMPLEMENTED.
#pragma once

#include <onnx/onnx_pb.h>

#include <string>
#include <vector>

#include "base/status.h"

namespace remex::compiler {

// The nodes that replace `scan` (a Scan node of a model whose default-domain opset is
// `opset`), in order; their new value names all start with "<name>/scan". The last
// nodes write the Scan's own outputs. INVALID_ARGUMENT for a Scan whose attributes
// do not match its inputs or body; UNIMPLEMENTED as above.
StatusOr<std::vector<onnx::NodeProto>> LowerScan(const onnx::NodeProto& scan, int opset, const std::string& name);

}  // namespace remex::compiler
