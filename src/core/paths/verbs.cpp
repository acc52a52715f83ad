// The verbs device kind: its control plane on libibverbs, its generic data
// path (ibv_post_*, ibv_poll_cq), waiting on completion channels, and the
// device's async events as DAT events.
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#include "verbs.hpp"

#include "../cno.hpp"
#include "../data_path.hpp"
#include "../lmr.hpp"
#include "../rmr.hpp"
#include "../pz.hpp"
#include "rdma_cm.hpp" // kDatagramQkey

#include <dat2/fastdapl.h>

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>

namespace fastdapl::core {

std::unique_ptr<ConnectionManager> make_rdma_connections(Ia& ia, verbs::Device& device);

namespace {

ibv_pd* pd_of(const Pz* pz)
{
    return static_cast<ibv_pd*>(pz->device_pd);
}

// A counter with one writer, bumped with a published plain store.
void bump(std::atomic<std::uint32_t>& count)
{
    count.store(count.load(std::memory_order_relaxed) + 1, std::memory_order_release);
}

std::uint32_t power_of_two_at_least(std::uint32_t n)
{
    std::uint32_t p = 1;
    while (p < n)
        p <<= 1;
    return p;
}

// A receive slot of a verbs SRQ back on its free ring (one reaper at a time).
void srq_slot_free(VerbsSrqRing& r, std::uint32_t slot)
{
    const std::uint32_t tail = r.free_tail.load(std::memory_order_relaxed);
    r.free_slots[tail % r.free_slots.size()] = slot;
    r.free_tail.store(tail + 1, std::memory_order_release);
}

// A verbs SRQ's receive slots: `count` of them, all free (a resize adds
// the new ones behind those in use; posts and reaps must not run then).
void srq_slots(VerbsSrqRing& r, std::uint32_t count)
{
    const auto old = static_cast<std::uint32_t>(r.cookies.size());
    if (count <= old)
        return;
    // The free ring keeps its order: rebuilt with the free slots first.
    const std::uint32_t head = r.free_head.load(), tail = r.free_tail.load();
    std::vector<std::uint32_t> ring;
    for (std::uint32_t i = head; i != tail; ++i)
        ring.push_back(r.free_slots[i % r.free_slots.size()]);
    for (std::uint32_t i = old; i < count; ++i)
        ring.push_back(i);
    const auto free_now = static_cast<std::uint32_t>(ring.size());
    ring.resize(count);
    r.cookies.resize(count, 0);
    r.free_slots = std::move(ring);
    r.free_head.store(0);
    r.free_tail.store(free_now);
}

// Events read from a verbs CQ's channel (the EVD's lock held): each moves a
// hand-armed (mlx5) CQ's arm sequence number on, as the device expects.
void note_cq_events(Evd* evd, unsigned events)
{
    if (evd->path != PathKind::mlx5)
        return;
    for (unsigned i = 0; i < events; ++i)
        static_cast<Mlx5Completions*>(evd->completions)->view.note_event();
}

} // namespace

DAT_DTO_COMPLETION_STATUS status_of_wc(ibv_wc_status s)
{
    switch (s) {
    case IBV_WC_SUCCESS:
        return DAT_DTO_SUCCESS;
    case IBV_WC_LOC_LEN_ERR:
        return DAT_DTO_ERR_LOCAL_LENGTH;
    case IBV_WC_LOC_QP_OP_ERR:
    case IBV_WC_LOC_EEC_OP_ERR:
        return DAT_DTO_ERR_LOCAL_EP;
    case IBV_WC_LOC_PROT_ERR:
    case IBV_WC_LOC_ACCESS_ERR:
        return DAT_DTO_ERR_LOCAL_PROTECTION;
    case IBV_WC_WR_FLUSH_ERR:
        return DAT_DTO_ERR_FLUSHED;
    case IBV_WC_BAD_RESP_ERR:
        return DAT_DTO_ERR_BAD_RESPONSE;
    case IBV_WC_REM_ACCESS_ERR:
        return DAT_DTO_ERR_REMOTE_ACCESS;
    case IBV_WC_REM_INV_REQ_ERR:
    case IBV_WC_REM_OP_ERR:
        return DAT_DTO_ERR_REMOTE_RESPONDER;
    case IBV_WC_RNR_RETRY_EXC_ERR:
        return DAT_DTO_ERR_RECEIVER_NOT_READY;
    default: // retry exceeded, remote aborted, fatal: the link failed
        return DAT_DTO_ERR_TRANSPORT;
    }
}

// --- control plane ------------------------------------------------------------------------

VerbsPath::VerbsPath(PathKind kind, std::unique_ptr<verbs::Device> device, std::string driver)
    : DevicePath(kind), device_(std::move(device)), driver_(std::move(driver)),
      ud_(device_->port_attr().link_layer == IBV_LINK_LAYER_ETHERNET)
{
}

std::uint32_t VerbsPath::max_datagram_size() const
{
    // IBV_MTU_256 is 1, each next one doubles.
    return std::min<std::uint32_t>(128u << device_->port_attr().active_mtu, kMaxUdMessageSize);
}

void* VerbsPath::make_address_handle(Ep& ep, const sockaddr_storage&, std::uint32_t, std::uint16_t, const void* route)
{
    if (!route)
        return nullptr;
    ibv_pd* pd = pd_of(ep.pz);
    ibv_ah* ah = ibv_create_ah(pd, const_cast<ibv_ah_attr*>(static_cast<const ibv_ah_attr*>(route)));
    if (!ah)
        return nullptr;
    const std::uint64_t destination = ah_destination(ah);
    std::lock_guard lock(address_handles_mutex_);
    void* handle = destination ? address_handles_.make(destination) : nullptr;
    if (!handle) {
        ibv_destroy_ah(ah);
        return nullptr;
    }
    made_ahs_[handle] = {pd, ah};
    return handle;
}

bool VerbsPath::free_address_handle(void* handle)
{
    std::lock_guard lock(address_handles_mutex_);
    if (!address_handles_.free(handle))
        return false;
    if (const auto made = made_ahs_.find(handle); made != made_ahs_.end()) { // always: both change under the lock
        ibv_destroy_ah(made->second.ah);
        made_ahs_.erase(made);
    }
    return true;
}

bool VerbsPath::ready_datagram_qp(ibv_qp* qp)
{
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_INIT;
    a.pkey_index = 0;
    a.port_num = device_->port();
    a.qkey = cm::kDatagramQkey;
    if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY) != 0)
        return false;
    a = {};
    a.qp_state = IBV_QPS_RTR;
    if (ibv_modify_qp(qp, &a, IBV_QP_STATE) != 0)
        return false;
    a = {};
    a.qp_state = IBV_QPS_RTS;
    a.sq_psn = 0;
    return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN) == 0;
}

