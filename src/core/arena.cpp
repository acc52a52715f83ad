// The handle arena.
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#include "object.hpp"

#include <sys/mman.h>

namespace fastdapl::core {

namespace {
constexpr std::size_t kReserveBytes = std::size_t{1} << 32; // address space only
constexpr std::size_t kCommitSlots = 512;                   // 1 MiB at a time
// Freed slots wait in the queue until this many are free before reuse.
constexpr std::size_t kQuarantine = 4096;
} // namespace

Arena& Arena::instance()
{
    // The mapping itself is never unmapped (a stale handle stays readable
    // for as long as the process lives); the bookkeeping goes with the library.
    static Arena arena;
    return arena;
}

Arena::Arena()
{
    void* p = mmap(nullptr, kReserveBytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p != MAP_FAILED) {
        base_ = static_cast<std::uint8_t*>(p);
        reserved_slots_ = kReserveBytes / kSlotSize;
    }
}

void* Arena::allocate()
{
    std::lock_guard lock(mutex_);
    if (free_.size() > kQuarantine) {
        const std::size_t slot = free_.front();
        free_.pop_front();
        return base_ + slot * kSlotSize;
    }
    const std::size_t used = used_.load(std::memory_order_relaxed);
    if (used == committed_slots_) {
        if (!base_ || committed_slots_ + kCommitSlots > reserved_slots_)
            return nullptr;
        if (mprotect(base_ + committed_slots_ * kSlotSize, kCommitSlots * kSlotSize, PROT_READ | PROT_WRITE) != 0)
            return nullptr;
        committed_slots_ += kCommitSlots;
    }
    used_.store(used + 1, std::memory_order_release);
    return base_ + used * kSlotSize;
}

void Arena::release(void* slot)
{
    std::lock_guard lock(mutex_);
    free_.push_back(static_cast<std::size_t>(static_cast<std::uint8_t*>(slot) - base_) / kSlotSize);
}

} // namespace fastdapl::core
