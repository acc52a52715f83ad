// Remote memory regions: create (PZ or EP scope), query, bind, free.
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#include "rmr.hpp"

#include "api.hpp"
#include "data_path.hpp"
#include "ep.hpp"
#include "ia.hpp"
#include "lmr.hpp"
#include "pz.hpp"

#include <deque>
#include <iterator>
#include <map>
#include <mutex>

namespace fastdapl::core {

namespace {

// A bind posted and not yet completed: its completion (a NOP request, in
// order with the EP's other requests) finds it here, oldest first.
struct PendingBind {
    Rmr* rmr = nullptr; // null once the RMR was freed
    DAT_RMR_COOKIE cookie{};
    bool suppress = false; // no event for a success
};

// Binds are rare: one lock and a map for every EP's queue of them.
std::mutex g_binds_mutex;
std::map<const Ep*, std::deque<PendingBind>> g_binds;
// Bound RMRs by their IA and context, for dat_ep_post_rdma_read_to_rmr
// (g_binds_mutex).
std::map<std::pair<const Ia*, DAT_RMR_CONTEXT>, Rmr*> g_bound;

constexpr DAT_MEM_PRIV_FLAGS kRemoteRights =
    static_cast<DAT_MEM_PRIV_FLAGS>(DAT_MEM_PRIV_REMOTE_READ_FLAG | DAT_MEM_PRIV_REMOTE_WRITE_FLAG);

DAT_RETURN rmr_create_common(DAT_PZ_HANDLE pz_handle, DAT_RMR_HANDLE* out, DAT_RMR_SCOPE scope)
{
    Pz* pz = from_handle<Pz>(pz_handle);
    if (!pz)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_PZ);
    if (!out)
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    Ia* ia = pz->ia;
    if (ia->device->max_rmrs() == 0)
        return error(DAT_MODEL_NOT_SUPPORTED); // max_rmrs is 0 on this IA
    Rmr* rmr = make_object<Rmr>();
    if (!rmr)
        return error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
    rmr->provider = ia->provider;
    rmr->ia = ia;
    rmr->pz = pz;
    rmr->scope = scope;
    if (DAT_RETURN rc = ia->device->create_window(*rmr); rc != DAT_SUCCESS) {
        destroy_object(rmr);
        return rc;
    }
    ++pz->users;
    ia->adopt(rmr);
    *out = rmr;
    return DAT_SUCCESS;
}

// The RMR's binding ends (an unbind, a failed bind, free; g_binds_mutex held).
void release_binding(Rmr* rmr)
{
    if (rmr->lmr) {
        --rmr->lmr->users;
        g_bound.erase({rmr->ia, rmr->context});
    }
    rmr->lmr = nullptr;
    rmr->bound_on = nullptr;
    rmr->triplet = {};
    rmr->privileges = DAT_MEM_PRIV_NONE_FLAG;
    rmr->va_type = DAT_VA_TYPE_VA;
}

} // namespace

DAT_RETURN rmr_create(DAT_PZ_HANDLE pz, DAT_RMR_HANDLE* out)
{
    return rmr_create_common(pz, out, DAT_RMR_SCOPE_PZ);
}

DAT_RETURN rmr_create_for_ep(DAT_PZ_HANDLE pz, DAT_RMR_HANDLE* out)
{
    return rmr_create_common(pz, out, DAT_RMR_SCOPE_EP);
}

DAT_RETURN rmr_query(DAT_RMR_HANDLE handle, DAT_RMR_PARAM_MASK mask, DAT_RMR_PARAM* param)
{
    Rmr* rmr = from_handle<Rmr>(handle);
    if (!rmr)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_RMR);
    if (mask & ~DAT_RMR_FIELD_ALL)
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    if (mask && !param)
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    if (!mask)
        return DAT_SUCCESS;
    param->ia_handle = consumer_handle(rmr->ia);
    param->pz_handle = rmr->pz;
    // While unbound: an empty triplet, no rights, context 0.
    param->lmr_triplet = rmr->triplet;
    param->mem_priv = rmr->privileges;
    param->rmr_context = rmr->lmr ? rmr->context : 0;
    param->rmr_scope = rmr->scope;
    param->va_type = rmr->va_type;
    return DAT_SUCCESS;
}

