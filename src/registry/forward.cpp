// The exported dat_* entry points that route a call to the provider owning
// its first handle. Each is a check and an indirect call: they sit on the
// data path (post, dequeue, wait), so they allocate nothing and lock nothing.
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#include "registry.hpp"

#include <cstdarg>

using namespace fastdapl::registry;

namespace {

// Calls `Member` of `p` (nullptr: no registered provider owns `h`).
template <auto Member, typename... Args>
inline DAT_RETURN call_provider(const DAT_PROVIDER* p, DAT_HANDLE h, DAT_RETURN bad_handle_subtype, Args... args)
{
    if (!p) [[unlikely]]
        return dat_error(DAT_INVALID_HANDLE, bad_handle_subtype);
    const auto fn = p->*Member;
    if (!fn) [[unlikely]] // a provider built against an older dat_provider table
        return dat_error(DAT_MODEL_NOT_SUPPORTED);
    return fn(h, args...);
}

// forward() when the hinted slot does not hold the handle's table. Out of
// line, so that the common case needs no stack frame: forward() jumps here.
template <auto Member, typename... Args>
__attribute__((noinline)) DAT_RETURN forward_scan(DAT_HANDLE h, DAT_RETURN bad_handle_subtype, Args... args)
{
    return call_provider<Member>(provider_of_scan(first_word(h)), h, bad_handle_subtype, args...);
}

// Calls `Member` of the provider that owns `h`, passing `h` first: the
// table in the hinted slot is compared first, then all of them.
template <auto Member, typename... Args>
inline DAT_RETURN forward(DAT_HANDLE h, DAT_RETURN bad_handle_subtype, Args... args)
{
    if (!may_be_object(h)) [[unlikely]]
        return dat_error(DAT_INVALID_HANDLE, bad_handle_subtype);
    const DAT_PROVIDER* p = first_word(h);
    if (!is_hinted_provider(p)) [[unlikely]]
        return forward_scan<Member>(h, bad_handle_subtype, args...);
    return call_provider<Member>(p, h, bad_handle_subtype, args...);
}

// The same for calls whose first handle is an IA: the consumer holds the
// registry's tagged value, the provider wants its own pointer.
template <auto Member, typename... Args>
inline DAT_RETURN forward_ia(DAT_IA_HANDLE ia, Args... args)
{
    const DAT_IA_HANDLE real = lookup_ia(ia);
    if (!real)
        return dat_error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA);
    return forward<Member>(real, DAT_INVALID_HANDLE_IA, args...);
}

// Handles of any type: an IA handle is translated, others pass as they are.
inline DAT_HANDLE any_handle(DAT_HANDLE h)
{
    if (h && is_tagged_ia(h))
        return lookup_ia(h); // nullptr for a closed or forged IA handle
    return h;
}

} // namespace

