// The provider's object types: IA, PZ, LMR, EVD (software and async streams so far).
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#pragma once

#include "device.hpp" // softnic
#include "object.hpp"

#include <netinet/in.h>
#include <sys/socket.h>

#include <condition_variable>
#include <deque>
#include <memory>
#include <string>
#include <vector>

namespace fastdapl::core {

class Evd;

class Ia : public Object {
public:
    static constexpr DAT_HANDLE_TYPE kHandleType = DAT_HANDLE_TYPE_IA;

    std::string name;
    sockaddr_storage address{};
    std::unique_ptr<softnic::Device> device;
    Evd* async_evd = nullptr;
    bool owns_async_evd = false;
    std::atomic<int> children{0}; // live consumer objects, for a graceful close
    std::mutex objects_mutex;
    std::vector<Object*> objects; // the same objects, for an abrupt (cascading) close

    void adopt(Object* o)
    {
        std::lock_guard lock(objects_mutex);
        objects.push_back(o);
        ++children;
    }
    void forget(Object* o)
    {
        std::lock_guard lock(objects_mutex);
        std::erase(objects, o);
        --children;
    }
};

class Pz : public Object {
public:
    static constexpr DAT_HANDLE_TYPE kHandleType = DAT_HANDLE_TYPE_PZ;
    std::uint32_t pd = 0;
    std::atomic<int> users{0}; // LMRs, RMRs, EPs, SRQs in this PZ
};

class Lmr : public Object {
public:
    static constexpr DAT_HANDLE_TYPE kHandleType = DAT_HANDLE_TYPE_LMR;
    Pz* pz = nullptr;
    DAT_MEM_TYPE mem_type = DAT_MEM_TYPE_VIRTUAL;
    DAT_REGION_DESCRIPTION region{};
    DAT_VLEN length = 0;
    DAT_MEM_PRIV_FLAGS privileges = DAT_MEM_PRIV_NONE_FLAG;
    DAT_VA_TYPE va_type = DAT_VA_TYPE_VA;
    std::uint32_t key = 0; // softnic memory key (lmr_context, and rmr_context when remote access is granted)
    bool remote = false;
    std::atomic<int> users{0}; // RMRs bound to it, LMRs registered on top of it
};

class Evd : public Object {
public:
    static constexpr DAT_HANDLE_TYPE kHandleType = DAT_HANDLE_TYPE_EVD;
    DAT_EVD_FLAGS flags = DAT_EVD_DEFAULT_FLAG;
    DAT_COUNT qlen = 0;
    bool enabled = true;
    bool waitable = true;
    bool is_async = false; // the IA's async EVD: freed with the IA
    std::mutex mutex;
    std::condition_variable cv;
    std::deque<DAT_EVENT> events;
    int waiters = 0;
    std::uint64_t unwaitable_epoch = 0; // bumped to release waiters
    bool aborted = false;               // the IA closed abruptly under a waiter
};

} // namespace fastdapl::core
