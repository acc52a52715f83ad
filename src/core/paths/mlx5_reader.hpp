// One reader of CQs in the mlx5 layout, for the softnic's CQs and an mlx5
// device's (the direct path). They differ in how a CQE's queue pair number
// finds its EP, in which engine holds the EP's queues, and in who ends a
// connection a CQE shows broken: the `Kind` traits say (softnic.hpp, mlx5.hpp).
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#pragma once

#include "../ep.hpp"
#include "../evd.hpp"
#include "../extensions.hpp"
#include "../rmr.hpp"
#include "queues.hpp" // fastpath

#include <cstdio>

namespace fastdapl::core {

// A UD endpoint's datagram send on the softnic (softnic::kDatagramSendOpcode,
// mlx5's LSO number): its own entry below.
inline constexpr std::uint8_t kDatagramSendOpcode = 0x0e;

// The DAT operation of a request by its slot's opcode (mlx5's, 6 bits):
// one load. The IB extensions' requests and the memory-window binds (the
// NOP that reports one; on the mlx5 direct path a fenced NOP behind the
// unsignalled UMR WQEs that bind) are at kExtendedOperationBase or above:
// one test finds them all.
inline constexpr struct OperationTable {
    std::uint32_t of[64];
    constexpr OperationTable() : of{}
    {
        for (auto& o : of)
            o = DAT_DTO_SEND;
        of[MLX5_OPCODE_RDMA_WRITE] = DAT_DTO_RDMA_WRITE;
        of[MLX5_OPCODE_RDMA_WRITE_IMM] = DAT_IB_DTO_RDMA_WRITE_IMMED;
        of[MLX5_OPCODE_RDMA_READ] = DAT_DTO_RDMA_READ;
        of[MLX5_OPCODE_ATOMIC_CS] = DAT_IB_DTO_CMP_SWAP;
        of[MLX5_OPCODE_ATOMIC_FA] = DAT_IB_DTO_FETCH_ADD;
        of[MLX5_OPCODE_NOP] = kWindowBindOperation;
        of[MLX5_OPCODE_UMR] = kWindowStepOperation;
        of[kDatagramSendOpcode] = DAT_IB_DTO_SEND_UD;
    }
} kOperationOf;
static_assert(MLX5_OPCODE_UMR < 64);

inline std::uint32_t operation_of(std::uint8_t mlx5_opcode)
{
    return kOperationOf.of[mlx5_opcode & 63];
}

// A request into a send queue in the mlx5 layout (softnic or mlx5 device);
// the doorbell is the caller's. False when the queue is full. `imm`: the
// control segment's 32 bits besides (immediate data, or the key a send
// invalidates), stored as given.
[[gnu::always_inline]] inline bool write_request(fastpath::SendQueue& sq, std::uint8_t opcode, DAT_COUNT n,
                                                 const DAT_LMR_TRIPLET* iov, std::uint32_t total, std::uint64_t cookie,
                                                 const DAT_RMR_TRIPLET* remote, std::uint8_t ctrl_flags,
                                                 std::uint32_t imm = 0)
{
    fastpath::RemoteAddress ra{};
    if (remote)
        ra = {remote->virtual_address, remote->rmr_context};
    return sq.post(opcode, reinterpret_cast<const fastpath::Sge*>(iov), static_cast<std::uint32_t>(n), total,
                   remote ? &ra : nullptr, imm, ctrl_flags, cookie);
}

// An 8-byte compare and swap or fetch and add into such a queue; the
// doorbell is the caller's. False when the queue is full.
inline bool write_atomic(fastpath::SendQueue& sq, std::uint8_t opcode, const DAT_LMR_TRIPLET& local,
                         const DAT_RMR_TRIPLET& remote, std::uint64_t swap_add, std::uint64_t compare,
                         std::uint64_t cookie, std::uint8_t ctrl_flags)
{
    const fastpath::RemoteAddress ra{remote.virtual_address, remote.rmr_context};
    return sq.post_atomic(opcode, *reinterpret_cast<const fastpath::Sge*>(&local), ra, swap_add, compare, ctrl_flags,
                          cookie);
}

// `have` plus the CQEs ready in `view`, up to `limit` (none consumed).
inline DAT_COUNT count_ready(const fastpath::CompletionQueue& view, DAT_COUNT have, DAT_COUNT limit)
{
    for (std::uint32_t k = 0; have < limit && view.ready_at(k); ++k)
        ++have;
    return have;
}

inline bool is_receive_cqe(std::uint8_t opcode)
{
    return opcode == MLX5_CQE_RESP_SEND || opcode == MLX5_CQE_RESP_SEND_IMM || opcode == MLX5_CQE_RESP_SEND_INV ||
           opcode == MLX5_CQE_RESP_WR_IMM || opcode == MLX5_CQE_RESP_ERR;
}

// Turns the next CQE of `view` into an event (the EVD's lock held). False
// when there is none. `Kind` provides: `Queues` (the EP engine type with sq
// and rq), `find(completions, qpn)`, `srq_queue(Srq*)`, `kDirect` (a real
// device: CQEs may be of kinds never asked for, and the reaper ends a
// broken connection), `receive_reaped(queues)` and `reaped(...)`;
// `kDatagrams` (UD endpoints exist) and then `mark_datagram(e, ep, cqe)`.
template <class Kind, class Completions>
[[gnu::always_inline]] inline bool take_mlx5_completion(Evd* evd, Completions& c, DAT_EVENT& e)
{
    fastpath::CompletionQueue& view = c.view;
    for (;;) {
        const mlx5_cqe64* cqe = view.peek();
        if (!cqe)
            return false;
        const std::uint8_t opcode = fastpath::CompletionQueue::opcode(cqe);
        const std::uint32_t qpn = be32toh(cqe->sop_drop_qpn) & 0xffffff;
        const std::uint16_t counter = be16toh(cqe->wqe_counter);
        Ep* ep = Kind::find(c, qpn);
        const bool request = opcode == MLX5_CQE_REQ || opcode == MLX5_CQE_REQ_ERR;
        // One test for the common case: a plain success (opcodes up to
        // RESP_SEND_INV are completions; resize and no-packet are not).
        // The softnic writes no other kinds of CQE than it is asked for.
        const bool attention = fastpath::CompletionQueue::needs_attention(cqe);
        const bool known = !Kind::kDirect || (attention ? !fastpath::CompletionQueue::is_compressed(cqe) &&
                                                              (request || is_receive_cqe(opcode))
                                                        : opcode <= MLX5_CQE_RESP_SEND_INV);
        // Its EP is gone (or a cleaned CQE), or a CQE we never ask for
        // (compressed, resize): nothing to report it to.
        if (!ep || !known) [[unlikely]] {
            if (ep && g_debug)
                std::fprintf(stderr, "fastdapl: CQE with opcode %u, format %d on qp %u skipped\n", opcode,
                             static_cast<int>(fastpath::CompletionQueue::format(cqe)), qpn);
            view.consume();
            view.publish_consumer_index();
            continue;
        }
        auto* q = static_cast<typename Kind::Queues*>(ep->queues);
        auto& d = begin_dto_event(e, evd, ep);
        d.status = attention ? fastpath::CompletionQueue::status(cqe) : DAT_DTO_SUCCESS;
        if (request) {
            const fastpath::SendSlot& slot = q->sq.slot(counter);
            const std::uint32_t operation = operation_of(slot.opcode);
            if (operation >= kExtendedOperationBase) [[unlikely]] {
                if (operation == kWindowBindOperation) { // a memory-window bind (rmr.cpp)
                    const DAT_DTO_COMPLETION_STATUS status = d.status;
                    q->sq.retire_through(counter);
                    view.consume();
                    view.publish_consumer_index();
                    const bool report = rmr_bind_completed(ep, evd, status, e);
                    Kind::reaped(ep, *q, evd, status, true);
                    if (report)
                        return true;
                    continue;
                }
                if (operation == kWindowStepOperation) { // an unsignalled UMR, seen only in error: its NOP reports
                    const DAT_DTO_COMPLETION_STATUS status = d.status;
                    q->sq.retire_through(counter);
                    view.consume();
                    view.publish_consumer_index();
                    Kind::reaped(ep, *q, evd, status, true);
                    continue;
                }
                mark_extended_request(e, static_cast<DAT_DTOS>(operation)); // an IB extension's request: an extended event
            }
            d.user_cookie.as_64 = slot.cookie;
            d.operation = static_cast<DAT_DTOS>(operation);
            d.transfered_length = d.status == DAT_DTO_SUCCESS ? slot.length : 0;
            q->sq.retire_through(counter);
        } else {
            Srq* srq = ep->srq;
            if (attention && d.status == DAT_DTO_SUCCESS && fastpath::CompletionQueue::is_inline_scattered(cqe))
                [[unlikely]] { // data in the CQE (scatter-to-CQE, disabled, not relied on): copied out first
                if (srq) {
                    fastpath::SharedReceiveQueue& ring = Kind::srq_queue(srq);
                    d.status = view.scatter_inline(cqe, ring.segments(counter), ring.max_sge());
                } else {
                    d.status = view.scatter_inline(cqe, q->rq.segments_of_oldest(), q->rq.max_sge());
                }
            }
            if (srq) { // the CQE names the SRQ WQE; it goes back on the free list
                srq->lock_completions();
                d.user_cookie.as_64 = Kind::srq_queue(srq).complete(counter);
                srq->unlock_completions();
            } else {
                d.user_cookie.as_64 = q->rq.complete_oldest();
            }
            Kind::receive_reaped(*q);
            d.operation = DAT_DTO_RECEIVE;
            d.transfered_length = d.status == DAT_DTO_SUCCESS ? be32toh(cqe->byte_cnt) : 0;
            if constexpr (Kind::kDatagrams) { // a UD endpoint's receive names its sender
                if (ep->ud) [[unlikely]]
                    Kind::mark_datagram(e, ep, *cqe);
            }
            // RESP_WR_IMM (1) and RESP_SEND_IMM (3), the odd receive opcodes,
            // carry immediate data: an extended event. RESP_SEND_INV (4):
            // the sender invalidated one of our remote keys.
            if (opcode != MLX5_CQE_RESP_SEND) [[unlikely]] {
                if (opcode & 1)
                    mark_immediate_receive(e, ep, opcode, cqe->imm_inval_pkey);
                else if (opcode == MLX5_CQE_RESP_SEND_INV)
                    received_invalidate(ep, d, be32toh(cqe->imm_inval_pkey));
            }
        }
        // Released only now: the device may reuse the entry once it is published.
        view.consume();
        view.publish_consumer_index();
        if (attention && d.status != DAT_DTO_SUCCESS && g_debug) [[unlikely]]
            std::fprintf(stderr, "fastdapl: %s completion on qp %u: status %d, syndrome 0x%x\n",
                         request ? "request" : "receive", qpn, static_cast<int>(d.status),
                         attention ? static_cast<unsigned>(reinterpret_cast<const mlx5_err_cqe*>(cqe)->syndrome) : 0u);
        Kind::reaped(ep, *q, evd, d.status, request);
        return true;
    }
}

} // namespace fastdapl::core