VerbsPath::~VerbsPath() = default;

std::unique_ptr<ConnectionManager> VerbsPath::make_connections(Ia& ia)
{
    start(ia);
    return make_rdma_connections(ia, *device_);
}

void VerbsPath::limit_ia_attr(DAT_IA_ATTR& a) const
{
    const ibv_device_attr& d = device_->attr();
    std::snprintf(a.adapter_name, sizeof a.adapter_name, "%s", device_->name().c_str());
    a.hardware_version_major = static_cast<DAT_UINT32>(d.hw_ver);
    a.hardware_version_minor = 0;
    a.max_eps = d.max_qp;
    a.max_dto_per_ep = std::min(d.max_qp_wr, kMaxDtosPerEp);
    a.max_rdma_read_per_ep_in = d.max_qp_rd_atom;
    a.max_rdma_read_per_ep_out = d.max_qp_init_rd_atom;
    a.max_rdma_read_in = d.max_qp_rd_atom;
    a.max_rdma_read_out = d.max_qp_init_rd_atom;
    a.max_evd_qlen = std::min(d.max_cqe, kMaxEvdQlen);
    a.max_iov_segments_per_dto = std::min<DAT_COUNT>(d.max_sge, kMaxSge);
    a.max_iov_segments_per_rdma_read = a.max_iov_segments_per_dto;
    a.max_iov_segments_per_rdma_write = a.max_iov_segments_per_dto;
    a.max_lmrs = d.max_mr;
    a.max_lmr_block_size = d.max_mr_size;
    a.max_pzs = d.max_pd;
    a.max_message_size = device_->port_attr().max_msg_sz;
    a.max_rdma_size = device_->port_attr().max_msg_sz;
    a.max_srqs = d.max_srq;
    a.max_recv_per_srq = std::min(d.max_srq_wr, kMaxRecvPerSrq);
}

bool VerbsPath::atomics() const
{
    return device_->attr().atomic_cap != IBV_ATOMIC_NONE;
}

DAT_RETURN VerbsPath::create_pd(Pz& pz)
{
    pz.device_pd = ibv_alloc_pd(device_->context());
    return pz.device_pd ? static_cast<DAT_RETURN>(DAT_SUCCESS)
                        : error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_PROTECTION_DOMAIN);
}

void VerbsPath::destroy_pd(Pz& pz)
{
    { // address handles made on it go first (verbs refuses to free a PD in use)
        std::lock_guard lock(address_handles_mutex_);
        for (auto it = made_ahs_.begin(); it != made_ahs_.end();) {
            if (it->second.pd == pd_of(&pz) && address_handles_.free(it->first)) {
                ibv_destroy_ah(it->second.ah);
                it = made_ahs_.erase(it);
            } else {
                ++it;
            }
        }
    }
    ibv_dealloc_pd(pd_of(&pz));
}

DAT_RETURN VerbsPath::register_memory(Lmr& lmr, std::uint64_t addr, std::uint64_t length)
{
    // Windows may be bound on any region where the kind binds them.
    const int mw_bind = max_rmrs() > 0 ? IBV_ACCESS_MW_BIND : 0;
    const bool remote = lmr.privileges & (DAT_MEM_PRIV_REMOTE_READ_FLAG | DAT_MEM_PRIV_REMOTE_WRITE_FLAG);
    // Zero-based with remote rights: the local registration keeps process
    // addresses (lkeys; inline data is copied from them) and local rights,
    // a second one at iova 0 carries the remote rights (rkey).
    const bool zero_based = remote && lmr.va_type == DAT_VA_TYPE_ZB;
    // The kernel takes an iova only with the address's offset in its page
    // (ib_uverbs' rule), so 0 fits only a region that starts on a page.
    if (zero_based && addr % static_cast<std::uint64_t>(sysconf(_SC_PAGESIZE)) != 0) {
        if (g_debug)
            std::fprintf(stderr, "fastdapl: a zero-based region must start on a page boundary on verbs IAs\n");
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    }
    const DAT_MEM_PRIV_FLAGS local_rights = zero_based
        ? static_cast<DAT_MEM_PRIV_FLAGS>(lmr.privileges & (DAT_MEM_PRIV_LOCAL_READ_FLAG | DAT_MEM_PRIV_LOCAL_WRITE_FLAG))
        : lmr.privileges;
    ibv_mr* mr = ibv_reg_mr(pd_of(lmr.pz), reinterpret_cast<void*>(addr), length,
                            verbs::access_flags(static_cast<std::uint32_t>(local_rights), atomics()) | mw_bind);
    if (!mr) {
        // The kernel could not pin the range (EFAULT), or its length is
        // absurd (EINVAL): the consumer's region, as on the softnic.
        if (errno == EFAULT || errno == EINVAL)
            return error(DAT_INVALID_PARAMETER, errno == EFAULT ? DAT_INVALID_ARG3 : DAT_INVALID_ARG4);
        return error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY_REGION);
    }
    lmr.device_mr = mr;
    lmr.lmr_context = mr->lkey;
    lmr.rmr_context = remote ? mr->rkey : 0;
    if (zero_based) {
        ibv_mr* at_zero = ibv_reg_mr_iova(pd_of(lmr.pz), reinterpret_cast<void*>(addr), length, lmr.registered_address,
                                          verbs::access_flags(static_cast<std::uint32_t>(lmr.privileges), atomics()));
        if (!at_zero) {
            if (g_debug)
                std::fprintf(stderr, "fastdapl: zero-based registration refused: %s\n", std::strerror(errno));
            ibv_dereg_mr(mr);
            return error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY_REGION);
        }
        lmr.device_remote_mr = at_zero;
        lmr.rmr_context = at_zero->rkey;
    }
    return DAT_SUCCESS;
}

void VerbsPath::deregister_memory(Lmr& lmr)
{
    ibv_dereg_mr(static_cast<ibv_mr*>(lmr.device_mr));
    if (lmr.device_remote_mr)
        ibv_dereg_mr(static_cast<ibv_mr*>(lmr.device_remote_mr));
}

DAT_COUNT VerbsPath::max_rmrs() const
{
    // Soft-RoCE (rxe, as in Debian 12's kernel 6.1) binds windows but checks
    // an RDMA access through one against its whole memory region, not the
    // window: measured, a 64-byte write across the end of a 1 KiB window
    // landed past it. Windows that do not confine a peer are not offered.
    // FASTDAPL_RXE_WINDOWS=1 offers them anyway, to test the bind path there.
    static const bool rxe_anyway = [] {
        const char* v = std::getenv("FASTDAPL_RXE_WINDOWS");
        return v && std::strcmp(v, "1") == 0;
    }();
    if (driver_ == "rxe" && !rxe_anyway)
        return 0;
    return std::max(device_->attr().max_mw, 0);
}

