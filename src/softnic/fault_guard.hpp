// Copies into and out of registered memory that survive the memory going
// away: a region unmapped after registration (a device would have pinned
// it) turns the copy into a failure the engine reports, not a SIGSEGV or
// SIGBUS that kills the process.
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
//
// How: the softnic installs, once per process, a SIGSEGV and SIGBUS handler.
// A copy marks its thread as "in a guarded copy" (a thread-local pointer to
// a jump buffer set with sigsetjmp, signal mask not saved); a fault the
// kernel raises while the mark is set jumps back, and the copy returns
// false. Any other fault goes to the handler that was installed before
// ours (or, where that was the default action, the default action: the
// fault repeats and the process dies as it would have), so a consumer's own
// handlers keep working. A consumer that installs its own SIGSEGV/SIGBUS
// handler after opening an IA replaces ours: its handler then sees the
// fault. FASTDAPL_SOFTNIC_FAULT_GUARD=0 turns the guard off (plain copies).
// Cost: sigsetjmp (signal mask not saved) and two thread-local stores,
// about 60 instructions a copy (tests/softnic/guarded_copy_cost). On x86-64
// (not under ThreadSanitizer, which would not see its stores) a copy or
// placement of one piece of up to 64 bytes (a small message) takes a routine
// of its own instead, with no guard to set up: the handler knows a fault
// inside it by the instruction address and resumes at its end, which
// reports the failure (about 15 instructions for 8 bytes).
#pragma once

#include <cstddef>
#include <cstdint>

namespace fastdapl::softnic {

// Installs the handlers unless the environment turns the guard off; safe to
// call more than once, from any thread. True when copies are guarded.
bool install_fault_guard();

// memcpy of `n` bytes; false if `dst` or `src` faulted (part of `dst` may
// have been written).
bool guarded_copy(void* dst, const void* src, std::size_t n);

// One piece of a placement: `n` bytes from `src` to `dst`.
struct Piece {
    void* dst;
    const void* src;
    std::size_t n;
};

// Places the pieces in order so that the last byte of the last non-empty
// piece becomes visible last: everything else, a release fence, then that
// byte (a consumer that polls on it with an acquire load sees the whole
// message; a plain memcpy gives no such order: glibc's stores its first 32
// bytes after its last ones). False if a fault cut it short.
bool guarded_place(const Piece* pieces, std::size_t count);

} // namespace fastdapl::softnic
