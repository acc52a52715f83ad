// A lock for short critical sections of the data path (an EVD's queue, the
// software NIC's device): taking and releasing it uncontended is one atomic
// exchange and one store, where a pthread mutex costs some sixty
// instructions. A thread that finds it held spins briefly, then yields,
// then sleeps in short steps (back_off); holders never sleep while holding
// it.
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>

namespace fastdapl::fastpath {

// A waiter's step: a few pauses, then yields, then short sleeps (the
// software NIC's device lock is held for a whole round of work, which can
// copy megabytes: a waiter that only yielded took 1,500 sched_yield calls
// during one bandwidth run, and the CPU from the thread it waited for).
inline void back_off(unsigned& spins) noexcept
{
    if (++spins < 64)
        __builtin_ia32_pause();
    else if (spins < 128)
        std::this_thread::yield();
    else
        std::this_thread::sleep_for(std::chrono::microseconds(20));
}

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
    [[gnu::noinline, gnu::cold]] void contended() noexcept
    {
        for (unsigned spins = 0; held_.exchange(true, std::memory_order_acquire);)
            while (held_.load(std::memory_order_relaxed))
                back_off(spins);
    }
    std::atomic<bool> held_{false};
};

// A readers-writer lock in the same manner, for tables read on every
// message and changed by control calls (the softnic's memory table):
// readers take it with one atomic add and leave with one; a writer waits
// until no reader holds it, and new readers wait for the writer. Meets
// SharedLockable (std::shared_lock) and Lockable.
class SharedSpinLock {
public:
    void lock_shared() noexcept
    {
        if (state_.fetch_add(kReader, std::memory_order_acquire) & kWriter) [[unlikely]]
            reader_waits();
    }
    void unlock_shared() noexcept { state_.fetch_sub(kReader, std::memory_order_release); }
    void lock() noexcept
    {
        std::uint32_t idle = 0;
        if (!state_.compare_exchange_strong(idle, kWriter, std::memory_order_acquire)) [[unlikely]]
            writer_waits();
    }
    void unlock() noexcept { state_.fetch_and(~kWriter, std::memory_order_release); }

private:
    static constexpr std::uint32_t kWriter = 1, kReader = 2;
    [[gnu::noinline, gnu::cold]] void reader_waits() noexcept
    {
        // Step back out, let the writer finish, then enter again.
        unsigned spins = 0;
        do {
            state_.fetch_sub(kReader, std::memory_order_relaxed);
            while (state_.load(std::memory_order_relaxed) & kWriter)
                back_off(spins);
        } while (state_.fetch_add(kReader, std::memory_order_acquire) & kWriter);
    }
    [[gnu::noinline, gnu::cold]] void writer_waits() noexcept
    {
        unsigned spins = 0;
        for (std::uint32_t idle = 0; !state_.compare_exchange_weak(idle, kWriter, std::memory_order_acquire); idle = 0)
            back_off(spins);
    }
    std::atomic<std::uint32_t> state_{0};
};

} // namespace fastdapl::fastpath