DAT_RETURN VerbsPath::create_window(Rmr& rmr)
{
    ibv_mw* mw = ibv_alloc_mw(pd_of(rmr.pz), rmr.scope == DAT_RMR_SCOPE_EP ? IBV_MW_TYPE_2 : IBV_MW_TYPE_1);
    if (!mw)
        return errno == EOPNOTSUPP ? error(DAT_MODEL_NOT_SUPPORTED)
                                   : error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY_REGION);
    rmr.device_window = mw;
    return DAT_SUCCESS;
}

DAT_RETURN VerbsPath::bind_window(Rmr& rmr, const Lmr* lmr, const DAT_LMR_TRIPLET& range,
                                  DAT_MEM_PRIV_FLAGS privileges, Ep& ep, bool& posted)
{
    posted = false;
    auto* q = static_cast<VerbsEpQueues*>(ep.queues);
    const bool bind = range.segment_length != 0;
    // A bind of a type 2 window bound for another queue pair takes a new
    // window; one bound here is invalidated before it is bound again.
    const std::uint32_t qpn = q->qp->qp_num;
    ibv_mw* mw = window_for(rmr, qpn, bind);
    if (!mw)
        return error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY_REGION);
    const bool invalidate_first = mw->type == IBV_MW_TYPE_2 && rmr.window_qpn != 0;
    const std::uint64_t needed = invalidate_first && bind ? 2 : 1;
    const auto depth = static_cast<std::uint64_t>(q->sends.size());
    if (q->send_posted - q->send_retired + needed > depth)
        return error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEP);
    ibv_mw_bind_info info{};
    // An unbind names the region of the last bind: rxe's provider library
    // (rdma-core 44) dereferences the MR of a type 1 unbind.
    info.mr = static_cast<ibv_mr*>(rmr.device_region);
    if (bind) {
        info.mr = static_cast<ibv_mr*>(lmr->device_mr);
        info.addr = range.virtual_address;
        info.length = range.segment_length;
        info.mw_access_flags =
            verbs::access_flags(static_cast<std::uint32_t>(privileges), atomics()) & ~IBV_ACCESS_LOCAL_WRITE;
        // Zero-based: only a type 2 window (EP scope) may be; the IB spec
        // forbids a zero-based type 1 window (o10-36.2.2) and rdma-core's
        // providers refuse one in ibv_bind_mw.
        if (rmr.va_type == DAT_VA_TYPE_ZB) {
            if (mw->type != IBV_MW_TYPE_2)
                return error(DAT_MODEL_NOT_SUPPORTED);
            info.mw_access_flags |= IBV_ACCESS_ZERO_BASED;
        }
    }
    // Each request takes a slot; the last (signalled) one is the bind's.
    const auto take_slot = [&](std::uint32_t operation) {
        const std::uint64_t seq = q->send_posted++;
        q->sends[seq & (depth - 1)] = {0, 0, operation};
        return seq << 1;
    };
    int err = 0;
    std::uint32_t context = 0;
    if (mw->type == IBV_MW_TYPE_1) {
        ibv_mw_bind b{};
        b.wr_id = take_slot(kBindOperation);
        b.send_flags = IBV_SEND_SIGNALED;
        b.bind_info = info;
        err = ibv_bind_mw(q->qp, mw, &b);
        context = mw->rkey;
    } else {
        ibv_send_wr wr[2]{};
        int n = 0;
        if (invalidate_first || !bind) {
            wr[n].opcode = IBV_WR_LOCAL_INV;
            wr[n].invalidate_rkey = invalidate_first ? mw->rkey : rmr.context;
            ++n;
        }
        if (bind) {
            wr[n].opcode = IBV_WR_BIND_MW;
            wr[n].bind_mw.mw = mw;
            wr[n].bind_mw.rkey = ibv_inc_rkey(mw->rkey);
            wr[n].bind_mw.bind_info = info;
            context = wr[n].bind_mw.rkey;
            ++n;
        }
        for (int i = 0; i < n; ++i) {
            wr[i].wr_id = take_slot(i == n - 1 ? kBindOperation : static_cast<std::uint32_t>(DAT_DTO_SEND));
            wr[i].next = i + 1 < n ? &wr[i + 1] : nullptr;
        }
        wr[n - 1].send_flags = IBV_SEND_SIGNALED;
        ibv_send_wr* bad = nullptr;
        err = ibv_post_send(q->qp, wr, &bad);
        if (err == 0 && bind)
            mw->rkey = context;
    }
    if (err != 0) {
        q->send_posted -= needed; // nothing was posted
        if (g_debug)
            std::fprintf(stderr, "fastdapl: memory window bind refused: %s\n", std::strerror(err));
        return err == EINVAL || err == EPERM ? error(DAT_PROTECTION_VIOLATION, DAT_NO_SUBTYPE)
                                             : error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEP);
    }
    rmr.context = bind ? context : 0;
    if (bind)
        rmr.device_region = info.mr;
    if (mw->type == IBV_MW_TYPE_2)
        rmr.window_qpn = bind ? qpn : 0;
    posted = true;
    return DAT_SUCCESS;
}

void VerbsPath::bind_failed(Rmr& rmr)
{
    rmr.context = 0;
    if (rmr.device_window)
        replace_window(rmr); // where no new one can be had, the next bind tries again
}

bool VerbsPath::replace_window(Rmr& rmr)
{
    const ibv_mw_type type = rmr.scope == DAT_RMR_SCOPE_EP ? IBV_MW_TYPE_2 : IBV_MW_TYPE_1;
    if (rmr.device_window)
        ibv_dealloc_mw(static_cast<ibv_mw*>(rmr.device_window));
    rmr.device_window = ibv_alloc_mw(pd_of(rmr.pz), type);
    rmr.window_qpn = 0;
    return rmr.device_window != nullptr;
}

ibv_mw* VerbsPath::window_for(Rmr& rmr, std::uint32_t qpn, bool replace_elsewhere)
{
    const bool lost = !rmr.device_window; // a failed bind's replacement could not be had
    const bool elsewhere = replace_elsewhere && rmr.scope == DAT_RMR_SCOPE_EP && rmr.window_qpn != 0 &&
                           rmr.window_qpn != qpn;
    if ((lost || elsewhere) && !replace_window(rmr))
        return nullptr;
    return static_cast<ibv_mw*>(rmr.device_window);
}

void VerbsPath::destroy_window(Rmr& rmr)
{
    if (rmr.device_window)
        ibv_dealloc_mw(static_cast<ibv_mw*>(rmr.device_window));
}

