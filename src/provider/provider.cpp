// libfastdapl.so.2: the DAT provider table and the calls delivered so far
// (IA, PZ, LMR, software/async EVDs, handle helpers). Calls of later work
// answer DAT_MODEL_NOT_SUPPORTED with the error class bit.
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#include "objects.hpp"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>

#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#define FASTDAPL_EXPORT __attribute__((visibility("default")))

using namespace fastdapl;
using namespace fastdapl::core;

namespace {

constexpr std::uint32_t kProviderMajor = 0;
constexpr std::uint32_t kProviderMinor = 1;
constexpr DAT_COUNT kMaxEvdQlen = 1 << 20;

// One table per registered IA name; objects point at their IA's table.
struct Registration {
    DAT_PROVIDER table{};
    DAT_PROVIDER_INFO info{};
    std::string name;
    std::string ia_params;
};
std::mutex g_registrations_mutex;
std::map<std::string, std::unique_ptr<Registration>> g_registrations;

DAT_RETURN not_supported() { return error(DAT_MODEL_NOT_SUPPORTED); }

// IA address from ia_params: an interface name ("lo", "eth0") or an IPv4
// address; empty means loopback.
bool resolve_address(const std::string& params, sockaddr_storage& out)
{
    std::string word = params.substr(0, params.find(' '));
    if (word.empty())
        word = "lo";
    auto* sin = reinterpret_cast<sockaddr_in*>(&out);
    std::memset(&out, 0, sizeof out);
    sin->sin_family = AF_INET;
    if (inet_pton(AF_INET, word.c_str(), &sin->sin_addr) == 1)
        return true;
    ifaddrs* list = nullptr;
    if (getifaddrs(&list) != 0)
        return false;
    bool found = false;
    for (ifaddrs* i = list; i && !found; i = i->ifa_next) {
        if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET && word == i->ifa_name) {
            std::memcpy(sin, i->ifa_addr, sizeof *sin);
            found = true;
        }
    }
    freeifaddrs(list);
    return found;
}

// --- EVD ------------------------------------------------------------------------

Evd* new_evd(Ia* ia, DAT_COUNT qlen, DAT_EVD_FLAGS flags)
{
    Evd* evd = make_object<Evd>();
    if (!evd)
        return nullptr;
    evd->provider = ia->provider;
    evd->ia = ia;
    evd->qlen = qlen;
    evd->flags = flags;
    return evd;
}

// Queues an event; false when the queue is full.
bool post_event(Evd* evd, const DAT_EVENT& event)
{
    std::lock_guard lock(evd->mutex);
    if (static_cast<DAT_COUNT>(evd->events.size()) >= evd->qlen)
        return false;
    evd->events.push_back(event);
    evd->cv.notify_all();
    return true;
}

// --- IA -------------------------------------------------------------------------

DAT_RETURN ia_open(const DAT_NAME_PTR name, DAT_COUNT async_qlen, DAT_EVD_HANDLE* async_evd, DAT_IA_HANDLE* ia_out)
{
    if (!name || !async_evd || !ia_out)
        return error(DAT_INVALID_PARAMETER, !name ? DAT_INVALID_ARG1 : !async_evd ? DAT_INVALID_ARG3 : DAT_INVALID_ARG4);
    Registration* reg = nullptr;
    {
        std::lock_guard lock(g_registrations_mutex);
        auto it = g_registrations.find(name);
        if (it == g_registrations.end())
            return error(DAT_PROVIDER_NOT_FOUND, DAT_NAME_NOT_REGISTERED);
        reg = it->second.get();
    }
    Evd* shared = nullptr;
    if (*async_evd != DAT_HANDLE_NULL && *async_evd != DAT_EVD_ASYNC_EXISTS) {
        shared = from_handle<Evd>(*async_evd);
        if (!shared || !(shared->flags & DAT_EVD_ASYNC_FLAG))
            return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_ASYNC);
    } else if (*async_evd == DAT_HANDLE_NULL && (async_qlen <= 0 || async_qlen > kMaxEvdQlen)) {
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    }
    sockaddr_storage addr;
    if (!resolve_address(reg->ia_params, addr))
        return error(DAT_INVALID_ADDRESS, DAT_INVALID_ADDRESS_UNSUPPORTED);
    Ia* ia = make_object<Ia>();
    if (!ia)
        return error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
    ia->provider = &reg->table;
    ia->ia = ia;
    ia->name = name;
    ia->address = addr;
    ia->device = std::make_unique<softnic::Device>();
    if (*async_evd == DAT_HANDLE_NULL) {
        ia->async_evd = new_evd(ia, async_qlen, DAT_EVD_ASYNC_FLAG);
        if (!ia->async_evd) {
            destroy_object(ia);
            return error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
        }
        ia->async_evd->is_async = true;
        ia->owns_async_evd = true;
        *async_evd = ia->async_evd;
    } else {
        ia->async_evd = shared; // nullptr for DAT_EVD_ASYNC_EXISTS
    }
    *ia_out = ia;
    return DAT_SUCCESS;
}

