// The softnic's memory-region table: every key is checked here, for range,
// rights and protection domain, before a byte moves.
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#pragma once

#include "mapped_range.hpp"

#include <cstdint>
#include <shared_mutex>
#include <vector>

namespace fastdapl::softnic {

enum Access : std::uint32_t {
    kLocalRead = 1u << 0,
    kLocalWrite = 1u << 1,
    kRemoteRead = 1u << 2,
    kRemoteWrite = 1u << 3,
};

class MemoryTable {
public:
    // Registers [addr, addr+length) and returns its key (used as lkey and
    // rkey). Key layout: slot index << 8 | 8-bit generation, so a key of a
    // freed region stops matching when its slot is reused.
    // Returns 0 when the table is full, or when the range is not mapped in
    // this process readable throughout, and writable if kLocalWrite or
    // kRemoteWrite is asked for (check_mapped): a device refuses to pin
    // such a range, and the softnic would fault copying into it. `fault`,
    // if given, receives check_mapped's answer (none when the table is full).
    std::uint32_t add(std::uint64_t addr, std::uint64_t length, std::uint32_t access, std::uint32_t pd,
                      RangeFault* fault = nullptr);

    // Returns false for an unknown key.
    bool remove(std::uint32_t key);

    // True when `key` names a live region of protection domain `pd` that
    // covers [addr, addr+length) and grants every right in `access`.
    bool check(std::uint32_t key, std::uint64_t addr, std::uint64_t length, std::uint32_t access,
               std::uint32_t pd) const;

private:
    struct Region {
        std::uint64_t addr = 0;
        std::uint64_t length = 0;
        std::uint32_t access = 0;
        std::uint32_t pd = 0;
        std::uint8_t generation = 0;
        bool live = false;
    };
    mutable std::shared_mutex mutex_;
    std::vector<Region> regions_;
    std::vector<std::uint32_t> free_slots_;
};

} // namespace fastdapl::softnic