DAT_RETURN VerbsPath::create_completions(Evd& evd)
{
    const int most = std::max(device_->attr().max_cqe, 1);
    const int cqe = std::min(static_cast<int>(evd.qlen), most);
    ibv_comp_channel* channel = verbs::create_channel(device_->context());
    const int wake_fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    DAT_RETURN rc = error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEVD);
    if (channel && wake_fd >= 0)
        rc = make_cq(evd, cqe, channel, wake_fd);
    if (rc != DAT_SUCCESS) {
        if (channel)
            ibv_destroy_comp_channel(channel);
        if (wake_fd >= 0)
            ::close(wake_fd);
    }
    return rc;
}

DAT_RETURN VerbsPath::make_cq(Evd& evd, int cqe, ibv_comp_channel* channel, int wake_fd)
{
    ibv_cq* cq = ibv_create_cq(device_->context(), cqe, &evd, channel, 0);
    if (!cq)
        return error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEVD);
    auto* c = new VerbsCompletions();
    c->cq = cq;
    c->channel = channel;
    c->wake_fd = wake_fd;
    c->eps = &eps_;
    c->polled.resize(64);
    if (driver_ == "rxe") {
        c->invalidated_flag = 1u << 2; // the kernel's IB_WC_WITH_INVALIDATE (verbs.hpp)
        c->special_receive_flags = IBV_WC_WITH_IMM | c->invalidated_flag;
    }
    evd.completions = c;
    return DAT_SUCCESS;
}

DAT_RETURN VerbsPath::resize_completions(Evd& evd, DAT_COUNT qlen)
{
    if (ibv_resize_cq(static_cast<VerbsCq*>(evd.completions)->cq, qlen) != 0)
        return error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEVD); // not every device resizes
    return DAT_SUCCESS;
}

void VerbsPath::destroy_completions(Evd& evd)
{
    auto* c = static_cast<VerbsCq*>(evd.completions);
    device_->unwatch_cq(&evd); // no notification names it after this
    ibv_destroy_cq(c->cq);
    ibv_destroy_comp_channel(c->channel);
    ::close(c->wake_fd);
    if (evd.path == PathKind::mlx5)
        delete static_cast<Mlx5Completions*>(c);
    else
        delete static_cast<VerbsCompletions*>(c);
    evd.completions = nullptr;
}

void VerbsPath::watch_completions(Evd& evd, bool linked)
{
    if (!linked) {
        device_->unwatch_cq(&evd);
        return;
    }
    // Its completions trigger the CNO from now on, through the device thread.
    device_->watch_cq(&evd, static_cast<VerbsCq*>(evd.completions)->channel);
    std::lock_guard lock(evd.mutex);
    verbs_wait::arm(&evd);
}

// A verbs RC queue pair for the endpoint, in INIT so that receives can be
// posted before a connection is sought (rdma_cm takes it on from there).
DAT_RETURN VerbsPath::create_queues(Ep& ep)
{
    const ibv_device_attr& dev = device_->attr();
    ibv_qp_init_attr init{};
    init.qp_context = &ep;
    init.send_cq = static_cast<VerbsCq*>(ep.request_evd->completions)->cq;
    init.recv_cq = static_cast<VerbsCq*>(ep.recv_evd->completions)->cq;
    init.srq = ep.srq ? static_cast<VerbsSrqBase*>(ep.srq->ring)->srq : nullptr;
    init.qp_type = ep.ud ? IBV_QPT_UD : IBV_QPT_RC;
    init.sq_sig_all = 0;
    const auto limit = [](DAT_COUNT want, int most) {
        return static_cast<std::uint32_t>(std::min<long>(std::max<DAT_COUNT>(want, 1), std::max(most, 1)));
    };
    init.cap.max_send_wr = limit(ep.attr.max_request_dtos, dev.max_qp_wr);
    init.cap.max_recv_wr = ep.srq ? 0 : limit(ep.attr.max_recv_dtos, dev.max_qp_wr);
    init.cap.max_send_sge =
        limit(std::max({ep.attr.max_request_iov, ep.attr.max_rdma_read_iov, ep.attr.max_rdma_write_iov}), dev.max_sge);
    init.cap.max_recv_sge = ep.srq ? 0 : limit(ep.attr.max_recv_iov, dev.max_sge);
    init.cap.max_inline_data = kMaxInline;
    ibv_qp* qp = make_qp(ep, init);
    if (!qp)
        return error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEP);
    if (ep.ud) { // no connection moves it: ready at once
        if (!ready_datagram_qp(qp) || !init_queues(ep, qp, init.cap)) {
            ibv_destroy_qp(qp);
            release_queues(ep);
            return error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEP);
        }
        static_cast<VerbsQp*>(ep.queues)->address_handles = &address_handles_;
        eps_.insert(qp->qp_num, &ep);
        return DAT_SUCCESS;
    }
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_INIT;
    a.pkey_index = 0;
    a.port_num = device_->port();
    a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                        (atomics() ? IBV_ACCESS_REMOTE_ATOMIC : 0);
    if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) != 0 ||
        !init_queues(ep, qp, init.cap)) {
        ibv_destroy_qp(qp);
        release_queues(ep);
        return error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEP);
    }
    eps_.insert(qp->qp_num, &ep);
    return DAT_SUCCESS;
}

ibv_qp* VerbsPath::make_qp(Ep& ep, ibv_qp_init_attr& init)
{
    ibv_qp* qp = ibv_create_qp(pd_of(ep.pz), &init);
    if (!qp) { // some devices copy nothing inline
        init.cap.max_inline_data = 0;
        qp = ibv_create_qp(pd_of(ep.pz), &init);
    }
    return qp;
}

bool VerbsPath::init_queues(Ep& ep, ibv_qp* qp, const ibv_qp_cap& cap)
{
    auto* q = new VerbsEpQueues();
    q->qp = qp;
    // What was asked for, even where the device grants more (rxe grows it
    // with the segment count): a send longer than that has its key checked.
    q->max_inline = std::min<std::uint32_t>(cap.max_inline_data, kMaxInline);
    q->sends.assign(power_of_two_at_least(cap.max_send_wr), {});
    q->recv_cookies.assign(ep.srq ? 0 : power_of_two_at_least(cap.max_recv_wr), 0);
    q->sends_invalidate = max_rmrs() > 0;
    ep.queues = q;
    return true;
}

void VerbsPath::release_queues(Ep& ep)
{
    delete static_cast<VerbsEpQueues*>(static_cast<VerbsQp*>(ep.queues));
    ep.queues = nullptr;
}

void VerbsPath::before_destroy_qp(Ep&, ibv_qp*) {}