DAT_RETURN rmr_bind(DAT_RMR_HANDLE handle, DAT_LMR_HANDLE lmr_handle, const DAT_LMR_TRIPLET* triplet,
                    DAT_MEM_PRIV_FLAGS privileges, DAT_VA_TYPE va_type, DAT_EP_HANDLE ep_handle,
                    DAT_RMR_COOKIE cookie, DAT_COMPLETION_FLAGS flags, DAT_RMR_CONTEXT* context)
{
    Rmr* rmr = from_handle<Rmr>(handle);
    if (!rmr)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_RMR);
    Ep* ep = from_handle<Ep>(ep_handle);
    if (!ep || ep->ia != rmr->ia)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EP);
    if (!triplet)
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    const bool unbind = triplet->segment_length == 0;
    if (!unbind && !context)
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG9);
    if (privileges & ~kRemoteRights)
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG4);
    // Zero-based (DAT_VA_TYPE_ZB): the peer addresses the window from 0,
    // whatever the LMR's type; where the device kind cannot bind such a
    // window, bind_window answers DAT_MODEL_NOT_SUPPORTED.
    if (va_type != DAT_VA_TYPE_VA && va_type != DAT_VA_TYPE_ZB)
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG5);
    constexpr DAT_COMPLETION_FLAGS kBindFlags =
        static_cast<DAT_COMPLETION_FLAGS>(DAT_COMPLETION_SUPPRESS_FLAG | DAT_COMPLETION_UNSIGNALLED_FLAG |
                                          DAT_COMPLETION_BARRIER_FENCE_FLAG);
    if (flags & ~kBindFlags)
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG8);
    Lmr* lmr = nullptr;
    if (!unbind) {
        lmr = from_handle<Lmr>(lmr_handle);
        if (!lmr || lmr->ia != rmr->ia)
            return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_LMR);
        if (triplet->lmr_context != lmr->lmr_context)
            return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
        // Within the LMR: addr >= start and addr + length <= end, overflow-safe.
        const std::uint64_t addr = triplet->virtual_address, length = triplet->segment_length;
        // In the LMR's local addresses (a zero-based one's too: lmr.hpp),
        // whatever addresses the peer uses.
        if (addr < lmr->address || length > lmr->length || addr - lmr->address > lmr->length - length)
            return error(DAT_PROTECTION_VIOLATION, DAT_NO_SUBTYPE);
        // The EP, the LMR and the RMR share one PZ.
        if (lmr->pz != rmr->pz || ep->pz != rmr->pz)
            return error(DAT_PROTECTION_VIOLATION, DAT_NO_SUBTYPE);
        // Remote read needs the LMR's local read, remote write its local write.
        if (((privileges & DAT_MEM_PRIV_REMOTE_READ_FLAG) && !(lmr->privileges & DAT_MEM_PRIV_LOCAL_READ_FLAG)) ||
            ((privileges & DAT_MEM_PRIV_REMOTE_WRITE_FLAG) && !(lmr->privileges & DAT_MEM_PRIV_LOCAL_WRITE_FLAG)))
            return error(DAT_PRIVILEGES_VIOLATION, DAT_NO_SUBTYPE);
    }
    // A posted request: when connected, or disconnected (flushed at once).
    const DAT_EP_STATE s = ep->state.load();
    if ((s != DAT_EP_STATE_CONNECTED && s != DAT_EP_STATE_DISCONNECTED) || !ep->queues)
        return error(DAT_INVALID_STATE, ep_state_subtype(s));
    Ia* ia = rmr->ia;
    // Recorded before anything is posted: the completion may be reaped on
    // another thread at once. No lock is held while posting: a post may run
    // the device, which takes EVD locks.
    const bool suppress = (flags & (DAT_COMPLETION_SUPPRESS_FLAG | DAT_COMPLETION_UNSIGNALLED_FLAG)) != 0;
    {
        // Under the lock: a completion clears bind_ep only once the device
        // path is done with the RMR (bind_failed).
        std::lock_guard lock(g_binds_mutex);
        if (rmr->bind_ep)
            return error(DAT_INVALID_STATE, DAT_NO_SUBTYPE); // the previous bind has not completed
        release_binding(rmr);
        if (!unbind) {
            rmr->lmr = lmr;
            ++lmr->users;
            rmr->triplet = *triplet;
            rmr->privileges = privileges;
            rmr->va_type = va_type;
        }
        rmr->bind_ep = ep;
        g_binds[ep].push_back({rmr, cookie, suppress});
    }
    const auto forget = [&] {
        std::lock_guard lock(g_binds_mutex);
        auto& queue = g_binds[ep];
        for (auto it = queue.rbegin(); it != queue.rend(); ++it)
            if (it->rmr == rmr) {
                queue.erase(std::next(it).base());
                break;
            }
        if (queue.empty())
            g_binds.erase(ep);
        rmr->bind_ep = nullptr;
        release_binding(rmr);
    };
    bool posted = false;
    const DAT_LMR_TRIPLET range = unbind ? DAT_LMR_TRIPLET{} : *triplet;
    if (DAT_RETURN rc = ia->device->bind_window(*rmr, lmr, range, privileges, *ep, posted); rc != DAT_SUCCESS) {
        forget();
        return rc;
    }
    const DAT_RMR_CONTEXT bound = rmr->context;
    if (!unbind) {
        std::lock_guard lock(g_binds_mutex);
        rmr->bound_on = ep;
        g_bound[{ia, bound}] = rmr;
    }
    if (!posted) {
        // The completion: a NOP request in order with the EP's others,
        // always signalled so that it finds its bind.
        const DAT_RETURN rc = dp::post_request(ep, MLX5_OPCODE_NOP, 0, nullptr, 0, DAT_DTO_COOKIE{}, nullptr,
                                               DAT_COMPLETION_DEFAULT_FLAG);
        if (rc != DAT_SUCCESS) { // the send queue is full: the RMR is left unbound
            forget();
            ia->device->bind_failed(*rmr);
            return rc;
        }
    }
    if (context)
        *context = unbind ? 0 : bound;
    return DAT_SUCCESS;
}

