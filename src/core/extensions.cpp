// The IB extensions (dat_ib_extensions.h) on IAs whose device offers them
// (every kind; atomics where the device has them): RDMA write with
// immediate data, 8-byte compare and swap and fetch and add, and counters;
// UD endpoints where the device kind has them (softnic). Reached through dat_extension_op and the
// provider table's handle_extendedop_func; never on the DTO fast path.
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#include "extensions.hpp"

#include "api.hpp"
#include "data_path.hpp"
#include "ep.hpp"
#include "evd.hpp"
#include "ia.hpp"

#include <cstdio>
#include <cstring>

namespace fastdapl::core {

static_assert(sizeof(DAT_IB_EXTENSION_EVENT_DATA) <= sizeof(DAT_EVENT::event_extension_data));
static_assert(static_cast<int>(DAT_IB_DTO_RDMA_WRITE_IMMED) == static_cast<int>(kExtendedOperationBase));

namespace {

DAT_IB_EXTENSION_EVENT_DATA& extension_data(DAT_EVENT& e)
{
    return *reinterpret_cast<DAT_IB_EXTENSION_EVENT_DATA*>(e.event_extension_data);
}

void begin_extended(DAT_EVENT& e, DAT_IB_EXT_TYPE type)
{
    e.event_number = static_cast<DAT_EVENT_NUMBER>(DAT_IB_DTO_EVENT);
    auto& x = extension_data(e);
    x = DAT_IB_EXTENSION_EVENT_DATA{};
    x.type = type;
    x.status = e.event_data.dto_completion_event_data.status == DAT_DTO_SUCCESS ? DAT_OP_SUCCESS : DAT_IB_OP_ERR;
}

constexpr DAT_COMPLETION_FLAGS kPostFlags =
    static_cast<DAT_COMPLETION_FLAGS>(DAT_COMPLETION_SUPPRESS_FLAG | DAT_COMPLETION_SOLICITED_WAIT_FLAG |
                                      DAT_COMPLETION_UNSIGNALLED_FLAG | DAT_COMPLETION_BARRIER_FENCE_FLAG);

// What every extended request checks before it is posted: the EP, that its
// device runs the request (`atomic`: an 8-byte atomic, which a device may
// lack), its state and the completion flags.
DAT_RETURN check_request(Ep* ep, bool atomic, DAT_COMPLETION_FLAGS flags, DAT_RETURN_SUBTYPE flags_arg)
{
    if (!ep)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EP);
    const DevicePath& device = *ep->ia->device;
    if (!device.ib_extensions() || (atomic && !device.atomics()) || ep->ud) // no RDMA or atomics over UD
        return error(DAT_MODEL_NOT_SUPPORTED);
    const DAT_EP_STATE s = ep->state.load(std::memory_order_relaxed);
    if (s != DAT_EP_STATE_CONNECTED || !ep->queues)
        return error(DAT_INVALID_STATE, ep_state_subtype(s));
    if ((flags & ~kPostFlags) || ((flags & DAT_COMPLETION_UNSIGNALLED_FLAG) &&
                                  !(ep->attr.request_completion_flags & DAT_COMPLETION_UNSIGNALLED_FLAG)))
        return error(DAT_INVALID_PARAMETER, flags_arg);
    return DAT_SUCCESS;
}

// dat_ib_post_rdma_write_immed(ep, size, lbuf, cookie, rbuf, idata, flags)
DAT_RETURN post_write_immediate(DAT_HANDLE handle, va_list args)
{
    const DAT_COUNT n = va_arg(args, DAT_COUNT);
    const DAT_LMR_TRIPLET* iov = va_arg(args, DAT_LMR_TRIPLET*);
    const DAT_DTO_COOKIE cookie = va_arg(args, DAT_DTO_COOKIE);
    const DAT_RMR_TRIPLET* remote = va_arg(args, DAT_RMR_TRIPLET*);
    const DAT_UINT32 imm = va_arg(args, DAT_UINT32);
    const auto flags = static_cast<DAT_COMPLETION_FLAGS>(va_arg(args, int));
    Ep* ep = from_handle<Ep>(handle);
    if (DAT_RETURN rc = check_request(ep, false, flags, DAT_INVALID_ARG7); rc != DAT_SUCCESS)
        return rc;
    if (n < 0 || n > ep->attr.max_rdma_write_iov || (n > 0 && !iov))
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    if (!remote)
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG5);
    std::uint64_t total = 0;
    for (DAT_COUNT i = 0; i < n; ++i)
        total += iov[i].segment_length;
    if (total > kMaxMessageSize)
        return error(DAT_LENGTH_ERROR);
    const DAT_RETURN rc =
        dp::post_write_immediate(ep, n, iov, static_cast<std::uint32_t>(total), cookie, remote, imm, flags);
    if (rc == DAT_SUCCESS) {
        ep->ib_counters.add(DCNT_EP_POST_WRITE_IMM);
        ep->ib_counters.add(DCNT_EP_POST_WRITE_IMM_DATA, total);
    }
    return rc;
}