// Generic path, after an SRQ endpoint's QP is destroyed: its receive
// completions still on the CQ (or polled ahead) are taken out now and
// their SRQ slots come back. Left there, they would be skipped when polled
// (no EP to report to) and the slots lost to the SRQ for good.
void VerbsPath::after_destroy_qp(Ep& ep, std::uint32_t qpn)
{
    if (!ep.srq)
        return;
    auto* srq = static_cast<VerbsSrqRing*>(ep.srq->ring);
    auto* c = static_cast<VerbsCompletions*>(ep.recv_evd->completions);
    with_completions_held(&ep, [srq, c, qpn] {
        std::vector<ibv_wc> kept;
        const auto sort = [&](const ibv_wc& wc) {
            if (wc.qp_num != qpn)
                kept.push_back(wc);
            else if (wc.wr_id & kVerbsRecvTag) {
                srq_slot_free(*srq, static_cast<std::uint32_t>(wc.wr_id >> 1));
                bump(srq->reaped);
            }
        };
        for (std::uint32_t i = 0; i < c->polled_count; ++i)
            sort(c->polled[c->polled_head + i]);
        ibv_wc batch[32];
        for (int n; (n = ibv_poll_cq(c->cq, 32, batch)) > 0;)
            for (int i = 0; i < n; ++i)
                sort(batch[i]);
        const std::size_t size = std::max<std::size_t>(c->polled.size(), kept.size());
        c->polled = std::move(kept);
        c->polled_count = static_cast<std::uint32_t>(c->polled.size());
        c->polled_head = 0;
        c->polled.resize(size);
    });
}

// Generic path: its completions still on the CQs are skipped when polled
// (no EP has its number any more), except an SRQ endpoint's receives, whose
// slots are taken back at once. Direct path: its CQEs are cleaned before
// the destroy (SRQ WQEs come back).
void VerbsPath::destroy_queues(Ep& ep)
{
    ibv_qp* qp = static_cast<VerbsQp*>(ep.queues)->qp;
    before_destroy_qp(ep, qp);
    const std::uint32_t qpn = qp->qp_num;
    eps_.erase(qpn);
    ibv_destroy_qp(qp);
    after_destroy_qp(ep, qpn); // after the destroy: no more come
    release_queues(ep);        // after its last QP
}

DAT_RETURN VerbsPath::create_srq(Srq& srq)
{
    ibv_srq_init_attr init{};
    init.srq_context = &srq;
    init.attr.max_wr = static_cast<std::uint32_t>(srq.max_recv_dtos);
    init.attr.max_sge = static_cast<std::uint32_t>(srq.max_recv_iov);
    ibv_srq* s = ibv_create_srq(pd_of(srq.pz), &init);
    if (!s)
        return error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_SRQ);
    if (DAT_RETURN rc = make_srq_ring(srq, s); rc != DAT_SUCCESS) {
        ibv_destroy_srq(s);
        return rc;
    }
    return DAT_SUCCESS;
}

DAT_RETURN VerbsPath::make_srq_ring(Srq& srq, ibv_srq* s)
{
    auto* r = new VerbsSrqRing();
    r->srq = s;
    srq_slots(*r, static_cast<std::uint32_t>(srq.max_recv_dtos));
    srq.ring = r;
    return DAT_SUCCESS;
}

DAT_RETURN VerbsPath::grow_srq(Srq& srq, DAT_COUNT qlen)
{
    auto* r = static_cast<VerbsSrqRing*>(srq.ring);
    if (qlen <= static_cast<DAT_COUNT>(r->cookies.size()))
        return DAT_SUCCESS;
    ibv_srq_attr a{};
    a.max_wr = static_cast<std::uint32_t>(qlen);
    if (ibv_modify_srq(r->srq, &a, IBV_SRQ_MAX_WR) != 0) // not every device resizes
        return error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_SRQ);
    srq.lock_completions();
    srq_slots(*r, static_cast<std::uint32_t>(qlen));
    srq.unlock_completions();
    return DAT_SUCCESS;
}

// The device's limit event (IBV_EVENT_SRQ_LIMIT_REACHED, once per arming)
// fires when fewer than the limit are left; 0 disarms.
DAT_RETURN VerbsPath::arm_srq_limit(Srq& srq, DAT_COUNT low_watermark, bool& below_now)
{
    below_now = low_watermark > 0 && dp::srq_available(&srq) < low_watermark;
    if (below_now || low_watermark == 0)
        return DAT_SUCCESS;
    ibv_srq_attr a{};
    a.srq_limit = static_cast<std::uint32_t>(low_watermark);
    if (ibv_modify_srq(static_cast<VerbsSrqBase*>(srq.ring)->srq, &a, IBV_SRQ_LIMIT) != 0)
        return error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_SRQ);
    return DAT_SUCCESS;
}

void VerbsPath::destroy_srq(Srq& srq)
{
    auto* r = static_cast<VerbsSrqBase*>(srq.ring);
    ibv_destroy_srq(r->srq);
    if (srq.path == PathKind::mlx5)
        delete static_cast<Mlx5SrqRing*>(r);
    else
        delete static_cast<VerbsSrqRing*>(r);
    srq.ring = nullptr;
}

// --- events ---------------------------------------------------------------------------------

void VerbsPath::start(Ia& ia)
{
    device_->start({[](void* context, unsigned events) {
                        auto* evd = static_cast<Evd*>(context);
                        Cno* cno;
                        {
                            std::lock_guard lock(evd->mutex);
                            note_cq_events(evd, events);
                            wake_waiters(evd);
                            cno = cno_to_trigger(evd);
                            if (evd->cno.load()) // a CNO keeps the CQ armed
                                verbs_wait::arm(evd);
                        }
                        if (cno)
                            trigger_cno(cno, evd);
                    },
                    [this, &ia](const ibv_async_event& ev) { async_event(ia, ev); }});
}

