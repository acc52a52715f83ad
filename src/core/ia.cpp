// The interface adapter: open (the device path is chosen here), query,
// and close (abrupt: a cascade over every object of the IA).
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#include "ia.hpp"

#include "api.hpp"
#include "cno.hpp"
#include "ep.hpp"
#include "evd.hpp"
#include "lmr.hpp"
#include "rmr.hpp"
#include "pz.hpp"
#include "service_point.hpp"
#include "srq.hpp"

#include <dat2/fastdapl.h>

#include <dlfcn.h>

#include <algorithm>
#include <cstdio>

namespace fastdapl::core {

namespace {

constexpr std::uint32_t kProviderMajor = 0;
constexpr std::uint32_t kProviderMinor = 1;

// The file this provider was loaded from, for FASTDAPL_LIBRARY: with two
// registries and dat.conf lines naming libraries by path or by soname, an
// admin needs to see which file a program actually runs.
std::string provider_library()
{
    Dl_info info{};
    if (dladdr(reinterpret_cast<const void*>(&provider_library), &info) == 0 || !info.dli_fname)
        return "(unknown)";
    return info.dli_fname;
}

// FASTDAPL_DEBUG: one line on stderr at the first open of each IA name,
// saying which library, IA and data path the program runs on.
void say_provider_in_use(const std::string& name, const std::vector<std::pair<std::string, std::string>>& specific)
{
    static std::mutex mutex;
    static std::vector<std::string> said;
    std::lock_guard lock(mutex);
    if (std::find(said.begin(), said.end(), name) != said.end())
        return;
    said.push_back(name);
    std::string library = "(unknown)", data_path = "(unknown)";
    for (const auto& [k, v] : specific) {
        if (k == "FASTDAPL_LIBRARY")
            library = v;
        else if (k == "FASTDAPL_DATA_PATH")
            data_path = v;
    }
    std::fprintf(stderr, "fastdapl: IA %s: library %s, data path %s\n", name.c_str(), library.c_str(),
                 data_path.c_str());
}

} // namespace

// The IA handle a consumer holds: the registry that hosts us gave it out, and
// only it knows the mapping. Debian's registry hands out small indexes and
// takes nothing else, so the first time it is asked for, the index that
// dats_get_ia_handle maps to this IA is looked for; our registry takes the
// provider's own pointer as well, which is the answer when none is found.
using GetIaHandle = DAT_RETURN (*)(DAT_IA_HANDLE, DAT_IA_HANDLE*);

DAT_IA_HANDLE consumer_handle(Ia* ia)
{
    if (DAT_IA_HANDLE known = ia->consumer_handle.load(std::memory_order_acquire))
        return known;
    static const auto get = reinterpret_cast<GetIaHandle>(dlsym(RTLD_DEFAULT, "dats_get_ia_handle"));
    DAT_IA_HANDLE found = ia;
    constexpr std::uintptr_t kIndexesTried = 4096;
    for (std::uintptr_t i = 1; get && i < kIndexesTried; ++i) {
        DAT_IA_HANDLE real = nullptr;
        if (get(reinterpret_cast<DAT_IA_HANDLE>(i), &real) == DAT_SUCCESS && real == ia) {
            found = reinterpret_cast<DAT_IA_HANDLE>(i);
            break;
        }
    }
    ia->consumer_handle.store(found, std::memory_order_release);
    return found;
}

DAT_COUNT max_private_data(const Ia* ia)
{
    return ia->cm->max_private_data();
}

DAT_RETURN ia_open(const std::string& ia_params, const DAT_PROVIDER* table, const DAT_NAME_PTR name,
                   DAT_COUNT async_qlen, DAT_EVD_HANDLE* async_evd, DAT_IA_HANDLE* ia_out)
{
    if (!name || !async_evd || !ia_out)
        return error(DAT_INVALID_PARAMETER, !name        ? DAT_INVALID_ARG1
                                            : !async_evd ? DAT_INVALID_ARG3
                                                         : DAT_INVALID_ARG4);
    Evd* shared = nullptr;
    if (*async_evd != DAT_HANDLE_NULL && *async_evd != DAT_EVD_ASYNC_EXISTS) {
        shared = from_handle<Evd>(*async_evd);
        if (!shared || !(shared->flags & DAT_EVD_ASYNC_FLAG))
            return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_ASYNC);
    } else if (*async_evd == DAT_HANDLE_NULL && (async_qlen <= 0 || async_qlen > kMaxEvdQlen)) {
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    }
    // The device kind is chosen here, once, by the IA's ia_params.
    sockaddr_storage addr{};
    std::unique_ptr<DevicePath> device;
    std::vector<std::pair<std::string, std::string>> specific;
    if (DAT_RETURN rc = open_device_path(ia_params, device, addr, specific); rc != DAT_SUCCESS)
        return rc;
    Ia* ia = make_object<Ia>();
    if (!ia)
        return error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
    ia->provider = table;
    ia->ia = ia;
    ia->name = name;
    ia->address = addr;
    ia->device = std::move(device);
    ia->specific = std::move(specific);
    // Every IA reads remote memory; consumers written for the reference
    // (its dtest) look for this name before they post RDMA reads.
    ia->specific.emplace_back("DAT_IB_RDMA_READ", "TRUE");
    ia->specific.emplace_back("FASTDAPL_LIBRARY", provider_library());
    for (const auto& [k, v] : ia->specific)
        ia->specific_attrs.push_back({k.c_str(), v.c_str()});
    ia->cm = ia->device->make_connections(*ia);
    if (*async_evd == DAT_HANDLE_NULL) {
        // At least kMinAsyncQlen: every SRQ endpoint's disconnect reports
        // there, and consumers size it for errors only (dtestsrq asks 8 for
        // 100 connections). The spec lets the provider give more.
        ia->async_evd = new_evd(ia, std::max(async_qlen, kMinAsyncQlen), DAT_EVD_ASYNC_FLAG);
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
    if (g_debug)
        say_provider_in_use(ia->name, ia->specific);
    *ia_out = ia;
    return DAT_SUCCESS;
}

namespace {

void destroy_any(Object* o)
{
    switch (o->type) {
    case DAT_HANDLE_TYPE_LMR:
        destroy_lmr(static_cast<Lmr*>(o));
        break;
    case DAT_HANDLE_TYPE_RMR:
        destroy_rmr(static_cast<Rmr*>(o));
        break;
    case DAT_HANDLE_TYPE_PZ:
        destroy_pz(static_cast<Pz*>(o));
        break;
    case DAT_HANDLE_TYPE_EVD:
        destroy_evd(static_cast<Evd*>(o));
        break;
    case DAT_HANDLE_TYPE_EP:
        destroy_ep(static_cast<Ep*>(o));
        break;
    case DAT_HANDLE_TYPE_PSP:
        destroy_psp(static_cast<Psp*>(o));
        break;
    case DAT_HANDLE_TYPE_RSP:
        destroy_psp(static_cast<Rsp*>(o));
        break;
    case DAT_HANDLE_TYPE_CSP:
        destroy_psp(static_cast<Csp*>(o));
        break;
    case DAT_HANDLE_TYPE_SRQ:
        destroy_srq(static_cast<Srq*>(o));
        break;
    case DAT_HANDLE_TYPE_CNO: {
        auto* cno = static_cast<Cno*>(o);
        release_cno_waiters(cno);
        destroy_cno(cno);
        break;
    }
    default:
        break;
    }
}

} // namespace

DAT_RETURN ia_close(DAT_IA_HANDLE handle, DAT_CLOSE_FLAGS flags)
{
    Ia* ia = from_handle<Ia>(handle);
    if (!ia)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA);
    if (raw(flags) != DAT_CLOSE_ABRUPT_FLAG && raw(flags) != DAT_CLOSE_GRACEFUL_FLAG)
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
    // Connections first (EPs and PSPs, which use the CM), then the rest.
    for (auto it = objects.rbegin(); it != objects.rend(); ++it)
        if ((*it)->type == DAT_HANDLE_TYPE_EP || (*it)->type == DAT_HANDLE_TYPE_PSP ||
            (*it)->type == DAT_HANDLE_TYPE_RSP)
            destroy_any(*it);
    // The CM's thread may be in a callback until the CM is destroyed: one
    // that has cm_mutex finishes first, later ones find no CM and return.
    std::unique_ptr<ConnectionManager> cm;
    {
        std::lock_guard lock(ia->cm_mutex);
        cm = std::move(ia->cm);
    }
    cm.reset(); // no callback runs after this
    // Requests the consumer never answered: their CRs go with the IA.
    for (Object* cr : ia->requests)
        destroy_object(static_cast<Cr*>(cr));
    ia->requests.clear();
    for (auto it = objects.rbegin(); it != objects.rend(); ++it)
        if ((*it)->magic == kObjectMagic && (*it)->type != DAT_HANDLE_TYPE_CNO)
            destroy_any(*it);
    for (auto it = objects.rbegin(); it != objects.rend(); ++it) // last: EVDs may still have named them
        if ((*it)->magic == kObjectMagic)
            destroy_any(*it);
    ia->children = 0;
    ia->device.reset();
    destroy_object(ia);
    return DAT_SUCCESS;
}

