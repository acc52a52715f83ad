// Is a range of this process's memory there, with the access a registration
// needs? A device pins the pages when memory is registered and refuses a
// range it cannot pin; the softnic asks the kernel's map of the process.
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#pragma once

#include <cstdint>

namespace fastdapl::softnic {

// Why a range was refused, from the first reason found.
enum class RangeFault : std::uint8_t {
    none,       // mapped throughout with the access asked for
    start,      // its first byte is not mapped readable
    length,     // mapped readable from the start, but not to the end; or a length of 0, or one that wraps
    rights,     // readable throughout, but not writable where writing was asked for
    unverified, // the map of the process could not be read: refused, not trusted
};

// Checks that [addr, addr + length) lies in mappings of this process that
// are readable, and also writable if `write`, with no gap between them, by
// reading /proc/self/maps. Mappings the kernel keeps for itself ([vvar],
// [vsyscall]) count as not readable. The cost is one pass over the map
// (its number of mappings, not the length), stopped at the first mapping
// past the range; it allocates nothing. The answer holds when it is given:
// memory unmapped later is not seen.
// `shared`, if given, tells whether every mapping of the range is shared
// (MAP_SHARED: other processes may map the same memory).
RangeFault check_mapped(std::uint64_t addr, std::uint64_t length, bool write, bool* shared = nullptr);

} // namespace fastdapl::softnic
