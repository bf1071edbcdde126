#include "rule.h"

namespace tlm::strategies {

void register_loss(Registry&) {}

}  // namespace tlm::strategies
