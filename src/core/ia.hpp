// The interface adapter: the device path chosen at open, its connection
// manager, and every object made on it (for the abrupt close's cascade).
//
// Lock order (a thread holding one may take those after it, never before):
//   Ia::cm_mutex  >  Evd::mutex of a DTO or connection EVD
//                 >  Srq::completing (lock_completions, reaping an SRQ receive)
//                 >  Evd::mutex of the IA's async EVD (post_async)
//                 >  Cno::mutex (a trigger; the agent runs after it is released)
//   Ia::objects_mutex is taken alone (adopt/forget, the close's snapshot).
// The DTO EVDs of one EP are taken together through std::lock
// (with_completions_held, evd.hpp). The device layers' own locks (the
// softnic's, the CMs') are below all of these: their callbacks into core
// are made without them held, except the socket CM's, whose callbacks take
// cm_mutex first.
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#pragma once

#include "connection.hpp"
#include "device_path.hpp"
#include "extensions.hpp"
#include "handles.hpp"

#include <netinet/in.h>
#include <sys/socket.h>

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace fastdapl::core {

class Evd;
class Ep;
class Psp;

class Ia : public Object {
public:
    static constexpr DAT_HANDLE_TYPE kHandleType = DAT_HANDLE_TYPE_IA;

    std::string name;
    sockaddr_storage address{};
    std::atomic<DAT_IA_HANDLE> consumer_handle{nullptr}; // as the hosting registry names it (found lazily)
    std::unique_ptr<DevicePath> device;                  // chosen once, at open
    std::unique_ptr<ConnectionManager> cm;               // made by the device path
    // Provider-specific attributes (dat_ia_query): names and values, and
    // the DAT_NAMED_ATTRs that point into them.
    std::vector<std::pair<std::string, std::string>> specific;
    std::vector<DAT_NAMED_ATTR> specific_attrs;
    Evd* async_evd = nullptr;
    bool owns_async_evd = false;
    std::atomic<int> children{0}; // live consumer objects, for a graceful close
    std::mutex objects_mutex;
    std::vector<Object*> objects; // the same objects, for an abrupt (cascading) close

    // Held by the CM's callbacks for their whole run and by whoever frees a
    // connection object, so neither sees the other half done. Recursive: a
    // callback's event may run a CNO agent that calls back into the API.
    std::recursive_mutex cm_mutex;
    std::map<std::uint64_t, Psp*> listeners; // listener id -> PSP
    std::map<std::uint64_t, Ep*> attempts;   // connect or accept id -> EP
    std::map<std::uint64_t, UdExchange> ud_exchanges; // UD endpoints' connect or accept id -> its exchange
    std::vector<Object*> requests;           // CRs not yet accepted or rejected: an abrupt close ends them
    IaCounters ib_counters;                  // dat_ib_query_counters

    void adopt(Object* o)
    {
        std::lock_guard lock(objects_mutex);
        objects.push_back(o);
        ++children;
        count_object(o->type, true);
    }
    void forget(Object* o)
    {
        std::lock_guard lock(objects_mutex);
        std::erase(objects, o);
        --children;
        count_object(o->type, false);
    }

private:
    // The IA's object counters (dat_ib_query_counters) by handle type.
    void count_object(DAT_HANDLE_TYPE type, bool created)
    {
        int which = -1;
        switch (type) {
        case DAT_HANDLE_TYPE_PZ:
            which = created ? DCNT_IA_PZ_CREATE : DCNT_IA_PZ_FREE;
            break;
        case DAT_HANDLE_TYPE_LMR:
            which = created ? DCNT_IA_LMR_CREATE : DCNT_IA_LMR_FREE;
            break;
        case DAT_HANDLE_TYPE_RMR:
            which = created ? DCNT_IA_RMR_CREATE : DCNT_IA_RMR_FREE;
            break;
        case DAT_HANDLE_TYPE_PSP:
            which = created ? DCNT_IA_PSP_CREATE : DCNT_IA_PSP_FREE;
            break;
        case DAT_HANDLE_TYPE_RSP:
            which = created ? DCNT_IA_RSP_CREATE : DCNT_IA_RSP_FREE;
            break;
        case DAT_HANDLE_TYPE_EVD:
            which = created ? DCNT_IA_EVD_CREATE : DCNT_IA_EVD_FREE;
            break;
        case DAT_HANDLE_TYPE_EP:
            which = created ? DCNT_IA_EP_CREATE : DCNT_IA_EP_FREE;
            break;
        case DAT_HANDLE_TYPE_SRQ:
            which = created ? DCNT_IA_SRQ_CREATE : DCNT_IA_SRQ_FREE;
            break;
        default:
            break;
        }
        if (which >= 0)
            ib_counters.add(which);
    }

public:
};

// The IA handle a consumer holds (for query results): the hosting
// registry's name for it.
DAT_IA_HANDLE consumer_handle(Ia* ia);

// Private data a connection message carries on this IA.
DAT_COUNT max_private_data(const Ia* ia);

// The IA's attributes: the provider's limits, lowered to the device's.
void fill_ia_attr(Ia* ia, DAT_IA_ATTR* attr);

// Limits of the provider (the device's may be lower).
inline constexpr DAT_COUNT kMaxEvdQlen = 1 << 20;
inline constexpr DAT_COUNT kMinAsyncQlen = 4096;
inline constexpr DAT_COUNT kMaxDtosPerEp = 1 << 14;
inline constexpr DAT_COUNT kDefaultDtos = 64; // an EP's queue depths when the consumer gives none
inline constexpr DAT_COUNT kMaxRdmaReadPerEp = 16;
inline constexpr DAT_COUNT kMaxRecvPerSrq = 0x7fff; // the doorbell record counts posts in 16 bits
inline constexpr DAT_COUNT kMaxEpPerSrq = 1 << 16;
inline constexpr std::uint32_t kMaxSge = 16;
inline constexpr std::uint32_t kMaxMessageSize = 1u << 30;
// A UD endpoint's largest message: one datagram of the 4096-byte MTU IAs report.
inline constexpr std::uint32_t kMaxUdMessageSize = 4096;
inline constexpr std::uint32_t kMaxInline = 64; // bytes a WQE carries inline

} // namespace fastdapl::core