// Device, port, queue pair and SRQ events as DAT async events.
void VerbsPath::async_event(Ia& ia, const ibv_async_event& ev)
{
    if (g_debug)
        std::fprintf(stderr, "fastdapl: async event %s\n", ibv_event_type_str(ev.event_type));
    switch (ev.event_type) {
    case IBV_EVENT_QP_FATAL:
    case IBV_EVENT_QP_REQ_ERR:
    case IBV_EVENT_QP_ACCESS_ERR:
    case IBV_EVENT_PATH_MIG_ERR: {
        std::lock_guard lock(ia.cm_mutex); // the EP cannot be freed under us
        Ep* ep = eps_.find(ev.element.qp->qp_num);
        if (!ep)
            return;
        ep_connection_ended(ep, false);
        post_async(&ia, DAT_ASYNC_ERROR_EP_BROKEN, ep, DAT_EP_TRANSFER_TO_ERROR);
        return;
    }
    case IBV_EVENT_COMM_EST: { // data before the RTU: tell rdma_cm, which else waits for the RTU's resend
        std::lock_guard lock(ia.cm_mutex);
        if (Ep* ep = eps_.find(ev.element.qp->qp_num))
            ia.cm->first_data_arrived(*ep);
        return;
    }
    case IBV_EVENT_CQ_ERR:
        if (auto* evd = static_cast<Evd*>(ev.element.cq->cq_context))
            report_overflow(evd);
        return;
    case IBV_EVENT_SRQ_LIMIT_REACHED: // once per arming, like the DAT low watermark
        srq_low_watermark(ev.element.srq->srq_context);
        return;
    case IBV_EVENT_SRQ_ERR: {
        auto* srq = static_cast<Srq*>(ev.element.srq->srq_context);
        static_cast<VerbsSrqBase*>(srq->ring)->failed = true;
        srq_failed(srq);
        return;
    }
    case IBV_EVENT_DEVICE_FATAL:
    case IBV_EVENT_PORT_ERR:
        post_async(&ia, DAT_ASYNC_ERROR_IA_CATASTROPHIC, &ia, DAT_IA_CATASTROPHIC_ERROR);
        return;
    default: // LAST_WQE_REACHED (the connection's end says it), port up, LID/GID changes
        return;
    }
}

// --- the generic data path ------------------------------------------------------------------

namespace verbs_path {

unsigned send_flags(DAT_COMPLETION_FLAGS flags)
{
    unsigned f = 0;
    // UNSIGNALLED still completes (a non-notification event); SUPPRESS
    // leaves out the completion of a success. An unsignalled WR's error still
    // completes, and a later signalled one retires it.
    if (!(flags & DAT_COMPLETION_SUPPRESS_FLAG))
        f |= IBV_SEND_SIGNALED;
    if (flags & DAT_COMPLETION_SOLICITED_WAIT_FLAG)
        f |= IBV_SEND_SOLICITED;
    if (flags & DAT_COMPLETION_BARRIER_FENCE_FLAG)
        f |= IBV_SEND_FENCE;
    return f;
}

DAT_RETURN post_request(Ep* ep, std::uint8_t mlx5_opcode, DAT_COUNT n, const DAT_LMR_TRIPLET* iov, std::uint32_t total,
                        std::uint64_t cookie, const DAT_RMR_TRIPLET* remote, DAT_COMPLETION_FLAGS flags)
{
    auto* q = static_cast<VerbsEpQueues*>(ep->queues);
    const auto depth = static_cast<std::uint64_t>(q->sends.size());
    if (q->send_posted - q->send_retired >= depth) [[unlikely]]
        return error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEP);
    ibv_sge sge[kMaxSge];
    to_sges(iov, n, sge);
    ibv_send_wr wr{};
    const std::uint64_t seq = q->send_posted;
    wr.wr_id = seq << 1;
    wr.sg_list = sge;
    wr.num_sge = n;
    wr.send_flags = send_flags(flags);
    // Inline only what verbs can copy at post time; reads land in the list.
    if (total <= q->max_inline && mlx5_opcode != MLX5_OPCODE_RDMA_READ && n > 0)
        wr.send_flags |= IBV_SEND_INLINE;
    DAT_DTOS operation = DAT_DTO_SEND;
    switch (mlx5_opcode) {
    case MLX5_OPCODE_RDMA_WRITE:
        wr.opcode = IBV_WR_RDMA_WRITE;
        operation = DAT_DTO_RDMA_WRITE;
        break;
    case MLX5_OPCODE_RDMA_READ:
        wr.opcode = IBV_WR_RDMA_READ;
        operation = DAT_DTO_RDMA_READ;
        break;
    default:
        wr.opcode = IBV_WR_SEND;
        break;
    }
    if (remote) {
        wr.wr.rdma.remote_addr = remote->virtual_address;
        wr.wr.rdma.rkey = remote->rmr_context;
    }
    VerbsEpQueues::Send& s = q->sends[seq & (depth - 1)];
    s.cookie = cookie;
    s.length = total;
    s.operation = operation;
    ibv_send_wr* bad = nullptr;
    if (const int err = ibv_post_send(q->qp, &wr, &bad); err != 0) [[unlikely]] {
        if (g_debug)
            std::fprintf(stderr, "fastdapl: ibv_post_send refused a request: %s\n", std::strerror(err));
        return error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEP);
    }
    q->send_posted = seq + 1;
    return DAT_SUCCESS;
}

namespace {

// One extended request: its slot records the DAT operation for the
// completion, as post_request's do.
DAT_RETURN post_extended(Ep* ep, ibv_send_wr& wr, std::uint32_t operation, std::uint32_t length,
                         std::uint64_t cookie)
{
    auto* q = static_cast<VerbsEpQueues*>(ep->queues);
    const auto depth = static_cast<std::uint64_t>(q->sends.size());
    if (q->send_posted - q->send_retired >= depth)
        return error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEP);
    const std::uint64_t seq = q->send_posted;
    wr.wr_id = seq << 1;
    q->sends[seq & (depth - 1)] = {cookie, length, operation};
    ibv_send_wr* bad = nullptr;
    if (const int err = ibv_post_send(q->qp, &wr, &bad); err != 0) {
        if (g_debug)
            std::fprintf(stderr, "fastdapl: extended request refused: %s\n", std::strerror(err));
        // EINVAL: the device refuses the request itself (Soft-RoCE: an
        // atomic's misaligned target), past our checks; else a full queue.
        if (err == EINVAL)
            return error(DAT_INVALID_PARAMETER, DAT_NO_SUBTYPE);
        return error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEP);
    }
    q->send_posted = seq + 1;
    return DAT_SUCCESS;
}

// A gathered extended request of `opcode` (inline where it fits); `finish`
// sets what is particular to it.
template <typename Finish>
DAT_RETURN post_gathered(Ep* ep, ibv_wr_opcode opcode, DAT_COUNT n, const DAT_LMR_TRIPLET* iov, std::uint32_t total,
                         std::uint64_t cookie, DAT_COMPLETION_FLAGS flags, std::uint32_t operation, Finish&& finish)
{
    ibv_sge sge[kMaxSge];
    to_sges(iov, n, sge);
    ibv_send_wr wr{};
    wr.opcode = opcode;
    wr.sg_list = sge;
    wr.num_sge = n;
    wr.send_flags = send_flags(flags);
    if (total <= static_cast<VerbsEpQueues*>(ep->queues)->max_inline && n > 0)
        wr.send_flags |= IBV_SEND_INLINE;
    finish(wr);
    return post_extended(ep, wr, operation, total, cookie);
}

} // namespace