// No connection of this provider moves from one IA to another (there is no
// failover), so an IA is related for high availability only to itself.
DAT_RETURN ia_ha_related(DAT_IA_HANDLE handle, const DAT_NAME_PTR other, DAT_BOOLEAN* related)
{
    Ia* ia = from_handle<Ia>(handle);
    if (!ia)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA);
    if (!other || !related)
        return error(DAT_INVALID_PARAMETER, !other ? DAT_INVALID_ARG2 : DAT_INVALID_ARG3);
    *related = ia->name == other ? DAT_TRUE : DAT_FALSE;
    return DAT_SUCCESS;
}

void fill_ia_attr(Ia* ia, DAT_IA_ATTR* a)
{
    std::memset(a, 0, sizeof *a);
    std::snprintf(a->adapter_name, sizeof a->adapter_name, "softnic-tcp"); // a verbs IA names its device, a shm IA says so (limit_ia_attr)
    std::snprintf(a->vendor_name, sizeof a->vendor_name, "fastdapl");
    a->hardware_version_major = kProviderMajor;
    a->hardware_version_minor = kProviderMinor;
    a->ia_address_ptr = reinterpret_cast<DAT_IA_ADDRESS_PTR>(&ia->address);
    a->max_eps = 1 << 16;
    a->max_dto_per_ep = kMaxDtosPerEp;
    a->max_rdma_read_per_ep_in = kMaxRdmaReadPerEp;
    a->max_rdma_read_per_ep_out = kMaxRdmaReadPerEp;
    a->max_evds = 1 << 16;
    a->max_evd_qlen = kMaxEvdQlen;
    a->max_iov_segments_per_dto = kMaxSge;
    a->max_lmrs = 1 << 24;
    a->max_lmr_block_size = 0xffffffffu;
    a->max_lmr_virtual_address = ~DAT_VADDR{0};
    a->max_pzs = 1 << 16;
    a->max_message_size = kMaxMessageSize;
    a->max_rdma_size = kMaxMessageSize;
    a->max_rmrs = ia->device->max_rmrs(); // 0 where the device binds no windows
    a->max_rmr_target_address = a->max_rmrs ? ~DAT_VADDR{0} : 0;
    a->max_srqs = 1 << 16;
    a->max_ep_per_srq = kMaxEpPerSrq;
    a->max_recv_per_srq = kMaxRecvPerSrq;
    a->max_iov_segments_per_rdma_read = kMaxSge;
    a->max_iov_segments_per_rdma_write = kMaxSge;
    a->max_rdma_read_in = 16;
    a->max_rdma_read_out = 16;
    a->max_rdma_read_per_ep_in_guaranteed = DAT_TRUE;
    a->max_rdma_read_per_ep_out_guaranteed = DAT_TRUE;
    a->zb_supported = DAT_TRUE; // zero-based LMRs (lmr.cpp); every kind registers at an offset address
    // The IB extensions where the device runs their requests (the softnic).
    a->extension_supported = ia->device->ib_extensions() ? DAT_EXTENSION_IB : DAT_EXTENSION_NONE;
    a->extension_version = ia->device->ib_extensions() ? DAT_IB_EXTENSION_VERSION : 0;
    ia->device->limit_ia_attr(*a);
}