void release_waiters(Evd* evd)
{
    std::unique_lock lock(evd->mutex);
    evd->aborted = true;
    ++evd->unwaitable_epoch;
    evd->cv.notify_all();
    while (evd->waiters > 0) { // they leave promptly once woken
        lock.unlock();
        std::this_thread::yield();
        lock.lock();
    }
}

void destroy_any(Object* o)
{
    switch (o->type) {
    case DAT_HANDLE_TYPE_LMR: {
        auto* lmr = static_cast<Lmr*>(o);
        lmr->ia->device->memory().remove(lmr->key);
        destroy_object(lmr);
        break;
    }
    case DAT_HANDLE_TYPE_PZ:
        destroy_object(static_cast<Pz*>(o));
        break;
    case DAT_HANDLE_TYPE_EVD:
        release_waiters(static_cast<Evd*>(o));
        destroy_object(static_cast<Evd*>(o));
        break;
    default:
        break;
    }
}

DAT_RETURN ia_close(DAT_IA_HANDLE handle, DAT_CLOSE_FLAGS flags)
{
    Ia* ia = from_handle<Ia>(handle);
    if (!ia)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA);
    if (flags != DAT_CLOSE_ABRUPT_FLAG && flags != DAT_CLOSE_GRACEFUL_FLAG)
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    if (flags == DAT_CLOSE_GRACEFUL_FLAG && ia->children.load() > 0)
        return error(DAT_INVALID_STATE, DAT_INVALID_STATE_IA_IN_USE);
    // Abrupt close: every object of the IA goes, newest first (LMRs before
    // the PZ they use); a thread waiting on an EVD returns DAT_ABORT.
    std::vector<Object*> objects;
    {
        std::lock_guard lock(ia->objects_mutex);
        objects.swap(ia->objects);
    }
    if (ia->owns_async_evd && ia->async_evd)
        objects.insert(objects.begin(), ia->async_evd);
    for (auto it = objects.rbegin(); it != objects.rend(); ++it)
        destroy_any(*it);
    ia->children = 0;
    ia->device.reset();
    destroy_object(ia);
    return DAT_SUCCESS;
}

void fill_ia_attr(Ia* ia, DAT_IA_ATTR* a)
{
    std::memset(a, 0, sizeof *a);
    std::snprintf(a->adapter_name, sizeof a->adapter_name, "softnic-tcp");
    std::snprintf(a->vendor_name, sizeof a->vendor_name, "fastdapl");
    a->hardware_version_major = kProviderMajor;
    a->hardware_version_minor = kProviderMinor;
    a->ia_address_ptr = reinterpret_cast<DAT_IA_ADDRESS_PTR>(&ia->address);
    a->max_eps = 1 << 16;
    a->max_dto_per_ep = 1 << 14;
    a->max_rdma_read_per_ep_in = 16;
    a->max_rdma_read_per_ep_out = 16;
    a->max_evds = 1 << 16;
    a->max_evd_qlen = kMaxEvdQlen;
    a->max_iov_segments_per_dto = softnic::kMaxSge;
    a->max_lmrs = 1 << 24;
    a->max_lmr_block_size = 0xffffffffu;
    a->max_lmr_virtual_address = ~DAT_VADDR{0};
    a->max_pzs = 1 << 16;
    a->max_message_size = softnic::kMaxMessageSize;
    a->max_rdma_size = softnic::kMaxMessageSize;
    a->max_rmrs = 0; // memory windows: not yet
    a->max_rmr_target_address = 0;
    a->max_srqs = 0; // SRQ: issue 4
    a->max_ep_per_srq = 0;
    a->max_recv_per_srq = 0;
    a->max_iov_segments_per_rdma_read = softnic::kMaxSge;
    a->max_iov_segments_per_rdma_write = softnic::kMaxSge;
    a->max_rdma_read_in = 16;
    a->max_rdma_read_out = 16;
    a->max_rdma_read_per_ep_in_guaranteed = DAT_TRUE;
    a->max_rdma_read_per_ep_out_guaranteed = DAT_TRUE;
    a->zb_supported = DAT_FALSE;
    a->extension_supported = DAT_EXTENSION_NONE;
}

