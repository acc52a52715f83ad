// Endpoints by queue pair number, for devices whose numbers are not small.
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>

namespace fastdapl::core {

class Ep;

// Endpoints by queue pair number for devices whose numbers are not small
// (verbs: 24 bits): open addressing, written under the IA's lock, read
// without one on every completion. A removed entry keeps its number with
// no endpoint, so probes pass over it; an insert reuses the first such.
class QpnTable {
public:
    static constexpr std::uint32_t kSize = 1u << 17; // twice the endpoints an IA offers
    void insert(std::uint32_t qpn, Ep* ep)
    {
        std::lock_guard lock(mutex_);
        Slot* reuse = nullptr;
        for (std::uint32_t i = hash(qpn);; i = (i + 1) & (kSize - 1)) {
            Slot& s = slots_[i];
            const std::uint32_t k = s.qpn.load(std::memory_order_relaxed);
            if (k == qpn) {
                s.ep.store(ep, std::memory_order_release);
                return;
            }
            if (!reuse && (k == kEmpty || !s.ep.load(std::memory_order_relaxed)))
                reuse = &s;
            if (k == kEmpty)
                break;
        }
        reuse->ep.store(nullptr, std::memory_order_relaxed);
        reuse->qpn.store(qpn, std::memory_order_release);
        reuse->ep.store(ep, std::memory_order_release);
    }
    void erase(std::uint32_t qpn)
    {
        std::lock_guard lock(mutex_);
        for (std::uint32_t i = hash(qpn);; i = (i + 1) & (kSize - 1)) {
            const std::uint32_t k = slots_[i].qpn.load(std::memory_order_relaxed);
            if (k == qpn)
                slots_[i].ep.store(nullptr, std::memory_order_release);
            if (k == qpn || k == kEmpty)
                return;
        }
    }
    Ep* find(std::uint32_t qpn) const
    {
        for (std::uint32_t i = hash(qpn);; i = (i + 1) & (kSize - 1)) {
            const std::uint32_t k = slots_[i].qpn.load(std::memory_order_acquire);
            if (k == qpn)
                return slots_[i].ep.load(std::memory_order_acquire);
            if (k == kEmpty)
                return nullptr;
        }
    }

private:
    static constexpr std::uint32_t kEmpty = ~0u; // qpns have 24 bits
    static std::uint32_t hash(std::uint32_t qpn) { return (qpn * 2654435761u) >> 15; }
    struct Slot {
        std::atomic<std::uint32_t> qpn{kEmpty};
        std::atomic<Ep*> ep{nullptr};
    };
    std::mutex mutex_;
    std::unique_ptr<Slot[]> slots_{new Slot[kSize]};
};

} // namespace fastdapl::core
