// The softnic device kind's control plane: the software NIC's protection
// domains, memory table, CQs, QPs and SRQs, and the fast path's views of them.
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#include "softnic.hpp"

#include "../lmr.hpp"
#include "../pz.hpp"
#include "../rmr.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace fastdapl::core {

std::unique_ptr<ConnectionManager> make_socket_connections(Ia& ia, softnic::Device& device, bool shm);

namespace {

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

std::uint32_t pd_of(const Pz* pz)
{
    return static_cast<std::uint32_t>(reinterpret_cast<std::uintptr_t>(pz->device_pd));
}

std::int32_t device_mark(DAT_COUNT mark)
{
    return mark == DAT_WATERMARK_INFINITE ? softnic::kNoWatermark : mark;
}

// The softnic's notification of new CQEs (its thread).
void completions_notified(void* context)
{
    auto* evd = static_cast<Evd*>(context);
    if (static_cast<SoftnicCompletions*>(evd->completions)->cq->overflowed()) // it breaks the connections that feed it
        report_overflow(evd);
    completions_arrived(evd);
}

void connection_ended(void* context, bool orderly)
{
    ep_connection_ended(static_cast<Ep*>(context), orderly);
}

} // namespace

SoftnicPath::SoftnicPath(const sockaddr_storage&, bool shm)
    : DevicePath(PathKind::softnic), device_(new softnic::Device), shm_(shm)
{
    // FASTDAPL_SOFTNIC_INLINE=0: every post wakes the engine thread (to
    // measure the fast path alone, or compare).
    const char* caller = std::getenv("FASTDAPL_SOFTNIC_INLINE");
    caller_sends_ = !(caller && std::strcmp(caller, "0") == 0);
}

SoftnicPath::~SoftnicPath() = default;

std::unique_ptr<ConnectionManager> SoftnicPath::make_connections(Ia& ia)
{
    return make_socket_connections(ia, *device_, shm_);
}

void SoftnicPath::expect_datagrams(Ep& ep, const sockaddr_storage& peer, std::uint32_t qpn, std::uint16_t udp_port,
                                   bool expect)
{
    sockaddr_in from{};
    std::memcpy(&from, &peer, sizeof from);
    from.sin_port = htons(udp_port);
    softnic::Qp* qp = static_cast<SoftnicEpQueues*>(ep.queues)->qp;
    if (expect)
        device_->add_datagram_peer(qp, from, qpn);
    else
        device_->remove_datagram_peer(qp, from, qpn);
}

void* SoftnicPath::make_address_handle(Ep& ep, const sockaddr_storage& peer, std::uint32_t qpn, std::uint16_t udp_port,
                                       const void*)
{
    sockaddr_in to{};
    std::memcpy(&to, &peer, sizeof to);
    to.sin_port = htons(udp_port);
    device_->add_datagram_peer(static_cast<SoftnicEpQueues*>(ep.queues)->qp, to, qpn);
    return address_handles_.make(softnic::datagram_destination(to));
}

DAT_RETURN SoftnicPath::create_pd(Pz& pz)
{
    pz.device_pd = reinterpret_cast<void*>(static_cast<std::uintptr_t>(device_->alloc_pd()));
    return DAT_SUCCESS;
}

DAT_RETURN SoftnicPath::register_memory(Lmr& lmr, std::uint64_t addr, std::uint64_t length)
{
    softnic::RangeFault fault = softnic::RangeFault::none;
    const bool remote = lmr.privileges & (DAT_MEM_PRIV_REMOTE_READ_FLAG | DAT_MEM_PRIV_REMOTE_WRITE_FLAG);
    // Zero-based with remote rights: the local key keeps process addresses
    // (inline data is copied from them) and local rights; a second key,
    // addressed from 0, carries the remote rights.
    const bool zero_based = remote && lmr.va_type == DAT_VA_TYPE_ZB;
    const std::uint32_t all = softnic_access(lmr.privileges);
    const std::uint32_t key = device_->memory().add(
        addr, length, zero_based ? all & (softnic::kLocalRead | softnic::kLocalWrite) : all, pd_of(lmr.pz), &fault);
    if (fault != softnic::RangeFault::none) {
        // Memory a device could not pin: not mapped, PROT_NONE, past the
        // end of its mapping, or read-only under write rights. Section
        // 6.7.2.1 lists DAT_INVALID_PARAMETER for a bad region and no
        // DAT_LENGTH_ERROR, so a length running past the mapping is an
        // invalid parameter too; the subtype names the argument at fault
        // (region, length, privileges). A map we cannot read is ours.
        if (fault == softnic::RangeFault::unverified)
            return error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY_REGION);
        DAT_RETURN arg = DAT_INVALID_ARG6; // rights: write asked of read-only memory
        if (lmr.mem_type == DAT_MEM_TYPE_LMR || fault == softnic::RangeFault::start)
            arg = DAT_INVALID_ARG3;
        else if (fault == softnic::RangeFault::length)
            arg = DAT_INVALID_ARG4;
        return error(DAT_INVALID_PARAMETER, arg);
    }
    if (key == 0)
        return error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY_REGION);
    lmr.lmr_context = key;
    lmr.rmr_context = remote ? key : 0;
    if (zero_based) {
        const std::uint32_t remote_key =
            device_->memory().add_at(lmr.registered_address, addr, length, all, pd_of(lmr.pz));
        if (remote_key == 0) {
            device_->memory().remove(key);
            return error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY_REGION);
        }
        lmr.rmr_context = remote_key;
        lmr.device_remote_mr = reinterpret_cast<void*>(static_cast<std::uintptr_t>(remote_key));
    }
    return DAT_SUCCESS;
}

