// A lock for the short critical sections of the data path (an EVD's queue):
// taking and releasing it uncontended is one atomic exchange and one store,
// where a pthread mutex costs some sixty instructions. A thread that finds
// it held spins briefly, then yields: holders never block while holding it.
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#pragma once

#include <atomic>

namespace fastdapl::core {

class SpinLock {
public:
    void lock() noexcept
    {
        if (held_.exchange(true, std::memory_order_acquire)) [[unlikely]]
            contended();
    }
    bool try_lock() noexcept
    {
        return !held_.load(std::memory_order_relaxed) && !held_.exchange(true, std::memory_order_acquire);
    }
    void unlock() noexcept { held_.store(false, std::memory_order_release); }

private:
    void contended() noexcept;
    std::atomic<bool> held_{false};
};

} // namespace fastdapl::core
