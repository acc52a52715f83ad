// Local memory region.
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#pragma once

#include "handles.hpp"

namespace fastdapl::core {

class Pz;

class Lmr : public Object {
public:
    static constexpr DAT_HANDLE_TYPE kHandleType = DAT_HANDLE_TYPE_LMR;
    Pz* pz = nullptr;
    DAT_MEM_TYPE mem_type = DAT_MEM_TYPE_VIRTUAL;
    DAT_REGION_DESCRIPTION region{};
    DAT_VLEN length = 0;
    std::uint64_t address = 0; // where the registered memory starts (also for an LMR over an LMR)
    // Where the peer addresses its first byte through rmr_context: `address`,
    // or 0 when it is zero-based (DAT_VA_TYPE_ZB). Local triplets (and RMR
    // binds) always name its bytes by their address in this process: the
    // posting path copies inline data from that address, with no lookup.
    std::uint64_t registered_address = 0;
    DAT_MEM_PRIV_FLAGS privileges = DAT_MEM_PRIV_NONE_FLAG;
    DAT_VA_TYPE va_type = DAT_VA_TYPE_VA;
    DAT_LMR_CONTEXT lmr_context = 0;
    DAT_RMR_CONTEXT rmr_context = 0; // 0 without remote rights
    void* device_mr = nullptr;       // the device path's registration, if it keeps one
    void* device_remote_mr = nullptr; // a zero-based LMR's second one, for the peer (at 0)
    std::atomic<int> users{0};       // RMRs bound to it, LMRs registered on top of it
    char shared_id[DAT_LMR_COOKIE_SIZE] = {}; // DAT_MEM_TYPE_SHARED_VIRTUAL: its cookie
};

void destroy_lmr(Lmr* lmr);

} // namespace fastdapl::core