// dat_ib_post_cmp_and_swap(ep, cmp, swap, lbuf, cookie, rbuf, flags) and
// dat_ib_post_fetch_and_add(ep, add, lbuf, cookie, rbuf, flags)
DAT_RETURN post_atomic(DAT_HANDLE handle, bool compare_swap, va_list args)
{
    const DAT_UINT64 first = va_arg(args, DAT_UINT64);
    const DAT_UINT64 swap = compare_swap ? va_arg(args, DAT_UINT64) : 0;
    const DAT_LMR_TRIPLET* local = va_arg(args, DAT_LMR_TRIPLET*);
    const DAT_DTO_COOKIE cookie = va_arg(args, DAT_DTO_COOKIE);
    const DAT_RMR_TRIPLET* remote = va_arg(args, DAT_RMR_TRIPLET*);
    const auto flags = static_cast<DAT_COMPLETION_FLAGS>(va_arg(args, int));
    // Arguments counted as the macros pass them (the EP is the first).
    const int shift = compare_swap ? 1 : 0;
    Ep* ep = from_handle<Ep>(handle);
    if (DAT_RETURN rc = check_request(ep, true, flags, static_cast<DAT_RETURN_SUBTYPE>(DAT_INVALID_ARG6 + shift));
        rc != DAT_SUCCESS)
        return rc;
    if (!local)
        return error(DAT_INVALID_PARAMETER, static_cast<DAT_RETURN_SUBTYPE>(DAT_INVALID_ARG3 + shift));
    if (!remote)
        return error(DAT_INVALID_PARAMETER, static_cast<DAT_RETURN_SUBTYPE>(DAT_INVALID_ARG5 + shift));
    if (local->segment_length != sizeof(DAT_UINT64)) // IB atomics move exactly 8 bytes
        return error(DAT_LENGTH_ERROR);
    // compare and swap: stores `swap` where the target equals `first`;
    // fetch and add: adds `first`.
    const DAT_RETURN rc = dp::post_atomic(ep, compare_swap, *local, *remote, compare_swap ? swap : first,
                                          compare_swap ? first : 0, cookie, flags);
    if (rc == DAT_SUCCESS)
        ep->ib_counters.add(compare_swap ? DCNT_EP_POST_CMP_SWAP : DCNT_EP_POST_FETCH_ADD);
    return rc;
}

