// The softnic's memory-region table.
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#include "memory_table.hpp"

#include <mutex>

namespace fastdapl::softnic {

std::uint32_t MemoryTable::add(std::uint64_t addr, std::uint64_t length, std::uint32_t access, std::uint32_t pd,
                               RangeFault* fault)
{
    // Outside the lock: it reads the process's map.
    const RangeFault f = check_mapped(addr, length, (access & (kLocalWrite | kRemoteWrite)) != 0);
    if (fault)
        *fault = f;
    if (f != RangeFault::none)
        return 0;
    std::unique_lock lock(mutex_);
    std::uint32_t slot;
    if (!free_slots_.empty()) {
        slot = free_slots_.back();
        free_slots_.pop_back();
    } else {
        // Slot 0 is never used: key 0 must never be valid.
        if (regions_.empty())
            regions_.emplace_back();
        slot = static_cast<std::uint32_t>(regions_.size());
        if (slot >= (1u << 24))
            return 0;
        regions_.emplace_back();
    }
    Region& r = regions_[slot];
    r.addr = addr;
    r.length = length;
    r.access = access;
    r.pd = pd;
    r.generation = static_cast<std::uint8_t>(r.generation + 1);
    if (r.generation == 0)
        r.generation = 1;
    r.live = true;
    return slot << 8 | r.generation;
}

bool MemoryTable::remove(std::uint32_t key)
{
    std::unique_lock lock(mutex_);
    const std::uint32_t slot = key >> 8;
    if (slot == 0 || slot >= regions_.size() || !regions_[slot].live ||
        regions_[slot].generation != (key & 0xffu))
        return false;
    regions_[slot].live = false;
    free_slots_.push_back(slot);
    return true;
}

bool MemoryTable::check(std::uint32_t key, std::uint64_t addr, std::uint64_t length, std::uint32_t access,
                        std::uint32_t pd) const
{
    std::shared_lock lock(mutex_);
    const std::uint32_t slot = key >> 8;
    if (slot == 0 || slot >= regions_.size())
        return false;
    const Region& r = regions_[slot];
    if (!r.live || r.generation != (key & 0xffu) || r.pd != pd || (r.access & access) != access)
        return false;
    // Overflow-safe containment: addr >= start and addr + length <= end.
    if (addr < r.addr || length > r.length || addr - r.addr > r.length - length)
        return false;
    return true;
}

} // namespace fastdapl::softnic