void fill_provider_attr(DAT_PROVIDER_ATTR* p)
{
    // evd_stream_merging_supported is const in the ABI: build the whole struct.
    DAT_PROVIDER_ATTR attr{};
    std::snprintf(attr.provider_name, sizeof attr.provider_name, "fastdapl");
    attr.provider_version_major = kProviderMajor;
    attr.provider_version_minor = kProviderMinor;
    attr.dapl_version_major = DAT_VERSION_MAJOR;
    attr.dapl_version_minor = DAT_VERSION_MINOR;
    attr.lmr_mem_types_supported = static_cast<DAT_MEM_TYPE>(DAT_MEM_TYPE_VIRTUAL | DAT_MEM_TYPE_LMR);
    attr.iov_ownership_on_return = DAT_IOV_CONSUMER;
    attr.dat_qos_supported = DAT_QOS_BEST_EFFORT;
    attr.completion_flags_supported = DAT_COMPLETION_DEFAULT_FLAG;
    attr.is_thread_safe = DAT_FALSE;
    attr.max_private_data_size = 256;
    attr.supports_multipath = DAT_FALSE;
    attr.ep_creator = DAT_PSP_CREATES_EP_NEVER;
    attr.pz_support = DAT_PZ_UNIQUE;
    attr.optimal_buffer_alignment = DAT_OPTIMAL_ALIGNMENT;
    for (int i = 0; i < 6; ++i) // only the software and async streams exist so far
        const_cast<DAT_BOOLEAN&>(attr.evd_stream_merging_supported[i][i]) = DAT_TRUE;
    attr.srq_supported = DAT_FALSE;
    attr.srq_watermarks_supported = 0;
    attr.srq_ep_pz_difference_supported = DAT_FALSE;
    attr.srq_info_supported = 0;
    attr.ep_recv_info_supported = 0;
    attr.lmr_sync_req = DAT_FALSE;
    attr.dto_async_return_guaranteed = DAT_FALSE;
    attr.rdma_write_for_rdma_read_req = DAT_FALSE;
    attr.rdma_read_lmr_rmr_context_exposure = DAT_FALSE;
    attr.rmr_scope_supported = DAT_RMR_SCOPE_PZ;
    attr.is_signal_safe = DAT_FALSE;
    attr.ha_supported = DAT_FALSE;
    attr.ha_loadbalancing = DAT_HA_LB_NONE;
    std::memcpy(static_cast<void*>(p), &attr, sizeof attr);
}

DAT_RETURN ia_query(DAT_IA_HANDLE handle, DAT_EVD_HANDLE* async_evd, DAT_IA_ATTR_MASK ia_mask, DAT_IA_ATTR* ia_attr,
                    DAT_PROVIDER_ATTR_MASK provider_mask, DAT_PROVIDER_ATTR* provider_attr)
{
    Ia* ia = from_handle<Ia>(handle);
    if (!ia)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA);
    if ((ia_mask && !ia_attr) || (provider_mask && !provider_attr))
        return error(DAT_INVALID_PARAMETER, ia_mask && !ia_attr ? DAT_INVALID_ARG4 : DAT_INVALID_ARG6);
    if (async_evd)
        *async_evd = ia->async_evd ? static_cast<DAT_EVD_HANDLE>(ia->async_evd) : DAT_EVD_OUT_OF_SCOPE;
    if (ia_mask)
        fill_ia_attr(ia, ia_attr);
    if (provider_mask)
        fill_provider_attr(provider_attr);
    return DAT_SUCCESS;
}

// --- generic handle calls --------------------------------------------------------

DAT_RETURN set_consumer_context(DAT_HANDLE h, DAT_CONTEXT context)
{
    Object* o = any_object(h);
    if (!o)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE1);
    o->context = context;
    return DAT_SUCCESS;
}

DAT_RETURN get_consumer_context(DAT_HANDLE h, DAT_CONTEXT* context)
{
    Object* o = any_object(h);
    if (!o)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE1);
    if (!context)
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    *context = o->context;
    return DAT_SUCCESS;
}

DAT_RETURN get_handle_type(DAT_HANDLE h, DAT_HANDLE_TYPE* type)
{
    Object* o = any_object(h);
    if (!o)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE1);
    if (!type)
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    *type = o->type;
    return DAT_SUCCESS;
}

// --- PZ ---------------------------------------------------------------------------

