#include "rule.h"

namespace tlm::strategies {

void register_softmax(Registry&) {}

}  // namespace tlm::strategies