void SoftnicPath::deregister_memory(Lmr& lmr)
{
    device_->memory().remove(lmr.lmr_context);
    if (lmr.device_remote_mr)
        device_->memory().remove(static_cast<std::uint32_t>(reinterpret_cast<std::uintptr_t>(lmr.device_remote_mr)));
}

void SoftnicPath::limit_ia_attr(DAT_IA_ATTR& attr) const
{
    if (shm_)
        std::snprintf(attr.adapter_name, sizeof attr.adapter_name, "softnic-shm");
}

DAT_RETURN SoftnicPath::create_window(Rmr& rmr)
{
    rmr.window = device_->memory().add_window(pd_of(rmr.pz));
    return rmr.window ? static_cast<DAT_RETURN>(DAT_SUCCESS) : error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY_REGION);
}

// The memory table binds at once; the caller's NOP carries the completion.
DAT_RETURN SoftnicPath::bind_window(Rmr& rmr, const Lmr* lmr, const DAT_LMR_TRIPLET& range,
                                    DAT_MEM_PRIV_FLAGS privileges, Ep& ep, bool& posted)
{
    posted = false;
    const std::uint32_t qpn =
        rmr.scope == DAT_RMR_SCOPE_EP && ep.queues ? static_cast<SoftnicEpQueues*>(ep.queues)->qp->qpn() : 0;
    const std::uint32_t key =
        device_->memory().bind_window(rmr.window, lmr ? lmr->lmr_context : 0, range.virtual_address,
                                      range.segment_length, softnic_access(privileges), qpn,
                                      rmr.va_type == DAT_VA_TYPE_ZB);
    if (key == 0)
        return error(DAT_PROTECTION_VIOLATION, DAT_NO_SUBTYPE);
    rmr.window = key;
    rmr.context = key;
    return DAT_SUCCESS;
}

void SoftnicPath::bind_failed(Rmr& rmr)
{
    if (const std::uint32_t key = device_->memory().bind_window(rmr.window, 0, 0, 0, 0, 0); key != 0)
        rmr.window = key;
    rmr.context = 0;
}

void SoftnicPath::destroy_window(Rmr& rmr)
{
    device_->memory().remove(rmr.window);
}

DAT_RETURN SoftnicPath::create_completions(Evd& evd)
{
    auto c = std::make_unique<SoftnicCompletions>();
    c->device = device_.get();
    c->eps = eps_.get();
    c->cq = device_->create_cq(static_cast<std::uint32_t>(evd.qlen));
    if (!c->cq)
        return error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEVD);
    c->view.init(c->cq->descriptor());
    evd.completions = c.release();
    static_cast<SoftnicCompletions*>(evd.completions)->cq->set_notify(&completions_notified, &evd, &evd.notify_interest);
    return DAT_SUCCESS;
}

DAT_RETURN SoftnicPath::resize_completions(Evd& evd, DAT_COUNT qlen)
{
    auto* c = static_cast<SoftnicCompletions*>(evd.completions);
    // Outside the EVD's lock: the software NIC takes its own, then notifies
    // EVDs (which takes theirs).
    if (!device_->resize_cq(c->cq, static_cast<std::uint32_t>(qlen)))
        return error(DAT_INVALID_STATE); // completions arrived meanwhile and would not fit
    std::lock_guard lock(evd.mutex);
    c->view.init(c->cq->descriptor());
    return DAT_SUCCESS;
}

void SoftnicPath::destroy_completions(Evd& evd)
{
    auto* c = static_cast<SoftnicCompletions*>(evd.completions);
    device_->destroy_cq(c->cq);
    delete c;
    evd.completions = nullptr;
}

