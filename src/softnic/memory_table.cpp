// The softnic's memory-region table.
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#include "memory_table.hpp"

#include <mutex>

namespace fastdapl::softnic {

std::uint32_t MemoryTable::add_at(std::uint64_t iova, std::uint64_t addr, std::uint64_t length, std::uint32_t access,
                                  std::uint32_t pd, RangeFault* fault)
{
    // Outside the lock: it reads the process's map.
    const RangeFault f = check_mapped(addr, length, (access & (kLocalWrite | kRemoteWrite)) != 0);
    if (fault)
        *fault = f;
    if (f != RangeFault::none)
        return 0;
    std::unique_lock lock(mutex_);
    const std::uint32_t key = take_slot();
    if (key == 0)
        return 0;
    Region& r = regions_[key >> 8];
    r.addr = iova;
    r.at = iova; // a region is where its keys address it
    r.host = addr;
    r.length = length;
    r.access = access;
    r.pd = pd;
    return key;
}

std::uint32_t MemoryTable::take_slot()
{
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
    const std::uint8_t generation = r.generation;
    r = Region{};
    r.generation = static_cast<std::uint8_t>(generation + 1);
    if (r.generation == 0)
        r.generation = 1;
    r.live = true;
    return slot << 8 | r.generation;
}

const MemoryTable::Region* MemoryTable::find(std::uint32_t key) const
{
    const std::uint32_t slot = key >> 8;
    if (slot == 0 || slot >= regions_.size() || !regions_[slot].live || regions_[slot].generation != (key & 0xffu))
        return nullptr;
    return &regions_[slot];
}

std::uint32_t MemoryTable::add_window(std::uint32_t pd, std::uint8_t type)
{
    std::unique_lock lock(mutex_);
    const std::uint32_t key = take_slot();
    if (key == 0)
        return 0;
    Region& w = regions_[key >> 8];
    w.window = true;
    w.type = type;
    w.pd = pd;
    return key;
}

bool MemoryTable::apply_bind(Region& w, std::uint8_t generation, std::uint32_t region_key, std::uint64_t addr,
                             std::uint64_t length, std::uint32_t access, std::uint32_t qpn, bool zero_based)
{
    if (length != 0) {
        const Region* r = find(region_key);
        if (!r || r->window || r->pd != w.pd || addr < r->addr || length > r->length ||
            addr - r->addr > r->length - length)
            return false;
    }
    // A new generation: the old key stops working at once.
    w.generation = generation;
    w.addr = length && !zero_based ? addr : 0;
    w.at = length ? addr : 0;
    w.length = length;
    w.access = length ? access & (kRemoteRead | kRemoteWrite) : 0;
    w.parent = length ? region_key : 0;
    w.qpn = qpn;
    return true;
}

std::uint32_t MemoryTable::bind_window(std::uint32_t key, std::uint32_t region_key, std::uint64_t addr,
                                       std::uint64_t length, std::uint32_t access, std::uint32_t qpn,
                                       bool zero_based)
{
    std::unique_lock lock(mutex_);
    const Region* w = find(key);
    if (!w || !w->window)
        return 0;
    Region& slot = regions_[key >> 8];
    std::uint8_t generation = static_cast<std::uint8_t>(slot.generation + 1);
    if (generation == 0)
        generation = 1;
    if (!apply_bind(slot, generation, region_key, addr, length, access, qpn, zero_based))
        return 0;
    return (key & ~0xffu) | slot.generation;
}

bool MemoryTable::bind_window_request(std::uint32_t new_key, std::uint32_t pd, std::uint8_t type, bool require_free,
                                      std::uint32_t region_key, std::uint64_t addr, std::uint64_t length,
                                      std::uint32_t access, std::uint32_t qpn, bool zero_based)
{
    std::unique_lock lock(mutex_);
    const std::uint32_t index = new_key >> 8;
    if (index == 0 || index >= regions_.size())
        return false;
    Region& w = regions_[index];
    if (!w.live || !w.window || w.type != type || w.pd != pd || (type != 1 && type != 2))
        return false;
    if (access & ~(kRemoteRead | kRemoteWrite))
        return false;
    if (type == 1 && zero_based) // IB: a type 1 window is never zero-based
        return false;
    const bool bound = w.length != 0;
    if (length != 0 && require_free && bound)
        return false;
    // Only its own queue pair frees a type 2 window.
    if (length == 0 && type == 2 && bound && w.qpn != qpn)
        return false;
    // Remote write through a window needs the region's local write.
    if (length != 0 && (access & kRemoteWrite)) {
        const Region* r = find(region_key);
        if (!r || !(r->access & kLocalWrite))
            return false;
    }
    return apply_bind(w, static_cast<std::uint8_t>(new_key & 0xffu), region_key, addr, length, access,
                      type == 2 ? qpn : 0, zero_based);
}

bool MemoryTable::invalidate(std::uint32_t key, std::uint32_t pd, std::uint32_t qpn)
{
    std::unique_lock lock(mutex_);
    const Region* found = find(key);
    if (!found || found->pd != pd || (found->window && found->qpn != 0 && found->qpn != qpn) ||
        (found->window && found->type == 1))
        return false;
    Region& r = regions_[key >> 8];
    if (r.window) {
        r.length = 0;
        r.access = 0;
        r.parent = 0;
    } else {
        r.access &= ~(kRemoteRead | kRemoteWrite);
    }
    return true;
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

bool MemoryTable::remove_window(std::uint32_t index, std::uint32_t pd)
{
    std::unique_lock lock(mutex_);
    if (index == 0 || index >= regions_.size() || !regions_[index].live || !regions_[index].window ||
        regions_[index].pd != pd)
        return false;
    regions_[index].live = false;
    free_slots_.push_back(index);
    return true;
}

bool MemoryTable::check(std::uint32_t key, std::uint64_t addr, std::uint64_t length, std::uint32_t access,
                        std::uint32_t pd, std::uint32_t qpn, std::uint64_t* host) const
{
    std::shared_lock lock(mutex_);
    const Region* found = find(key);
    if (!found || found->pd != pd || (found->access & access) != access)
        return false;
    const Region& r = *found;
    const Region* region = &r; // whose address space `addr` is in
    if (r.window) { // remote use only, while bound over a live region, by its queue pair if it has one
        if (r.length == 0 || (access & (kLocalRead | kLocalWrite)) || (r.qpn != 0 && r.qpn != qpn))
            return false;
        region = find(r.parent);
        if (!region || region->window)
            return false;
    }
    // Overflow-safe containment: addr >= start and addr + length <= end.
    if (addr < r.addr || length > r.length || addr - r.addr > r.length - length)
        return false;
    if (host) // a window lies inside its region (bind_window checked it); a region's `at` is its `addr`
        *host = region->host + (r.at + (addr - r.addr) - region->addr);
    return true;
}

} // namespace fastdapl::softnic