DAT_RETURN pz_create(DAT_IA_HANDLE handle, DAT_PZ_HANDLE* out)
{
    Ia* ia = from_handle<Ia>(handle);
    if (!ia)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA);
    if (!out)
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    Pz* pz = make_object<Pz>();
    if (!pz)
        return error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
    pz->provider = ia->provider;
    pz->ia = ia;
    pz->pd = ia->device->alloc_pd();
    ia->adopt(pz);
    *out = pz;
    return DAT_SUCCESS;
}

DAT_RETURN pz_query(DAT_PZ_HANDLE handle, DAT_PZ_PARAM_MASK mask, DAT_PZ_PARAM* param)
{
    Pz* pz = from_handle<Pz>(handle);
    if (!pz)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_PZ);
    if (mask & ~DAT_PZ_FIELD_ALL)
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    if (mask && !param)
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    if (mask & DAT_PZ_FIELD_IA_HANDLE)
        param->ia_handle = pz->ia;
    return DAT_SUCCESS;
}

DAT_RETURN pz_free(DAT_PZ_HANDLE handle)
{
    Pz* pz = from_handle<Pz>(handle);
    if (!pz)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_PZ);
    if (pz->users.load() > 0)
        return error(DAT_INVALID_STATE, DAT_INVALID_STATE_PZ_IN_USE);
    pz->ia->forget(pz);
    destroy_object(pz);
    return DAT_SUCCESS;
}

// --- LMR --------------------------------------------------------------------------

std::uint32_t softnic_access(DAT_MEM_PRIV_FLAGS p)
{
    std::uint32_t a = 0;
    if (p & DAT_MEM_PRIV_LOCAL_READ_FLAG)
        a |= softnic::kLocalRead;
    if (p & DAT_MEM_PRIV_LOCAL_WRITE_FLAG)
        a |= softnic::kLocalWrite;
    if (p & DAT_MEM_PRIV_REMOTE_READ_FLAG)
        a |= softnic::kRemoteRead;
    if (p & DAT_MEM_PRIV_REMOTE_WRITE_FLAG)
        a |= softnic::kRemoteWrite;
    return a;
}

DAT_RETURN lmr_create(DAT_IA_HANDLE handle, DAT_MEM_TYPE type, DAT_REGION_DESCRIPTION region, DAT_VLEN length,
                      DAT_PZ_HANDLE pz_handle, DAT_MEM_PRIV_FLAGS privileges, DAT_VA_TYPE va_type,
                      DAT_LMR_HANDLE* lmr_out, DAT_LMR_CONTEXT* lmr_context, DAT_RMR_CONTEXT* rmr_context,
                      DAT_VLEN* registered_length, DAT_VADDR* registered_address)
{
    Ia* ia = from_handle<Ia>(handle);
    if (!ia)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA);
    Pz* pz = from_handle<Pz>(pz_handle);
    if (!pz || pz->ia != ia)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_PZ);
    if (!lmr_out)
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG8);
    if (privileges & ~DAT_MEM_PRIV_ALL_FLAG)
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG6);
    if (va_type == DAT_VA_TYPE_ZB)
        return error(DAT_MODEL_NOT_SUPPORTED); // zb_supported is FALSE
    if (va_type != DAT_VA_TYPE_VA)
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG7);
    std::uint64_t addr = 0;
    Lmr* base = nullptr;
    switch (type) {
    case DAT_MEM_TYPE_VIRTUAL:
        if (!region.for_va || length == 0)
            return error(DAT_INVALID_PARAMETER, region.for_va ? DAT_INVALID_ARG4 : DAT_INVALID_ARG3);
        addr = reinterpret_cast<std::uintptr_t>(region.for_va);
        if (addr + length < addr)
            return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG4);
        break;
    case DAT_MEM_TYPE_LMR:
        // Re-registration of an existing LMR's memory, possibly in another PZ.
        base = from_handle<Lmr>(region.for_lmr_handle);
        if (!base || base->ia != ia)
            return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
        addr = reinterpret_cast<std::uintptr_t>(base->region.for_va);
        length = base->length;
        break;
    case DAT_MEM_TYPE_SHARED_VIRTUAL:
        return error(DAT_MODEL_NOT_SUPPORTED);
    default:
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    }
    Lmr* lmr = make_object<Lmr>();
    if (!lmr)
        return error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
    lmr->provider = ia->provider;
    lmr->ia = ia;
    lmr->pz = pz;
    lmr->mem_type = type;
    lmr->region.for_va = reinterpret_cast<DAT_PVOID>(addr);
    lmr->length = length;
    lmr->privileges = privileges;
    lmr->va_type = va_type;
    lmr->remote = (privileges & (DAT_MEM_PRIV_REMOTE_READ_FLAG | DAT_MEM_PRIV_REMOTE_WRITE_FLAG)) != 0;
    lmr->key = ia->device->memory().add(addr, length, softnic_access(privileges), pz->pd);
    if (lmr->key == 0) {
        destroy_object(lmr);
        return error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY_REGION);
    }
    if (base) {
        lmr->region.for_lmr_handle = base;
        ++base->users;
    }
    ++pz->users;
    ia->adopt(lmr);
    *lmr_out = lmr;
    if (lmr_context)
        *lmr_context = lmr->key;
    if (rmr_context)
        *rmr_context = lmr->remote ? lmr->key : 0; // no remote rights, no remote key
    if (registered_length)
        *registered_length = length;
    if (registered_address)
        *registered_address = addr;
    return DAT_SUCCESS;
}

