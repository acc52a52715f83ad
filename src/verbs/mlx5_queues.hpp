// From rdma-core objects to the mlx5 fast path: creating CQs and RC QPs the
// fast path can drive directly (mlx5dv), and handing their queues over to
// fastpath::SendQueue / RecvQueue / SharedReceiveQueue / CompletionQueue.
// Built only where <infiniband/mlx5dv.h> and libmlx5 are present.
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#pragma once

#include "queues.hpp"

#include <infiniband/mlx5dv.h>
#include <infiniband/verbs.h>

#include <cstdint>
#include <vector>

namespace fastdapl::verbs {

// A thread domain and the parent domain over it, so that QPs created on
// `parent_pd` get a BlueFlame register (bfreg) of their own.
//
// Why: by default rdma-core hands out a handful of bfregs shared by many QPs
// (16 UUARs, 4 of them low-latency) and serializes doorbells on a shared
// one with a lock inside its post path. Direct posting (fastpath::SendQueue)
// never takes that lock, so two QPs ringing a shared bfreg at once can
// interleave their 64-bit/BlueFlame stores and corrupt each other's
// doorbell (libxlio PR #123: corruption past 16 QPs). A thread domain gets
// a dedicated, lock-free bfreg (rdma-core mlx5_alloc_td).
//
// The bfreg belongs to the TD, not to one QP: every QP on the same
// parent_pd shares it, and each SendQueue keeps its own BlueFlame half
// offset. For a register private to a queue (what SendQueue assumes), make
// one Mlx5Resources per QP; with one per IA, all the IA's posts must come
// from one thread at a time.
//
// If no TD can be had (old kernel or device without dynamic UARs),
// dedicated_doorbell is false, parent_pd is the plain PD, and the caller
// must serialize every ring() of every QP of the context with one lock.
struct Mlx5Resources {
    ibv_td* td = nullptr;
    ibv_pd* parent_pd = nullptr; // a parent domain over (pd, td), or pd itself
    bool dedicated_doorbell = false;
};

// Never fails: without a TD it falls back to `pd` (dedicated_doorbell false).
Mlx5Resources create_mlx5_resources(ibv_context* context, ibv_pd* pd);
void destroy_mlx5_resources(Mlx5Resources& r); // after every QP on parent_pd is gone

// A CQ for the fast path (mlx5dv_create_cq). It is created WITHOUT
// IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN: fastpath::CompletionQueue publishes the
// consumer index (SET_CI) on every poll, so the device always knows how
// much room is left and an overrun is a real error. (Skipping SET_CI, as
// UCX does, would need ignore-overrun plus credits bounding outstanding
// CQEs.) After init_cq the CQ is DV-owned: poll and arm it only through the
// CompletionQueue, never ibv_poll_cq / ibv_req_notify_cq.
ibv_cq* create_cq(ibv_context* context, int cqe, ibv_comp_channel* channel, void* cq_context);

// An RC or UD (`type`) QP (mlx5dv_create_qp) on `parent_pd` (Mlx5Resources) with
// scatter-to-CQE disabled, so received data is always in the receive
// buffers (the poll still handles inline-scattered CQEs: CompletionQueue::
// scatter_inline). `actual`, if given, receives the capabilities the device
// granted (max_inline_data is what init_send_queue needs).
ibv_qp* create_direct_qp(ibv_context* context, ibv_qp_type type, ibv_pd* parent_pd, ibv_cq* send_cq, ibv_cq* recv_cq,
                         ibv_srq* srq, const ibv_qp_cap& cap, ibv_qp_cap* actual = nullptr);

// Queue sizes a caller needs before init_*: send basic blocks (the number
// of SendSlots) and receive WQEs (cookies); 0 when mlx5dv_init_obj fails.
struct QpQueueSizes {
    std::uint32_t sq_bbs = 0;
    std::uint32_t rq_wqes = 0; // 0 with an SRQ
};
QpQueueSizes qp_queue_sizes(ibv_qp* qp);

// Hand-offs. Each checks what the fast path assumes and returns false
// (nothing initialized) when the object does not fit it.
// Send queue: 64-byte stride, power-of-two size; bf.size 0 => 8-byte UAR
// doorbell, else BlueFlame. `slots` has qp_queue_sizes(qp).sq_bbs entries;
// `max_inline` is the granted max_inline_data (mlx5dv does not report it).
bool init_send_queue(ibv_qp* qp, fastpath::SendQueue& sq, fastpath::SendSlot* slots, std::uint32_t max_inline);
// Receive queue of a QP without SRQ; `cookies` has rq_wqes entries.
bool init_recv_queue(ibv_qp* qp, fastpath::RecvQueue& rq, std::uint64_t* cookies);
// 64- or 128-byte CQEs, power-of-two count; takes the CQ's UAR and number
// for arming.
bool init_cq(ibv_cq* cq, fastpath::CompletionQueue& view);
// An SRQ nothing was posted to through verbs: its free list is adopted as
// rdma-core linked it (rdma-core may allocate more WQEs than asked and keep
// some off the list; only the list is used), the post counter continues
// from the doorbell record. `cookies` is sized here. Never mix with
// ibv_post_srq_recv afterwards.
bool init_srq(ibv_srq* srq, fastpath::SharedReceiveQueue& queue, std::vector<std::uint64_t>& cookies);

// Before ibv_destroy_qp on a QP whose CQs are DV-owned (rdma-core then
// skips its own CQ clean): moves the QP to RESET, so the device writes no
// more CQEs for it, then neutralizes its CQEs still in the CQs, giving
// their WQEs back to the SRQ if it has one. The caller holds whatever
// serializes polling of those CQs and completions of that SRQ. `send_cq`
// and `recv_cq` may be the same; `srq` may be null. False if the QP could
// not be reset (nothing cleaned then).
bool clean_qp_before_destroy(ibv_qp* qp, fastpath::CompletionQueue* send_cq, fastpath::CompletionQueue* recv_cq,
                             fastpath::SharedReceiveQueue* srq);

} // namespace fastdapl::verbs