// dat_ib_post_send_ud(ep, segments, lbuf, remote_ah, cookie, flags): one
// datagram to the peer an address handle of this IA names.
DAT_RETURN post_send_datagram(DAT_HANDLE handle, va_list args)
{
    const DAT_COUNT n = va_arg(args, DAT_COUNT);
    const DAT_LMR_TRIPLET* iov = va_arg(args, DAT_LMR_TRIPLET*);
    const DAT_IB_ADDR_HANDLE* to = va_arg(args, DAT_IB_ADDR_HANDLE*);
    const DAT_DTO_COOKIE cookie = va_arg(args, DAT_DTO_COOKIE);
    const auto flags = static_cast<DAT_COMPLETION_FLAGS>(va_arg(args, int));
    Ep* ep = from_handle<Ep>(handle);
    if (!ep)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EP);
    if (!ep->ia->device->ud_endpoints())
        return error(DAT_MODEL_NOT_SUPPORTED);
    if (!ep->ud)
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG1); // an RC endpoint sends with dat_ep_post_send
    if (!ep->queues)
        return error(DAT_INVALID_STATE, ep_state_subtype(ep->state.load(std::memory_order_relaxed)));
    if ((flags & ~kPostFlags) || ((flags & DAT_COMPLETION_UNSIGNALLED_FLAG) &&
                                  !(ep->attr.request_completion_flags & DAT_COMPLETION_UNSIGNALLED_FLAG)))
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG6);
    if (n < 0 || n > ep->attr.max_request_iov || (n > 0 && !iov))
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    if (!to)
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG4);
    std::uint64_t total = 0;
    for (DAT_COUNT i = 0; i < n; ++i)
        total += iov[i].segment_length;
    if (total > static_cast<std::uint64_t>(ep->attr.max_message_size))
        return error(DAT_LENGTH_ERROR);
    const DAT_RETURN rc = dp::post_datagram(ep, n, iov, static_cast<std::uint32_t>(total), cookie, to->ah, to->qpn, flags);
    if (rc == DAT_SUCCESS) {
        ep->ib_counters.add(DCNT_EP_POST_SEND_UD);
        ep->ib_counters.add(DCNT_EP_POST_SEND_UD_DATA, total);
    }
    return rc;
}

// A UD endpoint's extended op: the EP, and that it is one.
DAT_RETURN check_ud_endpoint(Ep* ep)
{
    if (!ep)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EP);
    if (!ep->ia->device->ud_endpoints())
        return error(DAT_MODEL_NOT_SUPPORTED);
    if (!ep->ud)
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG1);
    return DAT_SUCCESS;
}

// dat_ib_ud_cm_free(ep, context): the exchange an established event named
// (its private data goes with it).
DAT_RETURN free_ud_exchange(DAT_HANDLE handle, va_list args)
{
    const DAT_CONTEXT context = va_arg(args, DAT_CONTEXT);
    Ep* ep = from_handle<Ep>(handle);
    if (DAT_RETURN rc = check_ud_endpoint(ep); rc != DAT_SUCCESS)
        return rc;
    Ia* ia = ep->ia;
    std::lock_guard lock(ia->cm_mutex);
    const auto it = ia->ud_exchanges.find(context.as_64);
    // Still under way (not reported yet), or another EP's: not the consumer's to free.
    if (it == ia->ud_exchanges.end() || it->second.ep != ep || ia->attempts.count(context.as_64))
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    ia->ud_exchanges.erase(it);
    return DAT_SUCCESS;
}

// dat_ib_ud_ah_free(ep, remote_ah): the address handle goes (sends to it
// must have completed); the peer may still send to this EP.
DAT_RETURN free_address_handle(DAT_HANDLE handle, va_list args)
{
    const DAT_IB_ADDR_HANDLE* ah = va_arg(args, DAT_IB_ADDR_HANDLE*);
    Ep* ep = from_handle<Ep>(handle);
    if (DAT_RETURN rc = check_ud_endpoint(ep); rc != DAT_SUCCESS)
        return rc;
    if (!ah || !ep->ia->device->free_address_handle(ah->ah))
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    return DAT_SUCCESS;
}