extern "C" {

#undef dat_ia_open
// Binaries that call dat_ia_open as a function (the spec names it as one)
// get the version this library was built for.
FASTDAPL_EXPORT DAT_RETURN dat_ia_open(const DAT_NAME_PTR name, DAT_COUNT qlen, DAT_EVD_HANDLE* async_evd,
                                       DAT_IA_HANDLE* ia)
{
    return dat_ia_openv(name, qlen, async_evd, ia, DAT_VERSION_MAJOR, DAT_VERSION_MINOR, DAT_THREADSAFE);
}

FASTDAPL_EXPORT DAT_RETURN dat_ia_query(DAT_IA_HANDLE ia, DAT_EVD_HANDLE* async_evd, DAT_IA_ATTR_MASK ia_mask,
                                        DAT_IA_ATTR* ia_attr, DAT_PROVIDER_ATTR_MASK provider_mask,
                                        DAT_PROVIDER_ATTR* provider_attr)
{
    return forward_ia<&DAT_PROVIDER::ia_query_func>(ia, async_evd, ia_mask, ia_attr, provider_mask, provider_attr);
}

FASTDAPL_EXPORT DAT_RETURN dat_set_consumer_context(DAT_HANDLE h, DAT_CONTEXT context)
{
    return forward<&DAT_PROVIDER::set_consumer_context_func>(any_handle(h), DAT_INVALID_HANDLE1, context);
}

FASTDAPL_EXPORT DAT_RETURN dat_get_consumer_context(DAT_HANDLE h, DAT_CONTEXT* context)
{
    return forward<&DAT_PROVIDER::get_consumer_context_func>(any_handle(h), DAT_INVALID_HANDLE1, context);
}

FASTDAPL_EXPORT DAT_RETURN dat_get_handle_type(DAT_HANDLE h, DAT_HANDLE_TYPE* type)
{
    return forward<&DAT_PROVIDER::get_handle_type_func>(any_handle(h), DAT_INVALID_HANDLE1, type);
}

// --- CNO ---------------------------------------------------------------------

FASTDAPL_EXPORT DAT_RETURN dat_cno_create(DAT_IA_HANDLE ia, DAT_OS_WAIT_PROXY_AGENT agent, DAT_CNO_HANDLE* cno)
{
    return forward_ia<&DAT_PROVIDER::cno_create_func>(ia, agent, cno);
}

FASTDAPL_EXPORT DAT_RETURN dat_cno_fd_create(DAT_IA_HANDLE ia, DAT_FD* fd, DAT_CNO_HANDLE* cno)
{
    return forward_ia<&DAT_PROVIDER::cno_fd_create_func>(ia, fd, cno);
}

FASTDAPL_EXPORT DAT_RETURN dat_cno_modify_agent(DAT_CNO_HANDLE cno, DAT_OS_WAIT_PROXY_AGENT agent)
{
    return forward<&DAT_PROVIDER::cno_modify_agent_func>(cno, DAT_INVALID_HANDLE_CNO, agent);
}

FASTDAPL_EXPORT DAT_RETURN dat_cno_query(DAT_CNO_HANDLE cno, DAT_CNO_PARAM_MASK mask, DAT_CNO_PARAM* param)
{
    return forward<&DAT_PROVIDER::cno_query_func>(cno, DAT_INVALID_HANDLE_CNO, mask, param);
}

FASTDAPL_EXPORT DAT_RETURN dat_cno_free(DAT_CNO_HANDLE cno)
{
    return forward<&DAT_PROVIDER::cno_free_func>(cno, DAT_INVALID_HANDLE_CNO);
}

FASTDAPL_EXPORT DAT_RETURN dat_cno_wait(DAT_CNO_HANDLE cno, DAT_TIMEOUT timeout, DAT_EVD_HANDLE* evd)
{
    return forward<&DAT_PROVIDER::cno_wait_func>(cno, DAT_INVALID_HANDLE_CNO, timeout, evd);
}

FASTDAPL_EXPORT DAT_RETURN dat_cno_trigger(DAT_CNO_HANDLE cno, DAT_EVD_HANDLE* evd)
{
    return forward<&DAT_PROVIDER::cno_trigger_func>(cno, DAT_INVALID_HANDLE_CNO, evd);
}

// --- CR ----------------------------------------------------------------------

FASTDAPL_EXPORT DAT_RETURN dat_cr_query(DAT_CR_HANDLE cr, DAT_CR_PARAM_MASK mask, DAT_CR_PARAM* param)
{
    return forward<&DAT_PROVIDER::cr_query_func>(cr, DAT_INVALID_HANDLE_CR, mask, param);
}

FASTDAPL_EXPORT DAT_RETURN dat_cr_accept(DAT_CR_HANDLE cr, DAT_EP_HANDLE ep, DAT_COUNT pdata_size,
                                         const DAT_PVOID pdata)
{
    return forward<&DAT_PROVIDER::cr_accept_func>(cr, DAT_INVALID_HANDLE_CR, ep, pdata_size, pdata);
}

FASTDAPL_EXPORT DAT_RETURN dat_cr_reject(DAT_CR_HANDLE cr, DAT_COUNT pdata_size, const DAT_PVOID pdata)
{
    return forward<&DAT_PROVIDER::cr_reject_func>(cr, DAT_INVALID_HANDLE_CR, pdata_size, pdata);
}

FASTDAPL_EXPORT DAT_RETURN dat_cr_handoff(DAT_CR_HANDLE cr, DAT_CONN_QUAL qual)
{
    return forward<&DAT_PROVIDER::cr_handoff_func>(cr, DAT_INVALID_HANDLE_CR, qual);
}

// --- EVD ---------------------------------------------------------------------

FASTDAPL_EXPORT DAT_RETURN dat_evd_create(DAT_IA_HANDLE ia, DAT_COUNT qlen, DAT_CNO_HANDLE cno, DAT_EVD_FLAGS flags,
                                          DAT_EVD_HANDLE* evd)
{
    return forward_ia<&DAT_PROVIDER::evd_create_func>(ia, qlen, cno, flags, evd);
}

FASTDAPL_EXPORT DAT_RETURN dat_evd_query(DAT_EVD_HANDLE evd, DAT_EVD_PARAM_MASK mask, DAT_EVD_PARAM* param)
{
    return forward<&DAT_PROVIDER::evd_query_func>(evd, DAT_INVALID_HANDLE_EVD_REQUEST, mask, param);
}

FASTDAPL_EXPORT DAT_RETURN dat_evd_modify_cno(DAT_EVD_HANDLE evd, DAT_CNO_HANDLE cno)
{
    return forward<&DAT_PROVIDER::evd_modify_cno_func>(evd, DAT_INVALID_HANDLE_EVD_REQUEST, cno);
}

FASTDAPL_EXPORT DAT_RETURN dat_evd_enable(DAT_EVD_HANDLE evd)
{
    return forward<&DAT_PROVIDER::evd_enable_func>(evd, DAT_INVALID_HANDLE_EVD_REQUEST);
}

FASTDAPL_EXPORT DAT_RETURN dat_evd_disable(DAT_EVD_HANDLE evd)
{
    return forward<&DAT_PROVIDER::evd_disable_func>(evd, DAT_INVALID_HANDLE_EVD_REQUEST);
}

FASTDAPL_EXPORT DAT_RETURN dat_evd_set_unwaitable(DAT_EVD_HANDLE evd)
{
    return forward<&DAT_PROVIDER::evd_set_unwaitable_func>(evd, DAT_INVALID_HANDLE_EVD_REQUEST);
}

FASTDAPL_EXPORT DAT_RETURN dat_evd_clear_unwaitable(DAT_EVD_HANDLE evd)
{
    return forward<&DAT_PROVIDER::evd_clear_unwaitable_func>(evd, DAT_INVALID_HANDLE_EVD_REQUEST);
}

FASTDAPL_EXPORT DAT_RETURN dat_evd_wait(DAT_EVD_HANDLE evd, DAT_TIMEOUT timeout, DAT_COUNT threshold,
                                        DAT_EVENT* event, DAT_COUNT* nmore)
{
    return forward<&DAT_PROVIDER::evd_wait_func>(evd, DAT_INVALID_HANDLE_EVD_REQUEST, timeout, threshold, event,
                                                 nmore);
}

FASTDAPL_EXPORT DAT_RETURN dat_evd_resize(DAT_EVD_HANDLE evd, DAT_COUNT qlen)
{
    return forward<&DAT_PROVIDER::evd_resize_func>(evd, DAT_INVALID_HANDLE_EVD_REQUEST, qlen);
}

FASTDAPL_EXPORT DAT_RETURN dat_evd_post_se(DAT_EVD_HANDLE evd, const DAT_EVENT* event)
{
    return forward<&DAT_PROVIDER::evd_post_se_func>(evd, DAT_INVALID_HANDLE_EVD_REQUEST, event);
}

FASTDAPL_EXPORT DAT_RETURN dat_evd_dequeue(DAT_EVD_HANDLE evd, DAT_EVENT* event)
{
    return forward<&DAT_PROVIDER::evd_dequeue_func>(evd, DAT_INVALID_HANDLE_EVD_REQUEST, event);
}

FASTDAPL_EXPORT DAT_RETURN dat_evd_free(DAT_EVD_HANDLE evd)
{
    return forward<&DAT_PROVIDER::evd_free_func>(evd, DAT_INVALID_HANDLE_EVD_REQUEST);
}

// --- EP ----------------------------------------------------------------------

FASTDAPL_EXPORT DAT_RETURN dat_ep_create(DAT_IA_HANDLE ia, DAT_PZ_HANDLE pz, DAT_EVD_HANDLE recv_evd,
                                         DAT_EVD_HANDLE request_evd, DAT_EVD_HANDLE connect_evd,
                                         const DAT_EP_ATTR* attr, DAT_EP_HANDLE* ep)
{
    return forward_ia<&DAT_PROVIDER::ep_create_func>(ia, pz, recv_evd, request_evd, connect_evd, attr, ep);
}

FASTDAPL_EXPORT DAT_RETURN dat_ep_create_with_srq(DAT_IA_HANDLE ia, DAT_PZ_HANDLE pz, DAT_EVD_HANDLE recv_evd,
                                                  DAT_EVD_HANDLE request_evd, DAT_EVD_HANDLE connect_evd,
                                                  DAT_SRQ_HANDLE srq, const DAT_EP_ATTR* attr, DAT_EP_HANDLE* ep)
{
    return forward_ia<&DAT_PROVIDER::ep_create_with_srq_func>(ia, pz, recv_evd, request_evd, connect_evd, srq, attr,
                                                              ep);
}

FASTDAPL_EXPORT DAT_RETURN dat_ep_query(DAT_EP_HANDLE ep, DAT_EP_PARAM_MASK mask, DAT_EP_PARAM* param)
{
    return forward<&DAT_PROVIDER::ep_query_func>(ep, DAT_INVALID_HANDLE_EP, mask, param);
}

FASTDAPL_EXPORT DAT_RETURN dat_ep_modify(DAT_EP_HANDLE ep, DAT_EP_PARAM_MASK mask, const DAT_EP_PARAM* param)
{
    return forward<&DAT_PROVIDER::ep_modify_func>(ep, DAT_INVALID_HANDLE_EP, mask, param);
}

FASTDAPL_EXPORT DAT_RETURN dat_ep_connect(DAT_EP_HANDLE ep, DAT_IA_ADDRESS_PTR remote_addr, DAT_CONN_QUAL remote_qual,
                                          DAT_TIMEOUT timeout, DAT_COUNT pdata_size, const DAT_PVOID pdata,
                                          DAT_QOS qos, DAT_CONNECT_FLAGS flags)
{
    return forward<&DAT_PROVIDER::ep_connect_func>(ep, DAT_INVALID_HANDLE_EP, remote_addr, remote_qual, timeout,
                                                   pdata_size, pdata, qos, flags);
}

FASTDAPL_EXPORT DAT_RETURN dat_ep_common_connect(DAT_EP_HANDLE ep, DAT_IA_ADDRESS_PTR remote_addr,
                                                 DAT_TIMEOUT timeout, DAT_COUNT pdata_size, const DAT_PVOID pdata)
{
    return forward<&DAT_PROVIDER::ep_common_connect_func>(ep, DAT_INVALID_HANDLE_EP, remote_addr, timeout,
                                                          pdata_size, pdata);
}

FASTDAPL_EXPORT DAT_RETURN dat_ep_dup_connect(DAT_EP_HANDLE ep, DAT_EP_HANDLE dup_ep, DAT_TIMEOUT timeout,
                                              DAT_COUNT pdata_size, const DAT_PVOID pdata, DAT_QOS qos)
{
    return forward<&DAT_PROVIDER::ep_dup_connect_func>(ep, DAT_INVALID_HANDLE_EP, dup_ep, timeout, pdata_size, pdata,
                                                       qos);
}

FASTDAPL_EXPORT DAT_RETURN dat_ep_disconnect(DAT_EP_HANDLE ep, DAT_CLOSE_FLAGS flags)
{
    return forward<&DAT_PROVIDER::ep_disconnect_func>(ep, DAT_INVALID_HANDLE_EP, flags);
}

FASTDAPL_EXPORT DAT_RETURN dat_ep_post_send(DAT_EP_HANDLE ep, DAT_COUNT nsegs, DAT_LMR_TRIPLET* iov,
                                            DAT_DTO_COOKIE cookie, DAT_COMPLETION_FLAGS flags)
{
    return forward<&DAT_PROVIDER::ep_post_send_func>(ep, DAT_INVALID_HANDLE_EP, nsegs, iov, cookie, flags);
}

FASTDAPL_EXPORT DAT_RETURN dat_ep_post_send_with_invalidate(DAT_EP_HANDLE ep, DAT_COUNT nsegs, DAT_LMR_TRIPLET* iov,
                                                            DAT_DTO_COOKIE cookie, DAT_COMPLETION_FLAGS flags,
                                                            DAT_BOOLEAN invalidate, DAT_RMR_CONTEXT rmr_context)
{
    return forward<&DAT_PROVIDER::ep_post_send_with_invalidate_func>(ep, DAT_INVALID_HANDLE_EP, nsegs, iov, cookie,
                                                                     flags, invalidate, rmr_context);
}

FASTDAPL_EXPORT DAT_RETURN dat_ep_post_recv(DAT_EP_HANDLE ep, DAT_COUNT nsegs, DAT_LMR_TRIPLET* iov,
                                            DAT_DTO_COOKIE cookie, DAT_COMPLETION_FLAGS flags)
{
    return forward<&DAT_PROVIDER::ep_post_recv_func>(ep, DAT_INVALID_HANDLE_EP, nsegs, iov, cookie, flags);
}

FASTDAPL_EXPORT DAT_RETURN dat_ep_post_rdma_read(DAT_EP_HANDLE ep, DAT_COUNT nsegs, DAT_LMR_TRIPLET* iov,
                                                 DAT_DTO_COOKIE cookie, const DAT_RMR_TRIPLET* remote,
                                                 DAT_COMPLETION_FLAGS flags)
{
    return forward<&DAT_PROVIDER::ep_post_rdma_read_func>(ep, DAT_INVALID_HANDLE_EP, nsegs, iov, cookie, remote,
                                                          flags);
}

FASTDAPL_EXPORT DAT_RETURN dat_ep_post_rdma_read_to_rmr(DAT_EP_HANDLE ep, const DAT_RMR_TRIPLET* local,
                                                        DAT_DTO_COOKIE cookie, const DAT_RMR_TRIPLET* remote,
                                                        DAT_COMPLETION_FLAGS flags)
{
    return forward<&DAT_PROVIDER::ep_post_rdma_read_to_rmr_func>(ep, DAT_INVALID_HANDLE_EP, local, cookie, remote,
                                                                 flags);
}

FASTDAPL_EXPORT DAT_RETURN dat_ep_post_rdma_write(DAT_EP_HANDLE ep, DAT_COUNT nsegs, DAT_LMR_TRIPLET* iov,
                                                  DAT_DTO_COOKIE cookie, const DAT_RMR_TRIPLET* remote,
                                                  DAT_COMPLETION_FLAGS flags)
{
    return forward<&DAT_PROVIDER::ep_post_rdma_write_func>(ep, DAT_INVALID_HANDLE_EP, nsegs, iov, cookie, remote,
                                                           flags);
}

FASTDAPL_EXPORT DAT_RETURN dat_ep_get_status(DAT_EP_HANDLE ep, DAT_EP_STATE* state, DAT_BOOLEAN* recv_idle,
                                             DAT_BOOLEAN* request_idle)
{
    return forward<&DAT_PROVIDER::ep_get_status_func>(ep, DAT_INVALID_HANDLE_EP, state, recv_idle, request_idle);
}

FASTDAPL_EXPORT DAT_RETURN dat_ep_free(DAT_EP_HANDLE ep)
{
    return forward<&DAT_PROVIDER::ep_free_func>(ep, DAT_INVALID_HANDLE_EP);
}

FASTDAPL_EXPORT DAT_RETURN dat_ep_reset(DAT_EP_HANDLE ep)
{
    return forward<&DAT_PROVIDER::ep_reset_func>(ep, DAT_INVALID_HANDLE_EP);
}

FASTDAPL_EXPORT DAT_RETURN dat_ep_recv_query(DAT_EP_HANDLE ep, DAT_COUNT* nbufs_allocated, DAT_COUNT* bufs_alloc_span)
{
    return forward<&DAT_PROVIDER::ep_recv_query_func>(ep, DAT_INVALID_HANDLE_EP, nbufs_allocated, bufs_alloc_span);
}

FASTDAPL_EXPORT DAT_RETURN dat_ep_set_watermark(DAT_EP_HANDLE ep, DAT_COUNT soft_high, DAT_COUNT hard_high)
{
    return forward<&DAT_PROVIDER::ep_set_watermark_func>(ep, DAT_INVALID_HANDLE_EP, soft_high, hard_high);
}

// --- LMR / RMR ---------------------------------------------------------------

FASTDAPL_EXPORT DAT_RETURN dat_lmr_create(DAT_IA_HANDLE ia, DAT_MEM_TYPE type, DAT_REGION_DESCRIPTION region,
                                          DAT_VLEN length, DAT_PZ_HANDLE pz, DAT_MEM_PRIV_FLAGS privileges,
                                          DAT_VA_TYPE va_type, DAT_LMR_HANDLE* lmr, DAT_LMR_CONTEXT* lmr_context,
                                          DAT_RMR_CONTEXT* rmr_context, DAT_VLEN* registered_length,
                                          DAT_VADDR* registered_address)
{
    return forward_ia<&DAT_PROVIDER::lmr_create_func>(ia, type, region, length, pz, privileges, va_type, lmr,
                                                      lmr_context, rmr_context, registered_length,
                                                      registered_address);
}

FASTDAPL_EXPORT DAT_RETURN dat_lmr_query(DAT_LMR_HANDLE lmr, DAT_LMR_PARAM_MASK mask, DAT_LMR_PARAM* param)
{
    return forward<&DAT_PROVIDER::lmr_query_func>(lmr, DAT_INVALID_HANDLE_LMR, mask, param);
}

FASTDAPL_EXPORT DAT_RETURN dat_lmr_free(DAT_LMR_HANDLE lmr)
{
    return forward<&DAT_PROVIDER::lmr_free_func>(lmr, DAT_INVALID_HANDLE_LMR);
}

FASTDAPL_EXPORT DAT_RETURN dat_lmr_sync_rdma_read(DAT_IA_HANDLE ia, const DAT_LMR_TRIPLET* segments, DAT_VLEN count)
{
    return forward_ia<&DAT_PROVIDER::lmr_sync_rdma_read_func>(ia, segments, count);
}

FASTDAPL_EXPORT DAT_RETURN dat_lmr_sync_rdma_write(DAT_IA_HANDLE ia, const DAT_LMR_TRIPLET* segments, DAT_VLEN count)
{
    return forward_ia<&DAT_PROVIDER::lmr_sync_rdma_write_func>(ia, segments, count);
}

FASTDAPL_EXPORT DAT_RETURN dat_rmr_create(DAT_PZ_HANDLE pz, DAT_RMR_HANDLE* rmr)
{
    return forward<&DAT_PROVIDER::rmr_create_func>(pz, DAT_INVALID_HANDLE_PZ, rmr);
}

FASTDAPL_EXPORT DAT_RETURN dat_rmr_create_for_ep(DAT_PZ_HANDLE pz, DAT_RMR_HANDLE* rmr)
{
    return forward<&DAT_PROVIDER::rmr_create_for_ep_func>(pz, DAT_INVALID_HANDLE_PZ, rmr);
}

FASTDAPL_EXPORT DAT_RETURN dat_rmr_query(DAT_RMR_HANDLE rmr, DAT_RMR_PARAM_MASK mask, DAT_RMR_PARAM* param)
{
    return forward<&DAT_PROVIDER::rmr_query_func>(rmr, DAT_INVALID_HANDLE_RMR, mask, param);
}

FASTDAPL_EXPORT DAT_RETURN dat_rmr_bind(DAT_RMR_HANDLE rmr, DAT_LMR_HANDLE lmr, const DAT_LMR_TRIPLET* triplet,
                                        DAT_MEM_PRIV_FLAGS privileges, DAT_VA_TYPE va_type, DAT_EP_HANDLE ep,
                                        DAT_RMR_COOKIE cookie, DAT_COMPLETION_FLAGS flags,
                                        DAT_RMR_CONTEXT* rmr_context)
{
    return forward<&DAT_PROVIDER::rmr_bind_func>(rmr, DAT_INVALID_HANDLE_RMR, lmr, triplet, privileges, va_type, ep,
                                                 cookie, flags, rmr_context);
}

FASTDAPL_EXPORT DAT_RETURN dat_rmr_free(DAT_RMR_HANDLE rmr)
{
    return forward<&DAT_PROVIDER::rmr_free_func>(rmr, DAT_INVALID_HANDLE_RMR);
}

// --- service points ----------------------------------------------------------

FASTDAPL_EXPORT DAT_RETURN dat_psp_create(DAT_IA_HANDLE ia, DAT_CONN_QUAL qual, DAT_EVD_HANDLE evd,
                                          DAT_PSP_FLAGS flags, DAT_PSP_HANDLE* psp)
{
    return forward_ia<&DAT_PROVIDER::psp_create_func>(ia, qual, evd, flags, psp);
}

FASTDAPL_EXPORT DAT_RETURN dat_psp_create_any(DAT_IA_HANDLE ia, DAT_CONN_QUAL* qual, DAT_EVD_HANDLE evd,
                                              DAT_PSP_FLAGS flags, DAT_PSP_HANDLE* psp)
{
    return forward_ia<&DAT_PROVIDER::psp_create_any_func>(ia, qual, evd, flags, psp);
}

FASTDAPL_EXPORT DAT_RETURN dat_psp_query(DAT_PSP_HANDLE psp, DAT_PSP_PARAM_MASK mask, DAT_PSP_PARAM* param)
{
    return forward<&DAT_PROVIDER::psp_query_func>(psp, DAT_INVALID_HANDLE_PSP, mask, param);
}

FASTDAPL_EXPORT DAT_RETURN dat_psp_free(DAT_PSP_HANDLE psp)
{
    return forward<&DAT_PROVIDER::psp_free_func>(psp, DAT_INVALID_HANDLE_PSP);
}

FASTDAPL_EXPORT DAT_RETURN dat_rsp_create(DAT_IA_HANDLE ia, DAT_CONN_QUAL qual, DAT_EP_HANDLE ep, DAT_EVD_HANDLE evd,
                                          DAT_RSP_HANDLE* rsp)
{
    return forward_ia<&DAT_PROVIDER::rsp_create_func>(ia, qual, ep, evd, rsp);
}

FASTDAPL_EXPORT DAT_RETURN dat_rsp_query(DAT_RSP_HANDLE rsp, DAT_RSP_PARAM_MASK mask, DAT_RSP_PARAM* param)
{
    return forward<&DAT_PROVIDER::rsp_query_func>(rsp, DAT_INVALID_HANDLE_RSP, mask, param);
}

FASTDAPL_EXPORT DAT_RETURN dat_rsp_free(DAT_RSP_HANDLE rsp)
{
    return forward<&DAT_PROVIDER::rsp_free_func>(rsp, DAT_INVALID_HANDLE_RSP);
}

FASTDAPL_EXPORT DAT_RETURN dat_csp_create(DAT_IA_HANDLE ia, DAT_COMM* comm, DAT_IA_ADDRESS_PTR address,
                                          DAT_EVD_HANDLE evd, DAT_CSP_HANDLE* csp)
{
    return forward_ia<&DAT_PROVIDER::csp_create_func>(ia, comm, address, evd, csp);
}

FASTDAPL_EXPORT DAT_RETURN dat_csp_query(DAT_CSP_HANDLE csp, DAT_CSP_PARAM_MASK mask, DAT_CSP_PARAM* param)
{
    return forward<&DAT_PROVIDER::csp_query_func>(csp, DAT_INVALID_HANDLE_CSP, mask, param);
}

FASTDAPL_EXPORT DAT_RETURN dat_csp_free(DAT_CSP_HANDLE csp)
{
    return forward<&DAT_PROVIDER::csp_free_func>(csp, DAT_INVALID_HANDLE_CSP);
}

// --- PZ / SRQ ----------------------------------------------------------------

FASTDAPL_EXPORT DAT_RETURN dat_pz_create(DAT_IA_HANDLE ia, DAT_PZ_HANDLE* pz)
{
    return forward_ia<&DAT_PROVIDER::pz_create_func>(ia, pz);
}

FASTDAPL_EXPORT DAT_RETURN dat_pz_query(DAT_PZ_HANDLE pz, DAT_PZ_PARAM_MASK mask, DAT_PZ_PARAM* param)
{
    return forward<&DAT_PROVIDER::pz_query_func>(pz, DAT_INVALID_HANDLE_PZ, mask, param);
}

FASTDAPL_EXPORT DAT_RETURN dat_pz_free(DAT_PZ_HANDLE pz)
{
    return forward<&DAT_PROVIDER::pz_free_func>(pz, DAT_INVALID_HANDLE_PZ);
}

FASTDAPL_EXPORT DAT_RETURN dat_srq_create(DAT_IA_HANDLE ia, DAT_PZ_HANDLE pz, DAT_SRQ_ATTR* attr, DAT_SRQ_HANDLE* srq)
{
    return forward_ia<&DAT_PROVIDER::srq_create_func>(ia, pz, attr, srq);
}

FASTDAPL_EXPORT DAT_RETURN dat_srq_free(DAT_SRQ_HANDLE srq)
{
    return forward<&DAT_PROVIDER::srq_free_func>(srq, DAT_INVALID_HANDLE_SRQ);
}

FASTDAPL_EXPORT DAT_RETURN dat_srq_post_recv(DAT_SRQ_HANDLE srq, DAT_COUNT nsegs, DAT_LMR_TRIPLET* iov,
                                             DAT_DTO_COOKIE cookie)
{
    return forward<&DAT_PROVIDER::srq_post_recv_func>(srq, DAT_INVALID_HANDLE_SRQ, nsegs, iov, cookie);
}

FASTDAPL_EXPORT DAT_RETURN dat_srq_query(DAT_SRQ_HANDLE srq, DAT_SRQ_PARAM_MASK mask, DAT_SRQ_PARAM* param)
{
    return forward<&DAT_PROVIDER::srq_query_func>(srq, DAT_INVALID_HANDLE_SRQ, mask, param);
}

FASTDAPL_EXPORT DAT_RETURN dat_srq_resize(DAT_SRQ_HANDLE srq, DAT_COUNT qlen)
{
    return forward<&DAT_PROVIDER::srq_resize_func>(srq, DAT_INVALID_HANDLE_SRQ, qlen);
}

FASTDAPL_EXPORT DAT_RETURN dat_srq_set_lw(DAT_SRQ_HANDLE srq, DAT_COUNT low_watermark)
{
    return forward<&DAT_PROVIDER::srq_set_lw_func>(srq, DAT_INVALID_HANDLE_SRQ, low_watermark);
}

// --- extensions --------------------------------------------------------------

// The open and close ops of an extension (DAT_OPEN/CLOSE_EXTENSION_BASE,
// as dat_ib_open_query/dat_ib_close_query) are the registry's: they open a
// named IA and close it (registry.cpp). Every other op goes to the provider
// of its handle.
FASTDAPL_EXPORT DAT_RETURN dat_extension_op(DAT_HANDLE h, DAT_EXTENDED_OP op, ...)
{
    if (op & (kOpenExtensionBase | kCloseExtensionBase)) [[unlikely]] {
        va_list args;
        va_start(args, op);
        DAT_RETURN rc;
        if (op & kOpenExtensionBase) {
            const char* name = va_arg(args, const char*);
            rc = open_extension(name, op, args);
        } else {
            rc = close_extension(h, op, args);
        }
        va_end(args);
        return rc;
    }
    const DAT_HANDLE target = any_handle(h);
    const DAT_PROVIDER* p = provider_of(target);
    if (!p)
        return dat_error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE1);
    if (!p->handle_extendedop_func)
        return dat_error(DAT_MODEL_NOT_SUPPORTED);
    va_list args;
    va_start(args, op);
    const DAT_RETURN rc = p->handle_extendedop_func(target, op, args);
    va_end(args);
    return rc;
}

} // extern "C"
