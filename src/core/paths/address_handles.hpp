// UD endpoints' address handles, shared by the device kinds that have UD
// endpoints (softnic.hpp, verbs.hpp): a table of what each handle names.
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <mutex>
#include <new>

namespace fastdapl::core {

// UD endpoints' address handles (DAT_IB_ADDR_HANDLE.ah): a peer's datagram
// destination, in a table made at the first one. A post takes a handle
// only if it points at an entry of this table that is live, so a stale or
// forged one is refused, never read; freed entries are reused last.
class AddressHandles {
public:
    static constexpr std::uint32_t kCapacity = 1u << 14;
    struct Entry {
        std::atomic<std::uint64_t> destination{0}; // softnic::datagram_destination; verbs: the ibv_ah*
        std::atomic<bool> live{false};
    };
    // nullptr when every entry is live.
    Entry* make(std::uint64_t destination);
    // false for what is not a live handle; `destination`: what it held.
    bool free(const void* ah, std::uint64_t* destination = nullptr);
    // The destination of live handle `ah`.
    bool destination_of(const void* ah, std::uint64_t& out) const
    {
        const Entry* base = entries_.load(std::memory_order_acquire);
        const auto p = reinterpret_cast<std::uintptr_t>(ah), b = reinterpret_cast<std::uintptr_t>(base);
        if (!base || p < b || p >= b + sizeof(Entry) * kCapacity || (p - b) % sizeof(Entry))
            return false;
        const Entry& e = *static_cast<const Entry*>(ah);
        if (!e.live.load(std::memory_order_acquire))
            return false;
        out = e.destination.load(std::memory_order_relaxed);
        return true;
    }
    ~AddressHandles() { delete[] entries_.load(); }

private:
    std::mutex mutex_;
    std::atomic<Entry*> entries_{nullptr};
    std::uint32_t never_used_ = 0;   // entries from here on were never handed out
    std::deque<std::uint32_t> freed_; // oldest first
};

inline AddressHandles::Entry* AddressHandles::make(std::uint64_t destination)
{
    std::lock_guard lock(mutex_);
    Entry* base = entries_.load(std::memory_order_relaxed);
    if (!base) {
        base = new (std::nothrow) Entry[kCapacity];
        if (!base)
            return nullptr;
        entries_.store(base, std::memory_order_release);
    }
    std::uint32_t index;
    if (never_used_ < kCapacity) {
        index = never_used_++;
    } else if (!freed_.empty()) {
        index = freed_.front();
        freed_.pop_front();
    } else {
        return nullptr;
    }
    base[index].destination.store(destination, std::memory_order_relaxed);
    base[index].live.store(true, std::memory_order_release);
    return &base[index];
}

inline bool AddressHandles::free(const void* ah, std::uint64_t* destination_out)
{
    std::uint64_t destination;
    std::lock_guard lock(mutex_);
    if (!destination_of(ah, destination))
        return false;
    if (destination_out)
        *destination_out = destination;
    Entry* base = entries_.load(std::memory_order_relaxed);
    const auto index = static_cast<std::uint32_t>(static_cast<const Entry*>(ah) - base);
    base[index].live.store(false, std::memory_order_release);
    freed_.push_back(index);
    return true;
}

} // namespace fastdapl::core
