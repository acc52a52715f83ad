// Posting to an endpoint: what uDAPL asks to be checked (handle, EP state,
// IOV count, flags, length), then the queue engine of the EP's device kind
// (data_path.hpp).
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#include "api.hpp"
#include "data_path.hpp"
#include "ep.hpp"

namespace fastdapl::core {

namespace {

constexpr DAT_COMPLETION_FLAGS kPostFlags =
    static_cast<DAT_COMPLETION_FLAGS>(DAT_COMPLETION_SUPPRESS_FLAG | DAT_COMPLETION_SOLICITED_WAIT_FLAG |
                                      DAT_COMPLETION_UNSIGNALLED_FLAG | DAT_COMPLETION_BARRIER_FENCE_FLAG);

// Requests may be posted when connected, and when disconnected (they are
// flushed at once) if the queues exist.
[[gnu::noinline]] DAT_RETURN request_state_error(Ep* ep)
{
    if (ep->ud) // never connected: sends are dat_ib_post_send_ud's, RDMA has no UD form
        return error(DAT_MODEL_NOT_SUPPORTED);
    const DAT_EP_STATE s = ep->state.load(std::memory_order_relaxed);
    if (s == DAT_EP_STATE_CONNECTED || s == DAT_EP_STATE_DISCONNECTED)
        return ep->queues ? static_cast<DAT_RETURN>(DAT_SUCCESS)
                          : error(DAT_INVALID_STATE, DAT_INVALID_STATE_EP_DISCONNECTED);
    return error(DAT_INVALID_STATE, ep_state_subtype(s));
}

[[gnu::noinline]] DAT_RETURN request_argument_error(DAT_COUNT n, DAT_COUNT max_iov)
{
    return error(DAT_INVALID_PARAMETER, n < 0 || n > max_iov ? DAT_INVALID_ARG2 : DAT_INVALID_ARG5);
}

// The checks every request takes, then `post(total)`: the request to the
// EP's queue engine.
template <class Post>
[[gnu::always_inline]] inline DAT_RETURN post_checked(Ep* ep, DAT_COUNT n, const DAT_LMR_TRIPLET* iov,
                                                      const DAT_RMR_TRIPLET* remote, DAT_COMPLETION_FLAGS flags,
                                                      DAT_COUNT max_iov, Post post)
{
    if (ep->state.load(std::memory_order_relaxed) != DAT_EP_STATE_CONNECTED) [[unlikely]] {
        if (DAT_RETURN rc = request_state_error(ep); rc != DAT_SUCCESS)
            return rc;
    }
    // UNSIGNALLED only on an EP whose request stream was set up for it (spec 6.8.1).
    const bool unsignalled_refused = (flags & DAT_COMPLETION_UNSIGNALLED_FLAG) &&
                                     !(ep->attr.request_completion_flags & DAT_COMPLETION_UNSIGNALLED_FLAG);
    if (static_cast<std::uint32_t>(n) > static_cast<std::uint32_t>(max_iov) || (n > 0 && !iov) ||
        (flags & ~kPostFlags) || unsignalled_refused) [[unlikely]]
        return request_argument_error(n, max_iov);
    std::uint64_t total = iov ? iov[0].segment_length : 0;
    for (DAT_COUNT i = 1; i < n; ++i)
        total += iov[i].segment_length;
    if (n == 0)
        total = 0;
    // Sends are held to the EP's max_message_size. RDMA is held to the
    // device's limit only: the reference does the same, and its dtest
    // writes more than the max_rdma_size it asks for. The bytes moved are
    // the local list's; the remote range is checked by the target against
    // its registration (an access error, not ours).
    const std::uint64_t limit = remote ? kMaxMessageSize : ep->attr.max_message_size;
    if (total > limit) [[unlikely]]
        return error(DAT_LENGTH_ERROR);
    return post(static_cast<std::uint32_t>(total));
}

[[gnu::always_inline]] inline DAT_RETURN post_request(Ep* ep, std::uint8_t opcode, DAT_COUNT n,
                                                      const DAT_LMR_TRIPLET* iov, DAT_DTO_COOKIE cookie,
                                                      const DAT_RMR_TRIPLET* remote, DAT_COMPLETION_FLAGS flags,
                                                      DAT_COUNT max_iov)
{
    return post_checked(ep, n, iov, remote, flags, max_iov, [&](std::uint32_t total) __attribute__((always_inline)) {
        return dp::post_request(ep, opcode, n, iov, total, cookie, remote, flags);
    });
}

} // namespace

DAT_RETURN ep_post_send(DAT_EP_HANDLE handle, DAT_COUNT n, DAT_LMR_TRIPLET* iov, DAT_DTO_COOKIE cookie,
                        DAT_COMPLETION_FLAGS flags)
{
    Ep* ep = from_handle<Ep>(handle);
    if (!ep) [[unlikely]]
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EP);
    return post_request(ep, MLX5_OPCODE_SEND, n, iov, cookie, nullptr, flags, ep->attr.max_request_iov);
}

