// Remote memory region (memory window): remote access to part of an LMR,
// bound by a request posted on an endpoint.
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#pragma once

#include "handles.hpp"

#include <cstdint>

namespace fastdapl::core {

class Ep;
class Evd;
class Lmr;
class Pz;

class Rmr : public Object {
public:
    static constexpr DAT_HANDLE_TYPE kHandleType = DAT_HANDLE_TYPE_RMR;
    Pz* pz = nullptr;
    DAT_RMR_SCOPE scope = DAT_RMR_SCOPE_PZ; // EP: usable only over the connection it was bound on
    std::uint32_t window = 0;               // the softnic's window: its current key
    void* device_window = nullptr;          // a verbs device's (ibv_mw)
    void* device_region = nullptr;          // a verbs device's: the ibv_mr of the last bind
    std::uint32_t window_qpn = 0;           // verbs kinds: the queue pair its type 2 window is bound for (0: free)
    // The current binding; lmr null while unbound.
    Lmr* lmr = nullptr;
    DAT_LMR_TRIPLET triplet{};
    DAT_MEM_PRIV_FLAGS privileges = DAT_MEM_PRIV_NONE_FLAG;
    DAT_VA_TYPE va_type = DAT_VA_TYPE_VA;
    DAT_RMR_CONTEXT context = 0;
    Ep* bind_ep = nullptr;  // the EP of a bind not yet completed
    Ep* bound_on = nullptr; // the EP of the current binding
};

// The completion of a bind posted on `ep` (the reaper, `evd`'s lock held):
// fills `e` with its DAT_RMR_BIND_COMPLETION_EVENT; false when none is to
// be reported (a suppressed success). A failed bind leaves the RMR unbound.
bool rmr_bind_completed(Ep* ep, Evd* evd, DAT_DTO_COMPLETION_STATUS status, DAT_EVENT& e);
// A receive on `ep` whose sender invalidated our remote key `rkey` (the
// reaper): the event says so (DAT_DTO_RECEIVE_WITH_INVALIDATE), and an RMR
// bound with that context is unbound.
void received_invalidate(Ep* ep, DAT_DTO_COMPLETION_EVENT_DATA& d, DAT_RMR_CONTEXT rkey);
// Binds of `ep` not yet completed are forgotten (its queues go).
void forget_rmr_binds(Ep* ep);

void destroy_rmr(Rmr* rmr);

} // namespace fastdapl::core