DAT_RETURN lmr_query(DAT_LMR_HANDLE handle, DAT_LMR_PARAM_MASK mask, DAT_LMR_PARAM* param)
{
    Lmr* lmr = from_handle<Lmr>(handle);
    if (!lmr)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_LMR);
    if (mask & ~DAT_LMR_FIELD_ALL)
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    if (mask && !param)
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    if (!mask)
        return DAT_SUCCESS;
    param->ia_handle = lmr->ia;
    param->mem_type = lmr->mem_type;
    param->region_desc = lmr->region;
    param->length = lmr->length;
    param->pz_handle = lmr->pz;
    param->mem_priv = lmr->privileges;
    param->va_type = lmr->va_type;
    param->lmr_context = lmr->key;
    param->rmr_context = lmr->remote ? lmr->key : 0;
    param->registered_size = lmr->length;
    param->registered_address = lmr->mem_type == DAT_MEM_TYPE_LMR
                                    ? reinterpret_cast<std::uintptr_t>(static_cast<Lmr*>(lmr->region.for_lmr_handle)->region.for_va)
                                    : reinterpret_cast<std::uintptr_t>(lmr->region.for_va);
    return DAT_SUCCESS;
}

DAT_RETURN lmr_free(DAT_LMR_HANDLE handle)
{
    Lmr* lmr = from_handle<Lmr>(handle);
    if (!lmr)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_LMR);
    if (lmr->users.load() > 0)
        return error(DAT_INVALID_STATE, DAT_INVALID_STATE_LMR_IN_USE);
    lmr->ia->device->memory().remove(lmr->key);
    if (lmr->mem_type == DAT_MEM_TYPE_LMR)
        --static_cast<Lmr*>(lmr->region.for_lmr_handle)->users;
    --lmr->pz->users;
    lmr->ia->forget(lmr);
    destroy_object(lmr);
    return DAT_SUCCESS;
}

DAT_RETURN lmr_sync(DAT_IA_HANDLE handle, const DAT_LMR_TRIPLET* segments, DAT_VLEN count)
{
    // Memory is coherent for the softnic: nothing to do once the arguments check out.
    if (!from_handle<Ia>(handle))
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA);
    if (!segments || count == 0)
        return error(DAT_INVALID_PARAMETER, segments ? DAT_INVALID_ARG3 : DAT_INVALID_ARG2);
    return DAT_SUCCESS;
}

// --- EVD ----------------------------------------------------------------------------

constexpr DAT_EVD_FLAGS kStreamsDeliveredSoFar = static_cast<DAT_EVD_FLAGS>(DAT_EVD_SOFTWARE_FLAG | DAT_EVD_ASYNC_FLAG);

DAT_RETURN evd_create(DAT_IA_HANDLE handle, DAT_COUNT qlen, DAT_CNO_HANDLE cno, DAT_EVD_FLAGS flags, DAT_EVD_HANDLE* out)
{
    Ia* ia = from_handle<Ia>(handle);
    if (!ia)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA);
    if (qlen <= 0 || qlen > kMaxEvdQlen)
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    if (!out)
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG5);
    if (flags == 0 || (flags & ~(DAT_EVD_SOFTWARE_FLAG | DAT_EVD_DEFAULT_FLAG | DAT_EVD_ASYNC_FLAG)))
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG4);
    if (flags & ~kStreamsDeliveredSoFar)
        return not_supported(); // DTO, connection, CR and RMR streams come with the EP work
    if (cno != DAT_HANDLE_NULL)
        return not_supported(); // CNOs: not yet
    Evd* evd = new_evd(ia, qlen, flags);
    if (!evd)
        return error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
    ia->adopt(evd);
    *out = evd;
    return DAT_SUCCESS;
}

