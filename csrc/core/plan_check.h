// Validation of a plan document read from a file (Plan.load): every field is
// checked against the document's own mesh and tensor metadata (plan_fingerprint.h),
// so an edited placement ("XYZ", S(9) on a 2-D tensor, a spec for another mesh)
// is refused with the node and the field named, not discovered mid-training.
#pragma once

#include "core/json.h"

namespace tlm {

// Throws InvalidArgument / json::SchemaError naming the node ("plan.nodes[3] (mm)")
// and the field on the first problem found. Documents of an older format_version
// are refused with what to do instead.
void check_plan_document(const json::Value& doc);

}  // namespace tlm
