// Order of a rank program's nodes that overlaps communication with compute.
//
// A rank program (forward or backward graph) is a DAG in a valid order whose
// collectives are split in two: a Start node launches the collective (async on
// gloo and NCCL) and a Wait node blocks for its result. The schedule
//  - issues each collective as early as its inputs allow: a Start moves up, with
//    the data movement only it uses (padding, layout copies), to right after the
//    compute that produces its input,
//  - waits as late as possible: a Wait moves down, with the data movement that
//    only post-processes its result (folding gathered pieces), to just before the
//    first other node that needs it,
//  - bounds the bytes in flight (issued, not yet waited): parameters are not all
//    gathered at the start of forward; the next ones are prefetched while the
//    current ones compute (FSDP's prefetch, generalised to any collective).
// Compute and Fixed nodes keep their relative order: the schedule moves only
// communication, never the model's compute (and so its memory profile).
//
//  - optionally bounds the number of collectives in flight: issuing one more than
//    `max_inflight` first waits for the oldest in flight, right there. gloo runs a
//    group's collectives on two worker threads at once, and two of them in flight
//    together (an all-gather next to another all-gather) have corrupted the heap of
//    CPU ranks now and then (docs/benchmarks_log.md, "The rank abort on gloo ranks");
//    one at a time still overlaps each collective with the compute until the next.
//    This bound replaces the one on bytes: with both, when a forced wait happens
//    would depend on bytes, and so would the issue order (see below). Under it, a
//    collective whose result the graph computes with (a gathered parameter) is also
//    not issued while `max_inflight` such results wait, issued, for their first
//    reader: with forced waits, the count bound alone issued every parameter's
//    gather at the start of forward and of backward and held all the gathered
//    buffers until their layers ran (4 of llama's layers at once in backward, where
//    FSDP2 holds the current and the next one). Like the byte bound, it delays the
//    head of the queue and never reorders it.
// Deadlock freedom: collectives are issued in the order they become ready (under the
// count bound, those the graph computes with in the order they are read), a
// property of the graph's structure alone. The byte bound only delays the head of
// that queue, never reorders it, and a Wait on a delayed collective first issues
// everything queued before it. So every rank issues the same collectives in the
// same order even when uneven shards give ranks different byte counts.
#pragma once

#include <cstdint>
#include <vector>

namespace tlm {

enum class ScheduleKind : uint8_t {
  Fixed,    // placeholders and the output: never moved relative to each other
  Compute,  // an op that computes: keeps its place relative to other Compute nodes
  Move,     // data movement (views, layout copies, padding): may travel with a collective
  Start,    // launches a collective
  Wait,     // waits for one (its only input is the Start)
};

struct ScheduleNode {
  ScheduleKind kind = ScheduleKind::Compute;
  std::vector<int> inputs;  // indices of earlier nodes
  int64_t bytes = 0;        // Start: the collective's buffer
};

// A permutation of 0..n-1: the new order. Throws InvalidArgument when `nodes` is
// not in a valid order (an input at or after its user) or a Wait's input is not a
// Start, or `max_inflight` is 0. `inflight_limit` < 0: no bound on bytes; a
// collective is always issued when nothing is in flight, however large.
// `max_inflight` < 0: no bound on the number of collectives in flight; > 0: that
// bound, and `inflight_limit` is ignored.
std::vector<int> overlap_order(const std::vector<ScheduleNode>& nodes, int64_t inflight_limit,
                               int max_inflight = -1);

}  // namespace tlm