DAT_RETURN post_datagram(Ep* ep, DAT_COUNT n, const DAT_LMR_TRIPLET* iov, std::uint32_t total, std::uint64_t cookie,
                         const void* ah, std::uint32_t qpn, DAT_COMPLETION_FLAGS flags)
{
    auto* q = static_cast<VerbsEpQueues*>(ep->queues);
    std::uint64_t handle = 0;
    if (!q->address_handles || !q->address_handles->destination_of(ah, handle))
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG4); // not a live handle of this IA: not read
    return post_gathered(ep, IBV_WR_SEND, n, iov, total, cookie, flags, DAT_IB_DTO_SEND_UD, [&](ibv_send_wr& wr) {
        wr.wr.ud.ah = reinterpret_cast<ibv_ah*>(static_cast<std::uintptr_t>(handle));
        wr.wr.ud.remote_qpn = qpn;
        wr.wr.ud.remote_qkey = cm::kDatagramQkey;
    });
}

DAT_RETURN post_write_immediate(Ep* ep, DAT_COUNT n, const DAT_LMR_TRIPLET* iov, std::uint32_t total,
                                std::uint64_t cookie, const DAT_RMR_TRIPLET* remote, std::uint32_t imm,
                                DAT_COMPLETION_FLAGS flags)
{
    return post_gathered(ep, IBV_WR_RDMA_WRITE_WITH_IMM, n, iov, total, cookie, flags, DAT_IB_DTO_RDMA_WRITE_IMMED,
                         [&](ibv_send_wr& wr) {
                             wr.imm_data = imm; // as given: the reference dapl does not convert it either
                             wr.wr.rdma.remote_addr = remote->virtual_address;
                             wr.wr.rdma.rkey = remote->rmr_context;
                         });
}

DAT_RETURN post_send_invalidate(Ep* ep, DAT_COUNT n, const DAT_LMR_TRIPLET* iov, std::uint32_t total,
                                std::uint64_t cookie, std::uint32_t rkey, DAT_COMPLETION_FLAGS flags)
{
    // What a peer can invalidate on verbs is a type 2 window's rkey (or a
    // fast-registered MR's, which we never make): an LMR's rmr_context is a
    // plain MR's, which the receiving device refuses to invalidate (the
    // connection breaks). Where windows are off, on this IA and so on peers
    // of the same kind, no key a peer has can be invalidated: refused at once.
    if (!static_cast<VerbsEpQueues*>(ep->queues)->sends_invalidate)
        return error(DAT_MODEL_NOT_SUPPORTED);
    return post_gathered(ep, IBV_WR_SEND_WITH_INV, n, iov, total, cookie, flags, DAT_DTO_SEND,
                         [&](ibv_send_wr& wr) { wr.invalidate_rkey = rkey; });
}

DAT_RETURN post_atomic(Ep* ep, bool compare_swap, const DAT_LMR_TRIPLET& local, const DAT_RMR_TRIPLET& remote,
                       std::uint64_t swap_add, std::uint64_t compare, std::uint64_t cookie,
                       DAT_COMPLETION_FLAGS flags)
{
    ibv_sge sge{local.virtual_address, static_cast<std::uint32_t>(local.segment_length), local.lmr_context};
    ibv_send_wr wr{};
    wr.opcode = compare_swap ? IBV_WR_ATOMIC_CMP_AND_SWP : IBV_WR_ATOMIC_FETCH_AND_ADD;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.send_flags = send_flags(flags);
    wr.wr.atomic.remote_addr = remote.virtual_address;
    wr.wr.atomic.rkey = remote.rmr_context;
    // verbs' compare_add is the comparand of a compare and swap, the addend
    // of a fetch and add.
    wr.wr.atomic.compare_add = compare_swap ? compare : swap_add;
    wr.wr.atomic.swap = compare_swap ? swap_add : 0;
    return post_extended(ep, wr, compare_swap ? DAT_IB_DTO_CMP_SWAP : DAT_IB_DTO_FETCH_ADD,
                         static_cast<std::uint32_t>(local.segment_length), cookie);
}

DAT_RETURN post_recv(Ep* ep, DAT_COUNT n, const DAT_LMR_TRIPLET* iov, std::uint64_t cookie)
{
    auto* q = static_cast<VerbsEpQueues*>(ep->queues);
    const auto depth = static_cast<std::uint32_t>(q->recv_cookies.size());
    if (q->recv_posted - q->recv_reaped >= depth) [[unlikely]]
        return error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEP);
    ibv_sge sge[kMaxSge];
    to_sges(iov, n, sge);
    const std::uint32_t slot = q->recv_posted;
    q->recv_cookies[slot & (depth - 1)] = cookie;
    ibv_recv_wr wr = recv_wr(slot, sge, n);
    ibv_recv_wr* bad = nullptr;
    if (ibv_post_recv(q->qp, &wr, &bad) != 0) [[unlikely]]
        return error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEP);
    ++q->recv_posted;
    return DAT_SUCCESS;
}

DAT_RETURN srq_post(Srq* srq, DAT_COUNT n, const DAT_LMR_TRIPLET* iov, std::uint64_t cookie)
{
    auto* r = static_cast<VerbsSrqRing*>(srq->ring);
    const std::uint32_t head = r->free_head.load(std::memory_order_relaxed);
    if (head == r->free_tail.load(std::memory_order_acquire) ||
        static_cast<DAT_COUNT>(r->posted.load(std::memory_order_relaxed) - r->reaped.load(std::memory_order_acquire)) >=
            srq->max_recv_dtos) [[unlikely]]
        return error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_SRQ);
    const std::uint32_t slot = r->free_slots[head % r->free_slots.size()];
    ibv_sge sge[kMaxSge];
    to_sges(iov, n, sge);
    r->cookies[slot] = cookie;
    ibv_recv_wr wr = recv_wr(slot, sge, n);
    ibv_recv_wr* bad = nullptr;
    if (ibv_post_srq_recv(r->srq, &wr, &bad) != 0) [[unlikely]]
        return error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_SRQ);
    r->free_head.store(head + 1, std::memory_order_release);
    bump(r->posted);
    return DAT_SUCCESS;
}

std::uint32_t poll_ahead(VerbsCompletions& c)
{
    if (c.polled_count == 0)
        c.polled_head = 0;
    const auto size = static_cast<std::uint32_t>(c.polled.size());
    const std::uint32_t end = c.polled_head + c.polled_count;
    if (end < size) {
        const int n = ibv_poll_cq(c.cq, static_cast<int>(size - end), &c.polled[end]);
        if (n > 0)
            c.polled_count += static_cast<std::uint32_t>(n);
    }
    return c.polled_count;
}