bool rmr_bind_completed(Ep* ep, Evd* evd, DAT_DTO_COMPLETION_STATUS status, DAT_EVENT& e)
{
    std::lock_guard lock(g_binds_mutex);
    auto it = g_binds.find(ep);
    if (it == g_binds.end() || it->second.empty())
        return false; // not ours (cannot happen: only binds post NOPs)
    const PendingBind bind = it->second.front();
    it->second.pop_front();
    if (it->second.empty())
        g_binds.erase(it);
    if (!bind.rmr)
        return false; // freed meanwhile
    Rmr* rmr = bind.rmr;
    if (status != DAT_DTO_SUCCESS) { // flushed: the window is not bound after all
        release_binding(rmr); // first: it forgets the context bind_failed clears
        rmr->ia->device->bind_failed(*rmr);
    }
    rmr->bind_ep = nullptr; // last: a new bind may start (rmr_bind looks under the lock)
    if (status == DAT_DTO_SUCCESS && bind.suppress)
        return false;
    e.event_number = DAT_RMR_BIND_COMPLETION_EVENT;
    e.evd_handle = evd;
    auto& d = e.event_data.rmr_completion_event_data;
    d.rmr_handle = rmr;
    d.user_cookie = bind.cookie;
    d.status = status == DAT_DTO_SUCCESS ? DAT_RMR_BIND_SUCCESS : status;
    return true;
}

