// Frees a plan's large working state (strategies, cost tables, the solver's problem) on a
// background thread, so the plan call returns without waiting for it.
//
// On Llama-3-70B over 8x8x4 those tables hold ~3 M strategies and their edge matrices, and
// destroying them took 0.29 s of a 7.5 s plan call: time inside the user's limit that buys
// nothing. One thread at a time does this: a release first waits for the previous one (a
// new plan has already taken longer than any free), and the process waits for the last at
// exit. A forked child does not wait for its parent's thread.
#pragma once

#include <memory>

namespace tlm {

// Destroys what `owned` holds off the calling thread (inline when no thread can be started).
// `owned` must not be referenced by anything the caller keeps.
void release_in_background(std::shared_ptr<void> owned);

}  // namespace tlm