DAT_RETURN evd_query(DAT_EVD_HANDLE handle, DAT_EVD_PARAM_MASK mask, DAT_EVD_PARAM* param)
{
    Evd* evd = from_handle<Evd>(handle);
    if (!evd)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_REQUEST);
    if (mask & ~DAT_EVD_FIELD_ALL)
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    if (mask && !param)
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    if (!mask)
        return DAT_SUCCESS;
    std::lock_guard lock(evd->mutex);
    param->ia_handle = evd->ia;
    param->evd_qlen = evd->qlen;
    param->evd_state = static_cast<DAT_EVD_STATE>((evd->enabled ? DAT_EVD_STATE_ENABLED : DAT_EVD_STATE_DISABLED) |
                                                  (evd->waitable ? DAT_EVD_STATE_WAITABLE : DAT_EVD_STATE_UNWAITABLE) |
                                                  DAT_EVD_STATE_CONFIG_THRESHOLD);
    param->cno_handle = DAT_HANDLE_NULL;
    param->evd_flags = evd->flags;
    return DAT_SUCCESS;
}

DAT_RETURN evd_free(DAT_EVD_HANDLE handle)
{
    Evd* evd = from_handle<Evd>(handle);
    if (!evd)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_REQUEST);
    {
        std::lock_guard lock(evd->mutex);
        if (evd->waiters > 0)
            return error(DAT_INVALID_STATE, DAT_INVALID_STATE_EVD_WAITER);
    }
    if (evd->is_async && evd->ia->async_evd == evd)
        return error(DAT_INVALID_STATE, DAT_INVALID_STATE_EVD_ASYNC); // freed with its IA
    evd->ia->forget(evd);
    destroy_object(evd);
    return DAT_SUCCESS;
}

DAT_RETURN evd_post_se(DAT_EVD_HANDLE handle, const DAT_EVENT* event)
{
    Evd* evd = from_handle<Evd>(handle);
    if (!evd)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_REQUEST);
    if (!event || event->event_number != DAT_SOFTWARE_EVENT)
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    if (!(evd->flags & DAT_EVD_SOFTWARE_FLAG))
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG1);
    DAT_EVENT e = *event;
    e.evd_handle = evd;
    if (!post_event(evd, e))
        return error(DAT_QUEUE_FULL);
    return DAT_SUCCESS;
}

DAT_RETURN evd_dequeue(DAT_EVD_HANDLE handle, DAT_EVENT* event)
{
    Evd* evd = from_handle<Evd>(handle);
    if (!evd)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_REQUEST);
    if (!event)
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    std::lock_guard lock(evd->mutex);
    if (evd->waiters > 0)
        return error(DAT_INVALID_STATE, DAT_INVALID_STATE_EVD_WAITER);
    if (evd->events.empty())
        return error(DAT_QUEUE_EMPTY);
    *event = evd->events.front();
    evd->events.pop_front();
    return DAT_SUCCESS;
}

DAT_RETURN evd_wait(DAT_EVD_HANDLE handle, DAT_TIMEOUT timeout, DAT_COUNT threshold, DAT_EVENT* event, DAT_COUNT* nmore)
{
    Evd* evd = from_handle<Evd>(handle);
    if (!evd)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_REQUEST);
    if (threshold <= 0 || threshold > evd->qlen)
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    if (!event)
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG4);
    std::unique_lock lock(evd->mutex);
    if (!evd->waitable)
        return error(DAT_INVALID_STATE, DAT_INVALID_STATE_EVD_UNWAITABLE);
    if (evd->waiters > 0)
        return error(DAT_INVALID_STATE, DAT_INVALID_STATE_EVD_WAITER);
    ++evd->waiters;
    const std::uint64_t epoch = evd->unwaitable_epoch;
    auto ready = [&] {
        return static_cast<DAT_COUNT>(evd->events.size()) >= threshold || evd->unwaitable_epoch != epoch;
    };
    bool ok = true;
    if (timeout == DAT_TIMEOUT_INFINITE)
        evd->cv.wait(lock, ready); // sleeps: no core burnt
    else
        ok = evd->cv.wait_for(lock, std::chrono::microseconds(timeout), ready);
    --evd->waiters;
    if (evd->aborted)
        return error(DAT_ABORT);
    if (evd->unwaitable_epoch != epoch)
        return error(DAT_INVALID_STATE, DAT_INVALID_STATE_EVD_UNWAITABLE);
    if (!ok && evd->events.empty()) {
        if (nmore)
            *nmore = 0;
        return error(DAT_TIMEOUT_EXPIRED);
    }
    if (!ok && static_cast<DAT_COUNT>(evd->events.size()) < threshold) {
        if (nmore)
            *nmore = static_cast<DAT_COUNT>(evd->events.size());
        return error(DAT_TIMEOUT_EXPIRED);
    }
    *event = evd->events.front();
    evd->events.pop_front();
    if (nmore)
        *nmore = static_cast<DAT_COUNT>(evd->events.size());
    return DAT_SUCCESS;
}