const char* const kIaCounterNames[] = {"DCNT_IA_PZ_CREATE",
                                       "DCNT_IA_PZ_FREE",
                                       "DCNT_IA_LMR_CREATE",
                                       "DCNT_IA_LMR_FREE",
                                       "DCNT_IA_RMR_CREATE",
                                       "DCNT_IA_RMR_FREE",
                                       "DCNT_IA_PSP_CREATE",
                                       "DCNT_IA_PSP_CREATE_ANY",
                                       "DCNT_IA_PSP_FREE",
                                       "DCNT_IA_RSP_CREATE",
                                       "DCNT_IA_RSP_FREE",
                                       "DCNT_IA_EVD_CREATE",
                                       "DCNT_IA_EVD_FREE",
                                       "DCNT_IA_EP_CREATE",
                                       "DCNT_IA_EP_FREE",
                                       "DCNT_IA_SRQ_CREATE",
                                       "DCNT_IA_SRQ_FREE",
                                       "DCNT_IA_SP_CR",
                                       "DCNT_IA_SP_CR_ACCEPTED",
                                       "DCNT_IA_SP_CR_REJECTED",
                                       "DCNT_IA_MEM_ALLOC",
                                       "DCNT_IA_MEM_ALLOC_DATA",
                                       "DCNT_IA_MEM_FREE",
                                       "DCNT_IA_ASYNC_ERROR",
                                       "DCNT_IA_ASYNC_QP_ERROR",
                                       "DCNT_IA_ASYNC_CQ_ERROR",
                                       "DCNT_IA_CM_LISTEN",
                                       "DCNT_IA_CM_REQ_TX",
                                       "DCNT_IA_CM_REQ_RX",
                                       "DCNT_IA_CM_REP_TX",
                                       "DCNT_IA_CM_REP_RX",
                                       "DCNT_IA_CM_RTU_TX",
                                       "DCNT_IA_CM_RTU_RX",
                                       "DCNT_IA_CM_USER_REJ_TX",
                                       "DCNT_IA_CM_USER_REJ_RX",
                                       "DCNT_IA_CM_ACTIVE_EST",
                                       "DCNT_IA_CM_PASSIVE_EST",
                                       "DCNT_IA_CM_AH_REQ_TX",
                                       "DCNT_IA_CM_AH_REQ_RX",
                                       "DCNT_IA_CM_AH_RESOLVED",
                                       "DCNT_IA_CM_DREQ_TX",
                                       "DCNT_IA_CM_DREQ_RX",
                                       "DCNT_IA_CM_DREP_TX",
                                       "DCNT_IA_CM_DREP_RX",
                                       "DCNT_IA_CM_MRA_TX",
                                       "DCNT_IA_CM_MRA_RX",
                                       "DCNT_IA_CM_REQ_FULLQ_POLL",
                                       "DCNT_IA_CM_ERR",
                                       "DCNT_IA_CM_ERR_REQ_FULLQ",
                                       "DCNT_IA_CM_ERR_REQ_DUP",
                                       "DCNT_IA_CM_ERR_REQ_RETRY",
                                       "DCNT_IA_CM_ERR_REP_DUP",
                                       "DCNT_IA_CM_ERR_REP_RETRY",
                                       "DCNT_IA_CM_ERR_RTU_DUP",
                                       "DCNT_IA_CM_ERR_RTU_RETRY",
                                       "DCNT_IA_CM_ERR_REFUSED",
                                       "DCNT_IA_CM_ERR_RESET",
                                       "DCNT_IA_CM_ERR_TIMEOUT",
                                       "DCNT_IA_CM_ERR_REJ_TX",
                                       "DCNT_IA_CM_ERR_REJ_RX",
                                       "DCNT_IA_CM_ERR_DREQ_DUP",
                                       "DCNT_IA_CM_ERR_DREQ_RETRY",
                                       "DCNT_IA_CM_ERR_DREP_DUP",
                                       "DCNT_IA_CM_ERR_DREP_RETRY",
                                       "DCNT_IA_CM_ERR_MRA_DUP",
                                       "DCNT_IA_CM_ERR_MRA_RETRY",
                                       "DCNT_IA_CM_ERR_UNEXPECTED",
                                       "DCNT_IA_LNK_ERR_RCV",
                                       "DCNT_IA_LNK_ERR_RCV_REM_PHYS",
                                       "DCNT_IA_LNK_ERR_RCV_CONSTRAINT",
                                       "DCNT_IA_LNK_ERR_XMT_DISCARDS",
                                       "DCNT_IA_LNK_ERR_XMT_CONTRAINT",
                                       "DCNT_IA_LNK_ERR_INTEGRITY",
                                       "DCNT_IA_LNK_ERR_EXC_BUF_OVERRUN",
                                       "DCNT_IA_LNK_WARN_RCV_SW_RELAY",
                                       "DCNT_IA_LNK_WARN_XMT_WAIT",
                                       "DCNT_IA_DIAG_ERR_RQ_RAE",
                                       "DCNT_IA_DIAG_ERR_RQ_OOS",
                                       "DCNT_IA_DIAG_ERR_RQ_RIRE",
                                       "DCNT_IA_DIAG_ERR_RQ_UDSDPRD",
                                       "DCNT_IA_DIAG_ERR_SQ_RAE",
                                       "DCNT_IA_DIAG_ERR_SQ_OOS",
                                       "DCNT_IA_DIAG_ERR_SQ_RIRE",
                                       "DCNT_IA_DIAG_ERR_SQ_RREE",
                                       "DCNT_IA_DIAG_ERR_SQ_TREE"};