DAT_RETURN SoftnicPath::create_queues(Ep& ep)
{
    const auto max_sge =
        static_cast<std::uint32_t>(std::max(ep.srq ? 1 : ep.attr.max_recv_iov, ep.attr.max_request_iov));
    auto* request = static_cast<SoftnicCompletions*>(ep.request_evd->completions);
    auto* recv = static_cast<SoftnicCompletions*>(ep.recv_evd->completions);
    softnic::Srq* srq = ep.srq ? static_cast<SoftnicSrqRing*>(ep.srq->ring)->srq : nullptr;
    softnic::Qp* qp =
        device_->create_qp(pd_of(ep.pz), request->cq, recv->cq, static_cast<std::uint32_t>(ep.attr.max_request_dtos),
                           ep.srq ? 0 : static_cast<std::uint32_t>(ep.attr.max_recv_dtos), max_sge, kMaxInline, srq);
    if (!qp)
        return error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEP);
    auto q = std::make_unique<SoftnicEpQueues>();
    q->device = device_.get();
    q->qp = qp;
    q->caller_sends = caller_sends_;
    if (ep.ud) { // a datagram queue pair on the IA's address, ready at once
        sockaddr_in local{}, bound{};
        std::memcpy(&local, &ep.ia->address, sizeof local);
        if (!device_->open_datagrams(qp, local, bound)) {
            device_->destroy_qp(qp);
            return error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEP);
        }
        q->datagram_port = ntohs(bound.sin_port);
        q->address_handles = &address_handles_;
    }
    q->send_slots.assign(qp->descriptor().sq.wqe_cnt, {});
    q->recv_cookies.assign(ep.srq ? 0 : qp->descriptor().rq.wqe_cnt, 0);
    q->sq.init({&qp->descriptor(), qp->qpn(), kMaxInline, q->send_slots.data(), fastpath::DoorbellMode::software,
                device_->doorbell()});
    if (!ep.srq)
        q->rq.init(qp->descriptor(), q->recv_cookies.data());
    qp->set_on_ended(&connection_ended, &ep);
    qp->set_on_soft_watermark(&ep_soft_watermark, &ep);
    device_->set_watermarks(qp, device_mark(ep.soft_watermark), device_mark(ep.hard_watermark)); // none taken yet
    ep.queues = q.release();
    eps_[qp->qpn() - softnic::kFirstQpn].store(&ep, std::memory_order_release);
    return DAT_SUCCESS;
}

void SoftnicPath::destroy_queues(Ep& ep)
{
    auto* q = static_cast<SoftnicEpQueues*>(ep.queues);
    softnic::Qp* qp = q->qp;
    device_->disconnect(qp); // it writes no more CQEs
    with_completions_held(&ep, [&ep, qp] {
        fastpath::clean_queue_pair(qp->qpn(), &static_cast<SoftnicCompletions*>(ep.request_evd->completions)->view,
                                   &static_cast<SoftnicCompletions*>(ep.recv_evd->completions)->view,
                                   ep.srq ? &static_cast<SoftnicSrqRing*>(ep.srq->ring)->queue : nullptr);
    });
    eps_[qp->qpn() - softnic::kFirstQpn].store(nullptr, std::memory_order_release);
    device_->destroy_qp(qp);
    delete q;
    ep.queues = nullptr;
}

bool SoftnicPath::apply_watermarks(Ep& ep)
{
    return device_->set_watermarks(static_cast<SoftnicEpQueues*>(ep.queues)->qp, device_mark(ep.soft_watermark),
                                   device_mark(ep.hard_watermark));
}

DAT_RETURN SoftnicPath::create_srq(Srq& srq)
{
    auto r = std::make_unique<SoftnicSrqRing>();
    r->device = device_.get();
    r->srq = device_->create_srq(pd_of(srq.pz), static_cast<std::uint32_t>(srq.max_recv_dtos),
                                 static_cast<std::uint32_t>(srq.max_recv_iov));
    if (!r->srq)
        return error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_SRQ);
    r->cookies.assign(r->srq->wqe_cnt(), 0);
    r->queue.init(r->srq->descriptor(), r->srq->wqe_cnt(), r->cookies.data());
    r->srq->set_callbacks(&srq_low_watermark, &srq_failed, &srq);
    srq.ring = r.release();
    return DAT_SUCCESS;
}

DAT_RETURN SoftnicPath::grow_srq(Srq& srq, DAT_COUNT qlen)
{
    auto* r = static_cast<SoftnicSrqRing*>(srq.ring);
    if (static_cast<std::uint32_t>(qlen) <= r->queue.capacity())
        return DAT_SUCCESS;
    // A larger ring, the WQEs at their indices; completions wait meanwhile.
    srq.lock_completions();
    const bool grown = device_->grow_srq(r->srq, static_cast<std::uint32_t>(qlen));
    if (grown) {
        r->cookies.resize(r->srq->wqe_cnt(), 0);
        r->queue.grow(r->srq->descriptor(), r->srq->wqe_cnt(), r->cookies.data());
    }
    srq.unlock_completions();
    return grown ? static_cast<DAT_RETURN>(DAT_SUCCESS) : error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
}

DAT_RETURN SoftnicPath::arm_srq_limit(Srq& srq, DAT_COUNT low_watermark, bool& below_now)
{
    below_now =
        device_->arm_srq_limit(static_cast<SoftnicSrqRing*>(srq.ring)->srq, static_cast<std::uint32_t>(low_watermark));
    return DAT_SUCCESS;
}

void SoftnicPath::destroy_srq(Srq& srq)
{
    auto* r = static_cast<SoftnicSrqRing*>(srq.ring);
    device_->destroy_srq(r->srq);
    delete r;
    srq.ring = nullptr;
}

} // namespace fastdapl::core
