// Consumer notification object: wakes one waiter per trigger, calls (and
// detaches) its proxy agent, or makes its eventfd readable.
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#pragma once

#include "handles.hpp"

#include <condition_variable>
#include <mutex>

namespace fastdapl::core {

class Evd;

class Cno : public Object {
public:
    static constexpr DAT_HANDLE_TYPE kHandleType = DAT_HANDLE_TYPE_CNO;
    std::mutex mutex; // last in the lock order (ia.hpp)
    std::condition_variable cv;
    DAT_OS_WAIT_PROXY_AGENT agent{nullptr, nullptr};
    int fd = -1;                 // dat_cno_fd_create: an eventfd, else -1
    int pending = 0;             // triggers not yet taken by a waiter (merged: 0 or 1)
    Evd* last_trigger = nullptr; // for dat_cno_trigger and the waiters' hint
    int waiters = 0;
    std::uint64_t release_epoch = 0; // bumped when the IA closes or its last EVD goes
    std::atomic<int> users{0};       // EVDs that feed it
};

// One trigger: a waiter wakes (or the next wait returns at once), the agent
// is called once and detached, the eventfd becomes readable.
void trigger_cno(Cno* cno, Evd* evd);
// Wakes every waiter with a NULL EVD (the IA closes, or no EVD feeds it any more).
void release_cno_waiters(Cno* cno);
// Moves an EVD from its CNO (if any) to `to` (may be NULL).
void link_cno(Evd* evd, Cno* to);
void destroy_cno(Cno* cno);

} // namespace fastdapl::core