const char* const kEpCounterNames[] = {
    "DCNT_EP_CONNECT",      "DCNT_EP_DISCONNECT",        "DCNT_EP_POST_SEND",      "DCNT_EP_POST_SEND_DATA",
    "DCNT_EP_POST_SEND_UD", "DCNT_EP_POST_SEND_UD_DATA", "DCNT_EP_POST_RECV",      "DCNT_EP_POST_RECV_DATA",
    "DCNT_EP_POST_WRITE",   "DCNT_EP_POST_WRITE_DATA",   "DCNT_EP_POST_WRITE_IMM", "DCNT_EP_POST_WRITE_IMM_DATA",
    "DCNT_EP_POST_READ",    "DCNT_EP_POST_READ_DATA",    "DCNT_EP_POST_CMP_SWAP",  "DCNT_EP_POST_FETCH_ADD",
    "DCNT_EP_RECV",         "DCNT_EP_RECV_DATA",         "DCNT_EP_RECV_UD",        "DCNT_EP_RECV_UD_DATA",
    "DCNT_EP_RECV_IMM",     "DCNT_EP_RECV_IMM_DATA",     "DCNT_EP_RECV_RDMA_IMM",  "DCNT_EP_RECV_RDMA_IMM_DATA"};
const char* const kEvdCounterNames[] = {
    "DCNT_EVD_WAIT",          "DCNT_EVD_WAIT_BLOCKED",      "DCNT_EVD_WAIT_NOTIFY",  "DCNT_EVD_DEQUEUE",
    "DCNT_EVD_DEQUEUE_FOUND", "DCNT_EVD_DEQUEUE_NOT_FOUND", "DCNT_EVD_DEQUEUE_POLL", "DCNT_EVD_DEQUEUE_POLL_FOUND",
    "DCNT_EVD_CONN_CALLBACK", "DCNT_EVD_DTO_CALLBACK"};
static_assert(std::size(kIaCounterNames) == DCNT_IA_ALL_COUNTERS);
static_assert(std::size(kEpCounterNames) == DCNT_EP_ALL_COUNTERS);
static_assert(std::size(kEvdCounterNames) == DCNT_EVD_ALL_COUNTERS);

// The counters of an IA, EP or EVD handle and their names.
struct CounterSet {
    std::atomic<std::uint64_t>* value = nullptr;
    const char* const* names = nullptr;
    int count = 0;
    const char* kind = nullptr;
};

