// Protection zone.
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#pragma once

#include "handles.hpp"

namespace fastdapl::core {

class Pz : public Object {
public:
    static constexpr DAT_HANDLE_TYPE kHandleType = DAT_HANDLE_TYPE_PZ;
    void* device_pd = nullptr; // the device path's protection domain
    std::atomic<int> users{0}; // LMRs, RMRs, EPs, SRQs in this PZ
};

void destroy_pz(Pz* pz);

} // namespace fastdapl::core