DAT_RETURN evd_set_enabled(DAT_EVD_HANDLE handle, bool enabled)
{
    Evd* evd = from_handle<Evd>(handle);
    if (!evd)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_REQUEST);
    std::lock_guard lock(evd->mutex);
    evd->enabled = enabled;
    return DAT_SUCCESS;
}

DAT_RETURN evd_enable(DAT_EVD_HANDLE h) { return evd_set_enabled(h, true); }
DAT_RETURN evd_disable(DAT_EVD_HANDLE h) { return evd_set_enabled(h, false); }

DAT_RETURN evd_set_unwaitable(DAT_EVD_HANDLE handle)
{
    Evd* evd = from_handle<Evd>(handle);
    if (!evd)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_REQUEST);
    std::lock_guard lock(evd->mutex);
    evd->waitable = false;
    ++evd->unwaitable_epoch; // releases a blocked waiter with INVALID_STATE
    evd->cv.notify_all();
    return DAT_SUCCESS;
}

DAT_RETURN evd_clear_unwaitable(DAT_EVD_HANDLE handle)
{
    Evd* evd = from_handle<Evd>(handle);
    if (!evd)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_REQUEST);
    std::lock_guard lock(evd->mutex);
    evd->waitable = true;
    return DAT_SUCCESS;
}

DAT_RETURN evd_resize(DAT_EVD_HANDLE handle, DAT_COUNT qlen)
{
    Evd* evd = from_handle<Evd>(handle);
    if (!evd)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_REQUEST);
    if (qlen <= 0 || qlen > kMaxEvdQlen)
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    std::lock_guard lock(evd->mutex);
    if (qlen < static_cast<DAT_COUNT>(evd->events.size()))
        return error(DAT_INVALID_STATE);
    evd->qlen = qlen; // the queue itself grows on demand: nothing is lost
    return DAT_SUCCESS;
}

// --- the table ------------------------------------------------------------------------

// Entry points of later work: a typed stub per DAT_PROVIDER slot that
// answers DAT_MODEL_NOT_SUPPORTED (class bit set).
template <typename F>
struct Unsupported;
template <typename... A>
struct Unsupported<DAT_RETURN (*)(A...)> {
    static DAT_RETURN call(A...) { return not_supported(); }
};
#define FASTDAPL_LATER(member) t.member = &Unsupported<decltype(DAT_PROVIDER::member)>::call