bool counters_of(DAT_HANDLE handle, CounterSet& set)
{
    if (Ia* ia = from_handle<Ia>(handle)) {
        set = {ia->ib_counters.value, kIaCounterNames, DCNT_IA_ALL_COUNTERS, "IA"};
        return true;
    }
    if (Ep* ep = from_handle<Ep>(handle)) {
        set = {ep->ib_counters.value, kEpCounterNames, DCNT_EP_ALL_COUNTERS, "EP"};
        return true;
    }
    if (Evd* evd = from_handle<Evd>(handle)) {
        set = {evd->ib_counters.value, kEvdCounterNames, DCNT_EVD_ALL_COUNTERS, "EVD"};
        return true;
    }
    return false;
}

// dat_ib_query_counters(handle, counter, out, reset) and
// dat_ib_print_counters(handle, counter, reset): one counter, or all of
// them with the *_ALL_COUNTERS value.
DAT_RETURN counters(DAT_HANDLE handle, bool print, va_list args)
{
    const int which = va_arg(args, int);
    DAT_UINT64* out = print ? nullptr : va_arg(args, DAT_UINT64*);
    const int reset = va_arg(args, int);
    CounterSet set;
    if (!counters_of(handle, set))
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE1);
    if (which < 0 || which > set.count)
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    if (!print && !out)
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG4);
    const int first = which == set.count ? 0 : which;
    const int last = which == set.count ? set.count : which + 1;
    for (int i = first; i < last; ++i) {
        const std::uint64_t v =
            reset ? set.value[i].exchange(0, std::memory_order_relaxed) : set.value[i].load(std::memory_order_relaxed);
        if (out)
            out[i - first] = v;
        else
            std::printf("%s %p %s = %llu\n", set.kind, handle, set.names[i], static_cast<unsigned long long>(v));
    }
    if (print)
        std::fflush(stdout);
    return DAT_SUCCESS;
}

} // namespace

void mark_extended_request(DAT_EVENT& e, DAT_DTOS op)
{
    switch (static_cast<int>(op)) {
    case DAT_IB_DTO_FETCH_ADD:
        begin_extended(e, DAT_IB_FETCH_AND_ADD);
        break;
    case DAT_IB_DTO_CMP_SWAP:
        begin_extended(e, DAT_IB_CMP_AND_SWAP);
        break;
    case DAT_IB_DTO_SEND_UD:
        begin_extended(e, DAT_IB_UD_SEND);
        break;
    default:
        begin_extended(e, DAT_IB_RDMA_WRITE_IMMED);
        break;
    }
}

void mark_immediate_receive(DAT_EVENT& e, Ep* ep, std::uint8_t cqe_opcode, std::uint32_t imm)
{
    auto& d = e.event_data.dto_completion_event_data;
    const bool write = cqe_opcode == MLX5_CQE_RESP_WR_IMM;
    begin_extended(e, write ? DAT_IB_RDMA_WRITE_IMMED_DATA : DAT_IB_RECV_IMMED_DATA);
    extension_data(e).val.immed.data = imm;
    d.operation = static_cast<DAT_DTOS>(write ? DAT_IB_DTO_RECV_IMMED : DAT_IB_DTO_RECV_MSG_IMMED);
    if (d.status == DAT_DTO_SUCCESS) {
        ep->ib_counters.add(write ? DCNT_EP_RECV_RDMA_IMM : DCNT_EP_RECV_IMM);
        ep->ib_counters.add(write ? DCNT_EP_RECV_RDMA_IMM_DATA : DCNT_EP_RECV_IMM_DATA, d.transfered_length);
    }
}

void mark_datagram_receive(DAT_EVENT& e, Ep* ep, std::uint32_t src_qpn, std::uint32_t src_addr)
{
    auto& d = e.event_data.dto_completion_event_data;
    begin_extended(e, DAT_IB_UD_RECV);
    d.operation = static_cast<DAT_DTOS>(DAT_IB_DTO_RECV_UD);
    auto& x = extension_data(e);
    x.remote_ah.ah = nullptr; // a receive names its sender, it makes no handle
    x.remote_ah.qpn = src_qpn;
    sockaddr_in from{};
    from.sin_family = AF_INET;
    from.sin_addr.s_addr = src_addr;
    std::memcpy(&x.remote_ah.ia_addr, &from, sizeof from);
    if (d.status == DAT_DTO_SUCCESS) {
        ep->ib_counters.add(DCNT_EP_RECV_UD);
        ep->ib_counters.add(DCNT_EP_RECV_UD_DATA, d.transfered_length);
    }
}