void received_invalidate(Ep* ep, DAT_DTO_COMPLETION_EVENT_DATA& d, DAT_RMR_CONTEXT rkey)
{
    d.operation = DAT_DTO_RECEIVE_WITH_INVALIDATE;
    d.rmr_context = rkey;
    if (d.status != DAT_DTO_SUCCESS)
        return;
    std::lock_guard lock(g_binds_mutex);
    if (auto it = g_bound.find({ep->ia, rkey}); it != g_bound.end())
        release_binding(it->second); // the device unbound the window already
}

void forget_rmr_binds(Ep* ep)
{
    std::lock_guard lock(g_binds_mutex);
    auto it = g_binds.find(ep);
    if (it == g_binds.end())
        return;
    for (PendingBind& b : it->second)
        if (b.rmr)
            b.rmr->bind_ep = nullptr;
    g_binds.erase(it);
}

void destroy_rmr(Rmr* rmr)
{
    {
        std::lock_guard lock(g_binds_mutex);
        if (rmr->bind_ep)
            if (auto it = g_binds.find(rmr->bind_ep); it != g_binds.end())
                for (PendingBind& b : it->second)
                    if (b.rmr == rmr)
                        b.rmr = nullptr;
    }
    {
        std::lock_guard lock(g_binds_mutex);
        if (rmr->lmr)
            g_bound.erase({rmr->ia, rmr->context});
    }
    rmr->ia->device->destroy_window(*rmr);
    destroy_object(rmr);
}

DAT_RETURN ep_post_rdma_read_to_rmr(DAT_EP_HANDLE handle, const DAT_RMR_TRIPLET* local, DAT_DTO_COOKIE cookie,
                                    const DAT_RMR_TRIPLET* remote, DAT_COMPLETION_FLAGS flags)
{
    Ep* ep = from_handle<Ep>(handle);
    if (!ep)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EP);
    if (!local)
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    // The target is an RMR of ours: it is read into through the region it is
    // bound to, so the LMR's context never goes on the wire. It must be
    // bound in the EP's PZ (and, if EP-scoped, on this EP), give remote
    // write, and cover the range.
    DAT_LMR_TRIPLET target{};
    {
        std::lock_guard lock(g_binds_mutex);
        auto it = g_bound.find({ep->ia, local->rmr_context});
        if (it == g_bound.end())
            return error(DAT_PROTECTION_VIOLATION, DAT_NO_SUBTYPE);
        const Rmr* rmr = it->second;
        if (rmr->pz != ep->pz || (rmr->scope == DAT_RMR_SCOPE_EP && rmr->bound_on != ep))
            return error(DAT_PROTECTION_VIOLATION, DAT_NO_SUBTYPE);
        if (!(rmr->privileges & DAT_MEM_PRIV_REMOTE_WRITE_FLAG))
            return error(DAT_PRIVILEGES_VIOLATION, DAT_NO_SUBTYPE);
        // The triplet is in the RMR's addresses: offsets if zero-based.
        const bool zero_based = rmr->va_type == DAT_VA_TYPE_ZB;
        const std::uint64_t start = zero_based ? 0 : rmr->triplet.virtual_address;
        const std::uint64_t size = rmr->triplet.segment_length;
        const std::uint64_t addr = local->virtual_address, length = local->segment_length;
        if (addr < start || length > size || addr - start > size - length)
            return error(DAT_PROTECTION_VIOLATION, DAT_NO_SUBTYPE);
        target = {rmr->triplet.virtual_address + (addr - start), local->segment_length, rmr->lmr->lmr_context};
    }
    return ep_post_rdma_read(handle, 1, &target, cookie, remote, flags);
}

DAT_RETURN rmr_free(DAT_RMR_HANDLE handle)
{
    Rmr* rmr = from_handle<Rmr>(handle);
    if (!rmr)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_RMR);
    // Unbound first (the window and its key go with it).
    {
        std::lock_guard lock(g_binds_mutex);
        release_binding(rmr);
    }
    --rmr->pz->users;
    rmr->ia->forget(rmr);
    destroy_rmr(rmr);
    return DAT_SUCCESS;
}

} // namespace fastdapl::core