void fill_table(DAT_PROVIDER& t, const char* device_name)
{
    t.device_name = device_name;
    t.extension = nullptr;
    t.ia_open_func = &ia_open;
    t.ia_query_func = &ia_query;
    t.ia_close_func = &ia_close;
    t.set_consumer_context_func = &set_consumer_context;
    t.get_consumer_context_func = &get_consumer_context;
    t.get_handle_type_func = &get_handle_type;
    t.pz_create_func = &pz_create;
    t.pz_query_func = &pz_query;
    t.pz_free_func = &pz_free;
    t.lmr_create_func = &lmr_create;
    t.lmr_query_func = &lmr_query;
    t.lmr_free_func = &lmr_free;
    t.lmr_sync_rdma_read_func = &lmr_sync;
    t.lmr_sync_rdma_write_func = &lmr_sync;
    t.evd_create_func = &evd_create;
    t.evd_query_func = &evd_query;
    t.evd_free_func = &evd_free;
    t.evd_post_se_func = &evd_post_se;
    t.evd_dequeue_func = &evd_dequeue;
    t.evd_wait_func = &evd_wait;
    t.evd_enable_func = &evd_enable;
    t.evd_disable_func = &evd_disable;
    t.evd_set_unwaitable_func = &evd_set_unwaitable;
    t.evd_clear_unwaitable_func = &evd_clear_unwaitable;
    t.evd_resize_func = &evd_resize;
    // Issue 3 (EP, connections, DTOs, CNO) and issue 4 (SRQ) fill these.
    FASTDAPL_LATER(cno_create_func);
    FASTDAPL_LATER(cno_modify_agent_func);
    FASTDAPL_LATER(cno_query_func);
    FASTDAPL_LATER(cno_free_func);
    FASTDAPL_LATER(cno_wait_func);
    FASTDAPL_LATER(cr_query_func);
    FASTDAPL_LATER(cr_accept_func);
    FASTDAPL_LATER(cr_reject_func);
    FASTDAPL_LATER(cr_handoff_func);
    FASTDAPL_LATER(evd_modify_cno_func);
    FASTDAPL_LATER(ep_create_func);
    FASTDAPL_LATER(ep_query_func);
    FASTDAPL_LATER(ep_modify_func);
    FASTDAPL_LATER(ep_connect_func);
    FASTDAPL_LATER(ep_dup_connect_func);
    FASTDAPL_LATER(ep_disconnect_func);
    FASTDAPL_LATER(ep_post_send_func);
    FASTDAPL_LATER(ep_post_recv_func);
    FASTDAPL_LATER(ep_post_rdma_read_func);
    FASTDAPL_LATER(ep_post_rdma_write_func);
    FASTDAPL_LATER(ep_get_status_func);
    FASTDAPL_LATER(ep_free_func);
    FASTDAPL_LATER(rmr_create_func);
    FASTDAPL_LATER(rmr_query_func);
    FASTDAPL_LATER(rmr_bind_func);
    FASTDAPL_LATER(rmr_free_func);
    FASTDAPL_LATER(psp_create_func);
    FASTDAPL_LATER(psp_query_func);
    FASTDAPL_LATER(psp_free_func);
    FASTDAPL_LATER(rsp_create_func);
    FASTDAPL_LATER(rsp_query_func);
    FASTDAPL_LATER(rsp_free_func);
    FASTDAPL_LATER(psp_create_any_func);
    FASTDAPL_LATER(ep_reset_func);
    FASTDAPL_LATER(ep_create_with_srq_func);
    FASTDAPL_LATER(ep_recv_query_func);
    FASTDAPL_LATER(ep_set_watermark_func);
    FASTDAPL_LATER(srq_create_func);
    FASTDAPL_LATER(srq_free_func);
    FASTDAPL_LATER(srq_post_recv_func);
    FASTDAPL_LATER(srq_query_func);
    FASTDAPL_LATER(srq_resize_func);
    FASTDAPL_LATER(srq_set_lw_func);
    FASTDAPL_LATER(csp_create_func);
    FASTDAPL_LATER(csp_query_func);
    FASTDAPL_LATER(csp_free_func);
    FASTDAPL_LATER(ep_common_connect_func);
    FASTDAPL_LATER(rmr_create_for_ep_func);
    FASTDAPL_LATER(ep_post_send_with_invalidate_func);
    FASTDAPL_LATER(ep_post_rdma_read_to_rmr_func);
    FASTDAPL_LATER(cno_fd_create_func);
    FASTDAPL_LATER(cno_trigger_func);
    FASTDAPL_LATER(ia_ha_related_func);
    t.handle_extendedop_func = [](DAT_HANDLE, DAT_EXTENDED_OP, va_list) { return not_supported(); };
}

#undef FASTDAPL_LATER

} // namespace

extern "C" FASTDAPL_EXPORT void dat_provider_init(const DAT_PROVIDER_INFO* info, const char* instance_data)
{
    if (!info)
        return;
    auto reg = std::make_unique<Registration>();
    reg->info = *info;
    reg->name.assign(info->ia_name, strnlen(info->ia_name, DAT_NAME_MAX_LENGTH));
    reg->ia_params = instance_data ? instance_data : "";
    fill_table(reg->table, reg->name.c_str());
    Registration* raw = reg.get();
    {
        std::lock_guard lock(g_registrations_mutex);
        if (g_registrations.count(reg->name))
            return;
        g_registrations[reg->name] = std::move(reg);
    }
    if (dat_registry_add_provider(&raw->table, &raw->info) != DAT_SUCCESS) {
        std::lock_guard lock(g_registrations_mutex);
        g_registrations.erase(raw->name); // leave no entry behind on failure
    }
}

extern "C" FASTDAPL_EXPORT void dat_provider_fini(const DAT_PROVIDER_INFO* info)
{
    if (!info)
        return;
    std::lock_guard lock(g_registrations_mutex);
    auto it = g_registrations.find(std::string(info->ia_name, strnlen(info->ia_name, DAT_NAME_MAX_LENGTH)));
    if (it == g_registrations.end())
        return;
    // Our registry stops routing to a table once it is removed (it checks
    // every handle's table against the registered ones), so it can go.
    dat_registry_remove_provider(&it->second->table, &it->second->info);
    g_registrations.erase(it);
}
