// The data path of every device kind, in one place: each EP, DTO EVD and
// SRQ carries its IA's kind (a byte) and a queue engine of that kind, and
// the functions here are the only ones that dispatch between the engines.
// A switch, not a virtual call: the compiler inlines each kind's case.
//
// The hot path of each kind, in short:
// - softnic (paths/softnic.hpp): post = WQE into the SQ ring (src/fastpath),
//   then the posting thread runs the softnic for that queue pair (small
//   messages) or wakes its engine thread; dequeue = CQE owner-bit poll of
//   the ring the softnic writes, the EP found by QP number in an array.
// - mlx5 (paths/mlx5.hpp): post = the same WQE, then doorbell record and
//   BlueFlame (or the 8-byte doorbell) on the EP's own UAR; dequeue = the
//   same CQE reader on the device's CQ, the EP found in a QPN hash table.
// - verbs (paths/verbs.hpp): post = ibv_post_send/recv/srq_recv with a
//   ring of what was posted; dequeue = ibv_poll_cq ahead into a buffer.
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#pragma once

#include "paths/mlx5.hpp"
#include "paths/softnic.hpp"
#include "paths/verbs.hpp"

#include <chrono>
#include <mutex>

namespace fastdapl::core::dp {

// A request (send, RDMA write or read; named by its mlx5 opcode) whose
// arguments are checked.
[[gnu::always_inline]] inline DAT_RETURN post_request(Ep* ep, std::uint8_t opcode, DAT_COUNT n,
                                                      const DAT_LMR_TRIPLET* iov, std::uint32_t total,
                                                      DAT_DTO_COOKIE cookie, const DAT_RMR_TRIPLET* remote,
                                                      DAT_COMPLETION_FLAGS flags)
{
    switch (ep->path) {
    case PathKind::softnic:
        return softnic_path::post_request(ep, opcode, n, iov, total, cookie.as_64, remote,
                                          fastpath::control_flags(flags));
    case PathKind::mlx5:
        return mlx5_path::post_request(ep, opcode, n, iov, total, cookie.as_64, remote, fastpath::control_flags(flags));
    case PathKind::verbs:
        break;
    }
    return verbs_path::post_request(ep, opcode, n, iov, total, cookie.as_64, remote, flags);
}

// --- extended requests (the IB extensions; extensions.cpp) ---------------------------------

// An RDMA write followed by immediate data for the peer's receive. The
// immediate travels in the request as the reference dapl puts it there:
// the value as is, not converted to network byte order (its bytes in host
// order on the wire), so that the receiving provider, ours or the
// reference's, reads back the same number.
inline DAT_RETURN post_write_immediate(Ep* ep, DAT_COUNT n, const DAT_LMR_TRIPLET* iov, std::uint32_t total,
                                       DAT_DTO_COOKIE cookie, const DAT_RMR_TRIPLET* remote, std::uint32_t imm,
                                       DAT_COMPLETION_FLAGS flags)
{
    switch (ep->path) {
    case PathKind::softnic:
        return softnic_path::post_with_immediate(ep, MLX5_OPCODE_RDMA_WRITE_IMM, n, iov, total, cookie.as_64, remote,
                                                 imm, fastpath::control_flags(flags));
    case PathKind::mlx5:
        return mlx5_path::post_with_immediate(ep, MLX5_OPCODE_RDMA_WRITE_IMM, n, iov, total, cookie.as_64, remote, imm,
                                              fastpath::control_flags(flags));
    case PathKind::verbs:
        break;
    }
    return verbs_path::post_write_immediate(ep, n, iov, total, cookie.as_64, remote, imm, flags);
}

// A send that invalidates the peer's remote key `rkey` (an RMR's context
// unbinds it; on the softnic an LMR's loses its remote rights).
inline DAT_RETURN post_send_invalidate(Ep* ep, DAT_COUNT n, const DAT_LMR_TRIPLET* iov, std::uint32_t total,
                                       DAT_DTO_COOKIE cookie, std::uint32_t rkey, DAT_COMPLETION_FLAGS flags)
{
    switch (ep->path) {
    case PathKind::softnic:
        return softnic_path::post_with_immediate(ep, MLX5_OPCODE_SEND_INVAL, n, iov, total, cookie.as_64, nullptr,
                                                 htobe32(rkey), fastpath::control_flags(flags));
    case PathKind::mlx5:
        return mlx5_path::post_send_invalidate(ep, n, iov, total, cookie.as_64, rkey, fastpath::control_flags(flags));
    case PathKind::verbs:
        break;
    }
    return verbs_path::post_send_invalidate(ep, n, iov, total, cookie.as_64, rkey, flags);
}

// An 8-byte compare and swap (`compare_swap`) or fetch and add.
inline DAT_RETURN post_atomic(Ep* ep, bool compare_swap, const DAT_LMR_TRIPLET& local, const DAT_RMR_TRIPLET& remote,
                              std::uint64_t swap_add, std::uint64_t compare, DAT_DTO_COOKIE cookie,
                              DAT_COMPLETION_FLAGS flags)
{
    const std::uint8_t opcode = compare_swap ? MLX5_OPCODE_ATOMIC_CS : MLX5_OPCODE_ATOMIC_FA;
    switch (ep->path) {
    case PathKind::softnic:
        return softnic_path::post_atomic(ep, opcode, local, remote, swap_add, compare, cookie.as_64,
                                         fastpath::control_flags(flags));
    case PathKind::mlx5:
        return mlx5_path::post_atomic(ep, opcode, local, remote, swap_add, compare, cookie.as_64,
                                      fastpath::control_flags(flags));
    case PathKind::verbs:
        break;
    }
    return verbs_path::post_atomic(ep, compare_swap, local, remote, swap_add, compare, cookie.as_64, flags);
}

// One datagram of a UD endpoint to the peer address handle `ah` names
// (checked by the engine: a handle it did not make is refused, not read),
// queue pair `qpn`.
inline DAT_RETURN post_datagram(Ep* ep, DAT_COUNT n, const DAT_LMR_TRIPLET* iov, std::uint32_t total,
                                DAT_DTO_COOKIE cookie, const void* ah, std::uint32_t qpn, DAT_COMPLETION_FLAGS flags)
{
    switch (ep->path) {
    case PathKind::softnic:
        return softnic_path::post_datagram(ep, n, iov, total, cookie.as_64, ah, qpn, fastpath::control_flags(flags));
    case PathKind::verbs:
        return verbs_path::post_datagram(ep, n, iov, total, cookie.as_64, ah, qpn, flags);
    case PathKind::mlx5:
        return mlx5_path::post_datagram(ep, n, iov, total, cookie.as_64, ah, qpn, fastpath::control_flags(flags));
    }
    return error(DAT_MODEL_NOT_SUPPORTED);
}

inline DAT_RETURN post_recv(Ep* ep, DAT_COUNT n, const DAT_LMR_TRIPLET* iov, DAT_DTO_COOKIE cookie)
{
    switch (ep->path) {
    case PathKind::softnic:
        return softnic_path::post_recv(ep, n, iov, cookie.as_64);
    case PathKind::mlx5:
        return mlx5_path::post_recv(ep, n, iov, cookie.as_64);
    case PathKind::verbs:
        break;
    }
    return verbs_path::post_recv(ep, n, iov, cookie.as_64);
}

[[gnu::always_inline]] inline DAT_RETURN srq_post(Srq* srq, DAT_COUNT n, const DAT_LMR_TRIPLET* iov,
                                                  DAT_DTO_COOKIE cookie)
{
    switch (srq->path) {
    case PathKind::softnic:
        return softnic_path::srq_post(srq, n, iov, cookie.as_64);
    case PathKind::mlx5:
        return mlx5_path::srq_post(srq, n, iov, cookie.as_64);
    case PathKind::verbs:
        break;
    }
    return verbs_path::srq_post(srq, n, iov, cookie.as_64);
}

// The next completion of a DTO EVD as an event (its lock held).
[[gnu::always_inline]] inline bool take_completion(Evd* evd, DAT_EVENT& e)
{
    switch (evd->path) {
    case PathKind::softnic:
        return softnic_path::take_completion(evd, e);
    case PathKind::mlx5:
        return mlx5_path::take_completion(evd, e);
    case PathKind::verbs:
        break;
    }
    return verbs_path::take_completion(evd, e);
}

// `have` events counted so far, plus the completions ready, up to `limit`.
inline DAT_COUNT ready_completions(Evd* evd, DAT_COUNT have, DAT_COUNT limit)
{
    switch (evd->path) {
    case PathKind::softnic:
        return softnic_path::ready_completions(evd, have, limit);
    case PathKind::mlx5:
        return mlx5_path::ready_completions(evd, have, limit);
    case PathKind::verbs:
        break;
    }
    return verbs_path::ready_completions(evd, have, limit);
}

// --- waiting ------------------------------------------------------------------------------

// A round of the device's progress before a waiter sleeps (the EVD's lock
// released around it): the softnic moves in the caller's thread.
inline bool progress(Evd* evd, std::unique_lock<SpinLock>& lock)
{
    if (evd->path != PathKind::softnic)
        return false;
    lock.unlock();
    softnic_path::progress(evd, false);
    lock.lock();
    return true;
}

// Whether the consumer's thread moves the device (the softnic): a poll
// that finds nothing runs poll_device, without the EVD's lock.
inline bool polls_device(const Evd* evd)
{
    return evd->path == PathKind::softnic;
}

// One look or round of the device for a busy poll (polls_device): false
// when it found nothing to do (no completion can have come of it).
inline bool poll_device(Evd* evd)
{
    return softnic_path::progress(evd, true);
}

// A consumer entered dat_evd_wait: the softnic stripes large writes over a
// lane only while a side busy-polls (README, "Lanes").
inline void consumer_waits(Evd* evd)
{
    if (evd->path == PathKind::softnic)
        softnic_path::consumer_waits(evd);
}

// A waiter that polled the device (progress) goes to sleep: the softnic's
// engine thread takes the sockets back at once.
inline void consumer_sleeps(Evd* evd)
{
    if (evd->path == PathKind::softnic)
        softnic_path::consumer_sleeps(evd);
}

// Whether the waiter sleeps on the device's file descriptors (verbs kinds)
// rather than the EVD's condition variable (softnic: its notification
// wakes it).
inline bool sleeps_on_fd(const Evd* evd)
{
    return evd->path != PathKind::softnic;
}

// Arms the CQ so that a completion after this wakes the fd sleeper.
inline void arm(Evd* evd)
{
    verbs_wait::arm(evd);
}

// Sleeps on the fds (sleeps_on_fd): false when the deadline passed.
inline bool sleep_on_fd(Evd* evd, std::unique_lock<SpinLock>& lock,
                        const std::chrono::steady_clock::time_point* deadline)
{
    return verbs_wait::sleep(evd, lock, deadline);
}

// Wakes a waiter sleeping on the fds (the EVD's lock held).
inline void wake_fd_sleeper(Evd* evd)
{
    if (evd->path != PathKind::softnic)
        verbs_wait::wake(evd);
}

// --- what the queues hold -----------------------------------------------------------------

// Every posted request has completed (and been reaped).
inline bool requests_done(const Ep* ep)
{
    switch (ep->path) {
    case PathKind::softnic:
        return softnic_path::requests_done(ep);
    case PathKind::mlx5:
        return mlx5_path::requests_done(ep);
    case PathKind::verbs:
        break;
    }
    return verbs_path::requests_done(ep);
}

// Receives of the EP's own queue posted and not yet reaped.
inline std::uint32_t receives_outstanding(const Ep* ep)
{
    switch (ep->path) {
    case PathKind::softnic:
        return softnic_path::receives_outstanding(ep);
    case PathKind::mlx5:
        return mlx5_path::receives_outstanding(ep);
    case PathKind::verbs:
        break;
    }
    return verbs_path::receives_outstanding(ep);
}

// Receive buffers allocated to the EP whose completion is not generated
// yet (dat_ep_recv_query). A verbs device shows no more than what is not
// reaped yet, and not which SRQ buffers an EP took (0 then).
inline DAT_COUNT receives_allocated(const Ep* ep)
{
    if (ep->path == PathKind::softnic)
        return softnic_path::receives_allocated(ep);
    return ep->srq ? 0 : static_cast<DAT_COUNT>(receives_outstanding(ep));
}

// An EP's receives are all done (an SRQ endpoint: every buffer it took).
inline bool receives_idle(const Ep* ep)
{
    if (ep->srq) // a verbs device does not show what an endpoint took
        return ep->path != PathKind::softnic || softnic_path::receives_allocated(ep) == 0;
    return receives_outstanding(ep) == 0;
}

// Posted to the SRQ and not yet reaped.
inline DAT_COUNT srq_outstanding(const Srq* srq)
{
    switch (srq->path) {
    case PathKind::softnic:
        return softnic_path::srq_outstanding(srq);
    case PathKind::mlx5:
        return mlx5_path::srq_outstanding(srq);
    case PathKind::verbs:
        break;
    }
    return verbs_path::srq_outstanding(srq);
}

// Buffers still on the SRQ: posted, not yet taken by an endpoint. A verbs
// device does not show when it takes one: there a buffer counts as taken
// when its completion is reaped.
inline DAT_COUNT srq_available(const Srq* srq)
{
    if (srq->path == PathKind::softnic)
        return softnic_path::srq_available(srq);
    return srq_outstanding(srq);
}

// Receives of `srq` completed in `evd` and not yet reaped (`evd`'s lock
// held); verbs kinds only (the softnic counts takes itself).
inline DAT_COUNT srq_arrived(Evd* evd, const Srq* srq)
{
    switch (evd->path) {
    case PathKind::softnic:
        return 0;
    case PathKind::mlx5:
        return mlx5_path::srq_arrived(evd, srq);
    case PathKind::verbs:
        break;
    }
    return verbs_path::srq_arrived(evd, srq);
}

inline bool srq_failed(const Srq* srq)
{
    if (srq->path == PathKind::softnic)
        return softnic_path::srq_failed(srq);
    return static_cast<const VerbsSrqBase*>(srq->ring)->failed.load();
}

} // namespace fastdapl::core::dp