void post_ud_established(Ep* ep, const UdExchange& x, std::uint64_t context, void* ah)
{
    if (!ep->connect_evd)
        return;
    DAT_EVENT e{};
    e.event_number = static_cast<DAT_EVENT_NUMBER>(DAT_IB_UD_CONNECTION_EVENT_ESTABLISHED);
    e.evd_handle = ep->connect_evd;
    auto& c = e.event_data.connect_event_data;
    c.ep_handle = ep;
    c.private_data_size = static_cast<DAT_COUNT>(x.private_data_size);
    c.private_data = x.private_data_size ? const_cast<std::uint8_t*>(x.private_data) : nullptr;
    auto& d = extension_data(e);
    d.type = x.passive ? DAT_IB_UD_PASSIVE_REMOTE_AH : DAT_IB_UD_REMOTE_AH;
    d.status = DAT_OP_SUCCESS;
    d.remote_ah.ah = static_cast<ibv_ah*>(ah);
    d.remote_ah.qpn = x.peer_qpn;
    sockaddr_in peer{};
    std::memcpy(&peer, &x.peer, sizeof peer);
    peer.sin_port = 0; // the IA address; the datagram port is the handle's
    std::memcpy(&d.remote_ah.ia_addr, &peer, sizeof peer);
    d.context.as_64 = context;
    ep->ia->ib_counters.add(x.passive ? DCNT_IA_CM_PASSIVE_EST : DCNT_IA_CM_ACTIVE_EST);
    if (!post_event(ep->connect_evd, e))
        report_overflow(ep->connect_evd);
}

void post_ud_connection_failed(Ep* ep, bool rejected, const std::uint8_t* pdata, std::uint32_t size)
{
    post_connection_event(ep,
                          static_cast<DAT_EVENT_NUMBER>(rejected ? DAT_IB_UD_CONNECTION_REJECT_EVENT
                                                                 : DAT_IB_UD_CONNECTION_ERROR_EVENT),
                          pdata, size);
}

bool ia_offers_ib_extensions(DAT_IA_HANDLE ia_handle)
{
    Ia* ia = from_handle<Ia>(ia_handle);
    return ia && ia->device->ib_extensions();
}

DAT_RETURN handle_extendedop(DAT_HANDLE handle, DAT_EXTENDED_OP op, va_list args)
{
    switch (static_cast<int>(op)) {
    case DAT_IB_RDMA_WRITE_IMMED_OP:
        return post_write_immediate(handle, args);
    case DAT_IB_CMP_AND_SWAP_OP:
        return post_atomic(handle, true, args);
    case DAT_IB_FETCH_AND_ADD_OP:
        return post_atomic(handle, false, args);
    case DAT_IB_QUERY_COUNTERS_OP:
        return counters(handle, false, args);
    case DAT_IB_PRINT_COUNTERS_OP:
        return counters(handle, true, args);
    case DAT_IB_UD_SEND_OP:
        return post_send_datagram(handle, args);
    case DAT_IB_UD_CM_FREE_OP:
        return free_ud_exchange(handle, args);
    case DAT_IB_UD_AH_FREE_OP:
        return free_address_handle(handle, args);
    case DAT_IB_START_COUNTERS_OP:
    case DAT_IB_STOP_COUNTERS_OP:
        // The sampled groups (CM, link, diagnostics) read a port's MADs;
        // no device here has them.
        return error(DAT_MODEL_NOT_SUPPORTED);
    default:
        if (op >= DAT_IB_COLLECTIVE_CREATE_MEMBER_OP && op <= DAT_IB_COLLECTIVE_BARRIER_OP)
            return error(DAT_MODEL_NOT_SUPPORTED); // no collectives
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    }
}

} // namespace fastdapl::core