namespace {

// RDMA write and read differ only in their opcode and IOV limit.
template <std::uint8_t Opcode, DAT_COUNT DAT_EP_ATTR::*MaxIov>
DAT_RETURN post_rdma(DAT_EP_HANDLE handle, DAT_COUNT n, DAT_LMR_TRIPLET* iov, DAT_DTO_COOKIE cookie,
                     const DAT_RMR_TRIPLET* remote, DAT_COMPLETION_FLAGS flags)
{
    Ep* ep = from_handle<Ep>(handle);
    if (!ep) [[unlikely]]
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EP);
    if (!remote) [[unlikely]]
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG5);
    return post_request(ep, Opcode, n, iov, cookie, remote, flags, ep->attr.*MaxIov);
}

} // namespace

DAT_RETURN ep_post_rdma_write(DAT_EP_HANDLE handle, DAT_COUNT n, DAT_LMR_TRIPLET* iov, DAT_DTO_COOKIE cookie,
                              const DAT_RMR_TRIPLET* remote, DAT_COMPLETION_FLAGS flags)
{
    return post_rdma<MLX5_OPCODE_RDMA_WRITE, &DAT_EP_ATTR::max_rdma_write_iov>(handle, n, iov, cookie, remote, flags);
}

DAT_RETURN ep_post_rdma_read(DAT_EP_HANDLE handle, DAT_COUNT n, DAT_LMR_TRIPLET* iov, DAT_DTO_COOKIE cookie,
                             const DAT_RMR_TRIPLET* remote, DAT_COMPLETION_FLAGS flags)
{
    return post_rdma<MLX5_OPCODE_RDMA_READ, &DAT_EP_ATTR::max_rdma_read_iov>(handle, n, iov, cookie, remote, flags);
}

DAT_RETURN ep_post_recv(DAT_EP_HANDLE handle, DAT_COUNT n, DAT_LMR_TRIPLET* iov, DAT_DTO_COOKIE cookie,
                        DAT_COMPLETION_FLAGS flags)
{
    Ep* ep = from_handle<Ep>(handle);
    if (!ep) [[unlikely]]
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EP);
    if (ep->srq) [[unlikely]] // its receives come from the SRQ (dat_srq_post_recv)
        return error(DAT_INVALID_STATE, DAT_INVALID_STATE_EP_NOTREADY);
    if (n < 0 || n > ep->attr.max_recv_iov || (n > 0 && !iov) || (flags & DAT_COMPLETION_SUPPRESS_FLAG) ||
        (flags & ~kPostFlags) ||
        ((flags & DAT_COMPLETION_UNSIGNALLED_FLAG) &&
         !(ep->attr.recv_completion_flags & DAT_COMPLETION_UNSIGNALLED_FLAG))) [[unlikely]]
        return error(DAT_INVALID_PARAMETER, n < 0 || n > ep->attr.max_recv_iov ? DAT_INVALID_ARG2 : DAT_INVALID_ARG5);
    if (!ep->queues) [[unlikely]] {
        if (DAT_RETURN rc = ensure_queues(ep); rc != DAT_SUCCESS)
            return rc;
    }
    return dp::post_recv(ep, n, iov, cookie);
}

DAT_RETURN ep_post_send_with_invalidate(DAT_EP_HANDLE handle, DAT_COUNT n, DAT_LMR_TRIPLET* iov, DAT_DTO_COOKIE cookie,
                                        DAT_COMPLETION_FLAGS flags, DAT_BOOLEAN invalidate, DAT_RMR_CONTEXT rkey)
{
    Ep* ep = from_handle<Ep>(handle);
    if (!ep)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EP);
    if (!invalidate) // the context is ignored: a plain send
        return post_request(ep, MLX5_OPCODE_SEND, n, iov, cookie, nullptr, flags, ep->attr.max_request_iov);
    return post_checked(ep, n, iov, nullptr, flags, ep->attr.max_request_iov, [&](std::uint32_t total) {
        return dp::post_send_invalidate(ep, n, iov, total, cookie, rkey, flags);
    });
}

} // namespace fastdapl::core