DAT_COUNT srq_arrived(Evd* evd, const Srq* srq)
{
    auto& c = *static_cast<VerbsCompletions*>(evd->completions);
    poll_ahead(c);
    DAT_COUNT n = 0;
    for (std::uint32_t k = 0; k < c.polled_count; ++k) {
        const ibv_wc& wc = c.polled[c.polled_head + k];
        if (!(wc.wr_id & kVerbsRecvTag))
            continue;
        const Ep* ep = c.eps->find(wc.qp_num);
        if (ep && ep->srq == srq)
            ++n;
    }
    return n;
}

bool take_completion(Evd* evd, DAT_EVENT& e)
{
    auto& c = *static_cast<VerbsCompletions*>(evd->completions);
    for (;;) {
        if (c.polled_count == 0 && poll_ahead(c) == 0)
            return false;
        const ibv_wc wc = c.polled[c.polled_head];
        ++c.polled_head;
        --c.polled_count;
        Ep* ep = c.eps->find(wc.qp_num);
        if (wc.status != IBV_WC_SUCCESS && g_debug) [[unlikely]]
            std::fprintf(stderr, "fastdapl: completion error on qp %u: %s (vendor 0x%x), wr_id 0x%llx\n", wc.qp_num,
                         ibv_wc_status_str(wc.status), wc.vendor_err, static_cast<unsigned long long>(wc.wr_id));
        if (!ep) // its EP is gone: nothing to report the completion to
            continue;
        auto* q = static_cast<VerbsEpQueues*>(ep->queues);
        auto& d = begin_dto_event(e, evd, ep);
        d.status = status_of_wc(wc.status);
        const bool request = !(wc.wr_id & kVerbsRecvTag);
        if (request) {
            const std::uint64_t seq = wc.wr_id >> 1;
            const VerbsEpQueues::Send& s = q->sends[seq & (q->sends.size() - 1)];
            if (s.operation >= kExtendedOperationBase) [[unlikely]] {
                if (s.operation == kBindOperation) { // a memory-window bind (rmr.cpp)
                    if (seq + 1 > q->send_retired)
                        q->send_retired = seq + 1;
                    const DAT_DTO_COMPLETION_STATUS status = d.status;
                    const bool report = rmr_bind_completed(ep, evd, status, e);
                    verbs_completion_reaped(ep, evd, status, true, requests_done(ep));
                    if (report)
                        return true;
                    continue;
                }
                mark_extended_request(e, static_cast<DAT_DTOS>(s.operation)); // an IB extension's: an extended event
            }
            d.user_cookie.as_64 = s.cookie;
            d.operation = static_cast<DAT_DTOS>(s.operation);
            d.transfered_length = d.status == DAT_DTO_SUCCESS ? s.length : 0;
            if (seq + 1 > q->send_retired) // earlier unsignalled requests are done too
                q->send_retired = seq + 1;
        } else {
            const auto slot = static_cast<std::uint32_t>(wc.wr_id >> 1);
            if (Srq* srq = ep->srq) {
                auto* r = static_cast<VerbsSrqRing*>(srq->ring);
                srq->lock_completions();
                d.user_cookie.as_64 = r->cookies[slot];
                srq_slot_free(*r, slot);
                bump(r->reaped);
                srq->unlock_completions();
            } else {
                d.user_cookie.as_64 = q->recv_cookies[slot & (q->recv_cookies.size() - 1)];
                ++q->recv_reaped;
            }
            d.operation = DAT_DTO_RECEIVE;
            d.transfered_length = d.status == DAT_DTO_SUCCESS ? wc.byte_len : 0;
            if (ep->ud) [[unlikely]] // a UD endpoint's receive names its sender's queue pair
                mark_datagram_receive(e, ep, wc.status == IBV_WC_SUCCESS ? wc.src_qp : 0, 0);
            // Immediate data (a write's or a send's): an extended event. A
            // completion in error has no valid flags.
            // A send that invalidated one of our keys: the event says so and
            // names it (its RMR, if one, is unbound).
            if (wc.status == IBV_WC_SUCCESS && (wc.wc_flags & c.special_receive_flags)) [[unlikely]] {
                if (wc.wc_flags & IBV_WC_WITH_IMM)
                    mark_immediate_receive(e, ep,
                                           wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM ? MLX5_CQE_RESP_WR_IMM
                                                                                  : MLX5_CQE_RESP_SEND_IMM,
                                           wc.imm_data);
                else if (wc.wc_flags & c.invalidated_flag)
                    received_invalidate(ep, d, wc.invalidated_rkey);
            }
        }
        verbs_completion_reaped(ep, evd, d.status, request, requests_done(ep));
        return true;
    }
}

} // namespace verbs_path

// --- waiting ------------------------------------------------------------------------------

namespace verbs_wait {

void arm(Evd* evd)
{
    if (evd->path == PathKind::mlx5)
        static_cast<Mlx5Completions*>(evd->completions)->view.arm(false);
    else
        ibv_req_notify_cq(static_cast<VerbsCq*>(evd->completions)->cq, 0);
}

bool sleep(Evd* evd, std::unique_lock<SpinLock>& lock, const std::chrono::steady_clock::time_point* deadline)
{
    auto* c = static_cast<VerbsCq*>(evd->completions);
    c->fd_waiting = true;
    lock.unlock();
    bool woken = true;
    timespec left{};
    if (deadline) {
        const auto ns =
            std::chrono::duration_cast<std::chrono::nanoseconds>(*deadline - std::chrono::steady_clock::now()).count();
        woken = ns > 0;
        left.tv_sec = static_cast<time_t>(std::max<long long>(ns, 0) / 1000000000);
        left.tv_nsec = static_cast<long>(std::max<long long>(ns, 0) % 1000000000);
    }
    unsigned events = 0;
    if (woken) {
        pollfd fds[2] = {{c->channel->fd, POLLIN, 0}, {c->wake_fd, POLLIN, 0}};
        woken = ::ppoll(fds, 2, deadline ? &left : nullptr, nullptr) != 0;
    }
    if (woken) {
        // The device thread may have taken the channel's events first, for a CNO.
        ibv_cq* cq = nullptr;
        void* context = nullptr;
        while (ibv_get_cq_event(c->channel, &cq, &context) == 0) {
            ibv_ack_cq_events(cq, 1);
            ++events;
        }
        std::uint64_t v;
        [[maybe_unused]] ssize_t n = ::read(c->wake_fd, &v, sizeof v);
    }
    lock.lock();
    note_cq_events(evd, events);
    c->fd_waiting = false;
    return woken;
}

} // namespace verbs_wait

std::string mtu_text(ibv_mtu mtu)
{
    switch (mtu) {
    case IBV_MTU_256:
        return "256";
    case IBV_MTU_512:
        return "512";
    case IBV_MTU_1024:
        return "1024";
    case IBV_MTU_2048:
        return "2048";
    default:
        return "4096";
    }
}

} // namespace fastdapl::core
