// Shared receive queue: its limits and watermark, and the ring engine of
// its IA's device kind.
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#pragma once

#include "device_path.hpp"
#include "handles.hpp"

#include <atomic>

namespace fastdapl::core {

class Pz;

class Srq : public Object {
public:
    static constexpr DAT_HANDLE_TYPE kHandleType = DAT_HANDLE_TYPE_SRQ;
    PathKind path = PathKind::softnic;
    SrqRing* ring = nullptr; // the engine of the IA's kind
    Pz* pz = nullptr;
    DAT_COUNT max_recv_dtos = 0; // what the consumer may have outstanding (posted, not reaped)
    DAT_COUNT max_recv_iov = 0;
    std::atomic<DAT_COUNT> low_watermark{DAT_SRQ_LW_DEFAULT};
    std::atomic<int> users{0}; // endpoints attached
    // Completions hand buffers back from whichever EVD reaps them: one at a
    // time (ia.hpp has its place in the lock order). Posting does not take
    // it (the rings are safe against one poster).
    std::atomic_flag completing = ATOMIC_FLAG_INIT;
    void lock_completions()
    {
        while (completing.test_and_set(std::memory_order_acquire))
            completing.wait(true, std::memory_order_relaxed);
    }
    void unlock_completions()
    {
        completing.clear(std::memory_order_release);
        completing.notify_one();
    }
};

// The low watermark was crossed, or the SRQ failed: events on the async EVD
// (device callbacks).
void srq_low_watermark(void* srq);
void srq_failed(void* srq);
void destroy_srq(Srq* srq);

} // namespace fastdapl::core