namespace {

void fill_provider_attr(Ia* ia, DAT_PROVIDER_ATTR* p)
{
    // evd_stream_merging_supported is const in the ABI: build the whole struct.
    DAT_PROVIDER_ATTR attr{};
    std::snprintf(attr.provider_name, sizeof attr.provider_name, "fastdapl");
    attr.provider_version_major = kProviderMajor;
    attr.provider_version_minor = kProviderMinor;
    attr.dapl_version_major = DAT_VERSION_MAJOR;
    attr.dapl_version_minor = DAT_VERSION_MINOR;
    attr.lmr_mem_types_supported =
        static_cast<DAT_MEM_TYPE>(DAT_MEM_TYPE_VIRTUAL | DAT_MEM_TYPE_LMR | DAT_MEM_TYPE_SHARED_VIRTUAL);
    attr.iov_ownership_on_return = DAT_IOV_CONSUMER;
    // Every QoS value is taken; none changes how a connection is carried.
    attr.dat_qos_supported = static_cast<DAT_QOS>(kAllQos);
    attr.completion_flags_supported =
        static_cast<DAT_COMPLETION_FLAGS>(DAT_COMPLETION_SUPPRESS_FLAG | DAT_COMPLETION_SOLICITED_WAIT_FLAG |
                                          DAT_COMPLETION_UNSIGNALLED_FLAG | DAT_COMPLETION_BARRIER_FENCE_FLAG);
    attr.is_thread_safe = DAT_FALSE;
    attr.max_private_data_size = max_private_data(ia);
    attr.supports_multipath = DAT_FALSE;
    attr.ep_creator = DAT_PSP_CREATES_EP_IFASKED; // DAT_PSP_PROVIDER_FLAG, or an RSP without an EP
    attr.pz_support = DAT_PZ_UNIQUE;
    attr.optimal_buffer_alignment = DAT_OPTIMAL_ALIGNMENT;
    // Software, CR, DTO, connection and async streams merge freely; RMR bind
    // completions (index 4) do not exist yet.
    for (int i = 0; i < 6; ++i)
        for (int j = 0; j < 6; ++j)
            const_cast<DAT_BOOLEAN&>(attr.evd_stream_merging_supported[i][j]) =
                (i != 4 && j != 4) ? DAT_TRUE : DAT_FALSE;
    attr.srq_supported = DAT_TRUE;
    attr.srq_watermarks_supported =
        ia->device->high_watermarks()
            ? FASTDAPL_SRQ_WATERMARK_LOW | FASTDAPL_EP_WATERMARK_SOFT_HIGH | FASTDAPL_EP_WATERMARK_HARD_HIGH
            : FASTDAPL_SRQ_WATERMARK_LOW; // a verbs device's SRQ limit event
    // Softnic: receive buffers are checked against the SRQ's PZ. Verbs: the
    // device checks them against the QP's PD, so the PZs must match.
    attr.srq_ep_pz_difference_supported = ia->device->split_pz() ? DAT_TRUE : DAT_FALSE;
    attr.srq_info_supported = FASTDAPL_SRQ_INFO_AVAILABLE | FASTDAPL_SRQ_INFO_OUTSTANDING;
    attr.ep_recv_info_supported = FASTDAPL_EP_RECV_INFO_NBUFS | FASTDAPL_EP_RECV_INFO_SPAN;
    attr.lmr_sync_req = DAT_FALSE;
    attr.dto_async_return_guaranteed = DAT_FALSE;
    attr.rdma_write_for_rdma_read_req = DAT_FALSE;
    attr.rdma_read_lmr_rmr_context_exposure = DAT_FALSE;
    attr.rmr_scope_supported = DAT_RMR_SCOPE_ANY; // dat_rmr_create (PZ) and dat_rmr_create_for_ep (EP)
    attr.is_signal_safe = DAT_FALSE;
    attr.ha_supported = DAT_FALSE;
    attr.ha_loadbalancing = DAT_HA_LB_NONE;
    // Consumers written for IB providers size messages by the transport's
    // MTU when not told (the reference's dtestsrq refuses to run without
    // it). The softnic has no packets; 4096 is the largest IB/RoCE MTU.
    // Verbs IAs also name their device, port, GID and data path.
    attr.num_provider_specific_attr = static_cast<DAT_COUNT>(ia->specific_attrs.size());
    attr.provider_specific_attr = ia->specific_attrs.data();
    std::memcpy(static_cast<void*>(p), &attr, sizeof attr);
}

} // namespace

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
        fill_provider_attr(ia, provider_attr);
    return DAT_SUCCESS;
}

} // namespace fastdapl::core
