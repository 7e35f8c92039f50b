// The order in which the ONNX importer (onnx_import.cc) reads a graph's nodes.
#pragma once

#include <onnx/onnx_pb.h>

#include <vector>

namespace remex::compiler {

// The indices of g's nodes in an order where every node comes after the nodes whose
// outputs it reads (its inputs, and the names its subgraphs read from the enclosing
// graph). ONNX requires graph.node to be sorted so, but exporters have written models
// that are not (ONNX Runtime sorts them). Kahn's algorithm, taking the lowest index
// among the ready nodes, so that a sorted graph keeps its order. A name no node produces
// is left for the import to report; nodes on a cycle come last, in their order, for the
// same reason.
std::vector<int> ImportOrder(const onnx::GraphProto& g);

}  // namespace remex::compiler
