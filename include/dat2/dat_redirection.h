/* dat_redirection.h: entry point types shared by uDAPL and kDAPL, and the macros that call them.
 *
 * SPDX-License-Identifier: BSD-3-Clause
 * Copyright (c) 2026 the fastdapl authors
 */
#ifndef _DAT_REDIRECTION_H_
#define _DAT_REDIRECTION_H_

/* Not included on its own: udat_redirection.h (via dat_registry.h) brings
 * it in after <dat2/udat.h> has declared every type used below. */

#ifdef DAT_EXTENSIONS
#include <stdarg.h> /* va_list, for DAT_HANDLE_EXTENDEDOP_FUNC */
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* The table itself is defined by the flavour header (udat_redirection.h),
 * because user and kernel providers carry different entry points. */
typedef struct dat_provider DAT_PROVIDER;

/* Every object a provider hands out begins with a pointer to that
 * provider's table, so any handle finds the code that serves it. A
 * single-provider build may define its own version first and skip the
 * load. */
#ifndef DAT_HANDLE_TO_PROVIDER
#define DAT_HANDLE_TO_PROVIDER(handle) (*(DAT_PROVIDER **)(handle))
#endif

/*
 * Each DAT_FOO(h, ...) macro below calls foo_func of the provider that owns
 * h, passing the arguments through unchanged; the registry builds the
 * exported dat_foo() functions on them. Each one sits next to the type of
 * the table slot it calls (for the uDAPL-only calls, in
 * udat_redirection.h), and the order of arguments is the same.
 */

/* ---- Interface adapter ---- */

typedef DAT_RETURN (DAT_API *DAT_IA_OPEN_FUNC)(
    const DAT_NAME_PTR ia_name,
    DAT_COUNT async_evd_min_qlen,
    DAT_EVD_HANDLE *async_evd,
    DAT_IA_HANDLE *ia);

/* The versioned open, as the registry receives it from dat_ia_openv. */
typedef DAT_RETURN (DAT_API *DAT_IA_OPENV_FUNC)(
    const DAT_NAME_PTR ia_name,
    DAT_COUNT async_evd_min_qlen,
    DAT_EVD_HANDLE *async_evd,
    DAT_IA_HANDLE *ia,
    DAT_UINT32 dat_major,
    DAT_UINT32 dat_minor,
    DAT_BOOLEAN thread_safe);

typedef DAT_RETURN (DAT_API *DAT_IA_CLOSE_FUNC)(
    DAT_IA_HANDLE ia,
    DAT_CLOSE_FLAGS flags);

typedef DAT_RETURN (DAT_API *DAT_IA_QUERY_FUNC)(
    DAT_IA_HANDLE ia,
    DAT_EVD_HANDLE *async_evd,
    DAT_IA_ATTR_MASK ia_mask,
    DAT_IA_ATTR *ia_attr,
    DAT_PROVIDER_ATTR_MASK provider_mask,
    DAT_PROVIDER_ATTR *provider_attr);

#define DAT_IA_QUERY(ia, async_evd, ia_mask, ia_attr, provider_mask, provider_attr) \
    (*DAT_HANDLE_TO_PROVIDER(ia)->ia_query_func)( \
        (ia), (async_evd), (ia_mask), (ia_attr), (provider_mask), (provider_attr))

/* The reference spells this one with a space before its parameter list,
 * which makes it an unusable object-like macro; this is the call it was
 * meant to be, on the slot's real name. */
typedef DAT_RETURN (DAT_API *DAT_IA_HA_RELATED_FUNC)(
    DAT_IA_HANDLE ia,
    const DAT_NAME_PTR other_ia_name,
    DAT_BOOLEAN *related);

#define DAT_IA_HA_RELATED(ia, other_ia_name, related) \
    (*DAT_HANDLE_TO_PROVIDER(ia)->ia_ha_related_func)((ia), (other_ia_name), (related))

/* ---- Calls valid on any handle ---- */

typedef DAT_RETURN (DAT_API *DAT_SET_CONSUMER_CONTEXT_FUNC)(
    DAT_HANDLE handle,
    DAT_CONTEXT context);

typedef DAT_RETURN (DAT_API *DAT_GET_CONSUMER_CONTEXT_FUNC)(
    DAT_HANDLE handle,
    DAT_CONTEXT *context);

typedef DAT_RETURN (DAT_API *DAT_GET_HANDLE_TYPE_FUNC)(
    DAT_HANDLE handle,
    DAT_HANDLE_TYPE *type);

#define DAT_SET_CONSUMER_CONTEXT(handle, context) \
    (*DAT_HANDLE_TO_PROVIDER(handle)->set_consumer_context_func)((handle), (context))

#define DAT_GET_CONSUMER_CONTEXT(handle, context) \
    (*DAT_HANDLE_TO_PROVIDER(handle)->get_consumer_context_func)((handle), (context))

#define DAT_GET_HANDLE_TYPE(handle, type) \
    (*DAT_HANDLE_TO_PROVIDER(handle)->get_handle_type_func)((handle), (type))

/* ---- Connection requests ---- */

typedef DAT_RETURN (DAT_API *DAT_CR_QUERY_FUNC)(
    DAT_CR_HANDLE cr,
    DAT_CR_PARAM_MASK mask,
    DAT_CR_PARAM *param);

/* Four arguments: the spec's prose adds a multipath flag that no header
 * or provider has ever carried. */
typedef DAT_RETURN (DAT_API *DAT_CR_ACCEPT_FUNC)(
    DAT_CR_HANDLE cr,
    DAT_EP_HANDLE ep,
    DAT_COUNT private_data_size,
    const DAT_PVOID private_data);

typedef DAT_RETURN (DAT_API *DAT_CR_REJECT_FUNC)(
    DAT_CR_HANDLE cr,
    DAT_COUNT private_data_size,
    const DAT_PVOID private_data);

typedef DAT_RETURN (DAT_API *DAT_CR_HANDOFF_FUNC)(
    DAT_CR_HANDLE cr,
    DAT_CONN_QUAL handoff_qual);

#define DAT_CR_QUERY(cr, mask, param) \
    (*DAT_HANDLE_TO_PROVIDER(cr)->cr_query_func)((cr), (mask), (param))

#define DAT_CR_ACCEPT(cr, ep, private_data_size, private_data) \
    (*DAT_HANDLE_TO_PROVIDER(cr)->cr_accept_func)( \
        (cr), (ep), (private_data_size), (private_data))

#define DAT_CR_REJECT(cr, private_data_size, private_data) \
    (*DAT_HANDLE_TO_PROVIDER(cr)->cr_reject_func)((cr), (private_data_size), (private_data))

#define DAT_CR_HANDOFF(cr, handoff_qual) \
    (*DAT_HANDLE_TO_PROVIDER(cr)->cr_handoff_func)((cr), (handoff_qual))

/* ---- Event dispatchers ---- */

typedef DAT_RETURN (DAT_API *DAT_EVD_RESIZE_FUNC)(
    DAT_EVD_HANDLE evd,
    DAT_COUNT min_qlen);

typedef DAT_RETURN (DAT_API *DAT_EVD_POST_SE_FUNC)(
    DAT_EVD_HANDLE evd,
    const DAT_EVENT *event);

typedef DAT_RETURN (DAT_API *DAT_EVD_DEQUEUE_FUNC)(
    DAT_EVD_HANDLE evd,
    DAT_EVENT *event);

typedef DAT_RETURN (DAT_API *DAT_EVD_FREE_FUNC)(
    DAT_EVD_HANDLE evd);

typedef DAT_RETURN (DAT_API *DAT_EVD_QUERY_FUNC)(
    DAT_EVD_HANDLE evd,
    DAT_EVD_PARAM_MASK mask,
    DAT_EVD_PARAM *param);

#define DAT_EVD_QUERY(evd, mask, param) \
    (*DAT_HANDLE_TO_PROVIDER(evd)->evd_query_func)((evd), (mask), (param))

#define DAT_EVD_RESIZE(evd, min_qlen) \
    (*DAT_HANDLE_TO_PROVIDER(evd)->evd_resize_func)((evd), (min_qlen))

#define DAT_EVD_POST_SE(evd, event) \
    (*DAT_HANDLE_TO_PROVIDER(evd)->evd_post_se_func)((evd), (event))

#define DAT_EVD_DEQUEUE(evd, event) \
    (*DAT_HANDLE_TO_PROVIDER(evd)->evd_dequeue_func)((evd), (event))

#define DAT_EVD_FREE(evd) \
    (*DAT_HANDLE_TO_PROVIDER(evd)->evd_free_func)((evd))

/* ---- Endpoints: life cycle and attributes ---- */

typedef DAT_RETURN (DAT_API *DAT_EP_CREATE_FUNC)(
    DAT_IA_HANDLE ia,
    DAT_PZ_HANDLE pz,
    DAT_EVD_HANDLE recv_evd,
    DAT_EVD_HANDLE request_evd,
    DAT_EVD_HANDLE connect_evd,
    const DAT_EP_ATTR *attr,
    DAT_EP_HANDLE *ep);

typedef DAT_RETURN (DAT_API *DAT_EP_CREATE_WITH_SRQ_FUNC)(
    DAT_IA_HANDLE ia,
    DAT_PZ_HANDLE pz,
    DAT_EVD_HANDLE recv_evd,
    DAT_EVD_HANDLE request_evd,
    DAT_EVD_HANDLE connect_evd,
    DAT_SRQ_HANDLE srq,
    const DAT_EP_ATTR *attr,
    DAT_EP_HANDLE *ep);

typedef DAT_RETURN (DAT_API *DAT_EP_QUERY_FUNC)(
    DAT_EP_HANDLE ep,
    DAT_EP_PARAM_MASK mask,
    DAT_EP_PARAM *param);

typedef DAT_RETURN (DAT_API *DAT_EP_MODIFY_FUNC)(
    DAT_EP_HANDLE ep,
    DAT_EP_PARAM_MASK mask,
    const DAT_EP_PARAM *param);

typedef DAT_RETURN (DAT_API *DAT_EP_GET_STATUS_FUNC)(
    DAT_EP_HANDLE ep,
    DAT_EP_STATE *state,
    DAT_BOOLEAN *recv_idle,
    DAT_BOOLEAN *request_idle);

typedef DAT_RETURN (DAT_API *DAT_EP_FREE_FUNC)(
    DAT_EP_HANDLE ep);

typedef DAT_RETURN (DAT_API *DAT_EP_RESET_FUNC)(
    DAT_EP_HANDLE ep);

typedef DAT_RETURN (DAT_API *DAT_EP_RECV_QUERY_FUNC)(
    DAT_EP_HANDLE ep,
    DAT_COUNT *nbufs_allocated,
    DAT_COUNT *bufs_alloc_span);

typedef DAT_RETURN (DAT_API *DAT_EP_SET_WATERMARK_FUNC)(
    DAT_EP_HANDLE ep,
    DAT_COUNT soft_high_watermark,
    DAT_COUNT hard_high_watermark);

#define DAT_EP_CREATE(ia, pz, recv_evd, request_evd, connect_evd, attr, ep) \
    (*DAT_HANDLE_TO_PROVIDER(ia)->ep_create_func)( \
        (ia), (pz), (recv_evd), (request_evd), (connect_evd), (attr), (ep))

#define DAT_EP_CREATE_WITH_SRQ(ia, pz, recv_evd, request_evd, connect_evd, srq, attr, ep) \
    (*DAT_HANDLE_TO_PROVIDER(ia)->ep_create_with_srq_func)( \
        (ia), (pz), (recv_evd), (request_evd), (connect_evd), (srq), (attr), (ep))

#define DAT_EP_QUERY(ep, mask, param) \
    (*DAT_HANDLE_TO_PROVIDER(ep)->ep_query_func)((ep), (mask), (param))

#define DAT_EP_MODIFY(ep, mask, param) \
    (*DAT_HANDLE_TO_PROVIDER(ep)->ep_modify_func)((ep), (mask), (param))

#define DAT_EP_GET_STATUS(ep, state, recv_idle, request_idle) \
    (*DAT_HANDLE_TO_PROVIDER(ep)->ep_get_status_func)( \
        (ep), (state), (recv_idle), (request_idle))

#define DAT_EP_FREE(ep) \
    (*DAT_HANDLE_TO_PROVIDER(ep)->ep_free_func)((ep))

#define DAT_EP_RESET(ep) \
    (*DAT_HANDLE_TO_PROVIDER(ep)->ep_reset_func)((ep))

#define DAT_EP_RECV_QUERY(ep, nbufs_allocated, bufs_alloc_span) \
    (*DAT_HANDLE_TO_PROVIDER(ep)->ep_recv_query_func)( \
        (ep), (nbufs_allocated), (bufs_alloc_span))

#define DAT_EP_SET_WATERMARK(ep, soft_high_watermark, hard_high_watermark) \
    (*DAT_HANDLE_TO_PROVIDER(ep)->ep_set_watermark_func)( \
        (ep), (soft_high_watermark), (hard_high_watermark))

/* ---- Endpoints: connection management ---- */

typedef DAT_RETURN (DAT_API *DAT_EP_CONNECT_FUNC)(
    DAT_EP_HANDLE ep,
    DAT_IA_ADDRESS_PTR remote_addr,
    DAT_CONN_QUAL remote_qual,
    DAT_TIMEOUT timeout,
    DAT_COUNT private_data_size,
    const DAT_PVOID private_data,
    DAT_QOS qos,
    DAT_CONNECT_FLAGS flags);

/* Connects to a common service point: no qualifier, no QoS, no flags. */
typedef DAT_RETURN (DAT_API *DAT_EP_COMMON_CONNECT_FUNC)(
    DAT_EP_HANDLE ep,
    DAT_IA_ADDRESS_PTR remote_addr,
    DAT_TIMEOUT timeout,
    DAT_COUNT private_data_size,
    const DAT_PVOID private_data);

typedef DAT_RETURN (DAT_API *DAT_EP_DUP_CONNECT_FUNC)(
    DAT_EP_HANDLE ep,
    DAT_EP_HANDLE dup_of,
    DAT_TIMEOUT timeout,
    DAT_COUNT private_data_size,
    const DAT_PVOID private_data,
    DAT_QOS qos);

typedef DAT_RETURN (DAT_API *DAT_EP_DISCONNECT_FUNC)(
    DAT_EP_HANDLE ep,
    DAT_CLOSE_FLAGS flags);

#define DAT_EP_CONNECT(ep, remote_addr, remote_qual, timeout, private_data_size, \
                       private_data, qos, flags) \
    (*DAT_HANDLE_TO_PROVIDER(ep)->ep_connect_func)( \
        (ep), (remote_addr), (remote_qual), (timeout), (private_data_size), \
        (private_data), (qos), (flags))

#define DAT_EP_COMMON_CONNECT(ep, remote_addr, timeout, private_data_size, private_data) \
    (*DAT_HANDLE_TO_PROVIDER(ep)->ep_common_connect_func)( \
        (ep), (remote_addr), (timeout), (private_data_size), (private_data))

#define DAT_EP_DUP_CONNECT(ep, dup_of, timeout, private_data_size, private_data, qos) \
    (*DAT_HANDLE_TO_PROVIDER(ep)->ep_dup_connect_func)( \
        (ep), (dup_of), (timeout), (private_data_size), (private_data), (qos))

#define DAT_EP_DISCONNECT(ep, flags) \
    (*DAT_HANDLE_TO_PROVIDER(ep)->ep_disconnect_func)((ep), (flags))

/* ---- Endpoints: data transfer ---- */

/* The local segment lists are not const here (unlike the remote ones): the
 * types are fixed by the reference ABI. */
typedef DAT_RETURN (DAT_API *DAT_EP_POST_SEND_FUNC)(
    DAT_EP_HANDLE ep,
    DAT_COUNT num_segments,
    DAT_LMR_TRIPLET *local_iov,
    DAT_DTO_COOKIE cookie,
    DAT_COMPLETION_FLAGS flags);

typedef DAT_RETURN (DAT_API *DAT_EP_POST_SEND_WITH_INVALIDATE_FUNC)(
    DAT_EP_HANDLE ep,
    DAT_COUNT num_segments,
    DAT_LMR_TRIPLET *local_iov,
    DAT_DTO_COOKIE cookie,
    DAT_COMPLETION_FLAGS flags,
    DAT_BOOLEAN invalidate,
    DAT_RMR_CONTEXT rmr_context);

typedef DAT_RETURN (DAT_API *DAT_EP_POST_RECV_FUNC)(
    DAT_EP_HANDLE ep,
    DAT_COUNT num_segments,
    DAT_LMR_TRIPLET *local_iov,
    DAT_DTO_COOKIE cookie,
    DAT_COMPLETION_FLAGS flags);

typedef DAT_RETURN (DAT_API *DAT_EP_POST_RDMA_READ_FUNC)(
    DAT_EP_HANDLE ep,
    DAT_COUNT num_segments,
    DAT_LMR_TRIPLET *local_iov,
    DAT_DTO_COOKIE cookie,
    const DAT_RMR_TRIPLET *remote_iov,
    DAT_COMPLETION_FLAGS flags);

/* Both ends are RMRs: the read lands in a window, not an LMR segment. */
typedef DAT_RETURN (DAT_API *DAT_EP_POST_RDMA_READ_TO_RMR_FUNC)(
    DAT_EP_HANDLE ep,
    const DAT_RMR_TRIPLET *local_iov,
    DAT_DTO_COOKIE cookie,
    const DAT_RMR_TRIPLET *remote_iov,
    DAT_COMPLETION_FLAGS flags);

typedef DAT_RETURN (DAT_API *DAT_EP_POST_RDMA_WRITE_FUNC)(
    DAT_EP_HANDLE ep,
    DAT_COUNT num_segments,
    DAT_LMR_TRIPLET *local_iov,
    DAT_DTO_COOKIE cookie,
    const DAT_RMR_TRIPLET *remote_iov,
    DAT_COMPLETION_FLAGS flags);

#define DAT_EP_POST_SEND(ep, num_segments, local_iov, cookie, flags) \
    (*DAT_HANDLE_TO_PROVIDER(ep)->ep_post_send_func)( \
        (ep), (num_segments), (local_iov), (cookie), (flags))

#define DAT_EP_POST_SEND_WITH_INVALIDATE(ep, num_segments, local_iov, cookie, flags, \
                                         invalidate, rmr_context) \
    (*DAT_HANDLE_TO_PROVIDER(ep)->ep_post_send_with_invalidate_func)( \
        (ep), (num_segments), (local_iov), (cookie), (flags), (invalidate), (rmr_context))

#define DAT_EP_POST_RECV(ep, num_segments, local_iov, cookie, flags) \
    (*DAT_HANDLE_TO_PROVIDER(ep)->ep_post_recv_func)( \
        (ep), (num_segments), (local_iov), (cookie), (flags))

#define DAT_EP_POST_RDMA_READ(ep, num_segments, local_iov, cookie, remote_iov, flags) \
    (*DAT_HANDLE_TO_PROVIDER(ep)->ep_post_rdma_read_func)( \
        (ep), (num_segments), (local_iov), (cookie), (remote_iov), (flags))

#define DAT_EP_POST_RDMA_READ_TO_RMR(ep, local_iov, cookie, remote_iov, flags) \
    (*DAT_HANDLE_TO_PROVIDER(ep)->ep_post_rdma_read_to_rmr_func)( \
        (ep), (local_iov), (cookie), (remote_iov), (flags))

#define DAT_EP_POST_RDMA_WRITE(ep, num_segments, local_iov, cookie, remote_iov, flags) \
    (*DAT_HANDLE_TO_PROVIDER(ep)->ep_post_rdma_write_func)( \
        (ep), (num_segments), (local_iov), (cookie), (remote_iov), (flags))

/* ---- Local memory regions (create is uDAPL-specific) ---- */

typedef DAT_RETURN (DAT_API *DAT_LMR_FREE_FUNC)(
    DAT_LMR_HANDLE lmr);

/* The last argument counts segments even though its type is DAT_VLEN. */
typedef DAT_RETURN (DAT_API *DAT_LMR_SYNC_RDMA_READ_FUNC)(
    DAT_IA_HANDLE ia,
    const DAT_LMR_TRIPLET *segments,
    DAT_VLEN num_segments);

typedef DAT_RETURN (DAT_API *DAT_LMR_SYNC_RDMA_WRITE_FUNC)(
    DAT_IA_HANDLE ia,
    const DAT_LMR_TRIPLET *segments,
    DAT_VLEN num_segments);

/* DAT_LMR_QUERY_FUNC lives in udat_redirection.h; its macro is here, as
 * in the reference. */
#define DAT_LMR_QUERY(lmr, mask, param) \
    (*DAT_HANDLE_TO_PROVIDER(lmr)->lmr_query_func)((lmr), (mask), (param))

#define DAT_LMR_FREE(lmr) \
    (*DAT_HANDLE_TO_PROVIDER(lmr)->lmr_free_func)((lmr))

#define DAT_LMR_SYNC_RDMA_READ(ia, segments, num_segments) \
    (*DAT_HANDLE_TO_PROVIDER(ia)->lmr_sync_rdma_read_func)((ia), (segments), (num_segments))

#define DAT_LMR_SYNC_RDMA_WRITE(ia, segments, num_segments) \
    (*DAT_HANDLE_TO_PROVIDER(ia)->lmr_sync_rdma_write_func)((ia), (segments), (num_segments))

/* ---- Remote memory regions (memory windows) ---- */

typedef DAT_RETURN (DAT_API *DAT_RMR_CREATE_FUNC)(
    DAT_PZ_HANDLE pz,
    DAT_RMR_HANDLE *rmr);

typedef DAT_RETURN (DAT_API *DAT_RMR_CREATE_FOR_EP_FUNC)(
    DAT_PZ_HANDLE pz,
    DAT_RMR_HANDLE *rmr);

typedef DAT_RETURN (DAT_API *DAT_RMR_QUERY_FUNC)(
    DAT_RMR_HANDLE rmr,
    DAT_RMR_PARAM_MASK mask,
    DAT_RMR_PARAM *param);

typedef DAT_RETURN (DAT_API *DAT_RMR_BIND_FUNC)(
    DAT_RMR_HANDLE rmr,
    DAT_LMR_HANDLE lmr,
    const DAT_LMR_TRIPLET *region,
    DAT_MEM_PRIV_FLAGS privileges,
    DAT_VA_TYPE va_type,
    DAT_EP_HANDLE ep,
    DAT_RMR_COOKIE cookie,
    DAT_COMPLETION_FLAGS flags,
    DAT_RMR_CONTEXT *rmr_context);

typedef DAT_RETURN (DAT_API *DAT_RMR_FREE_FUNC)(
    DAT_RMR_HANDLE rmr);

#define DAT_RMR_CREATE(pz, rmr) \
    (*DAT_HANDLE_TO_PROVIDER(pz)->rmr_create_func)((pz), (rmr))

#define DAT_RMR_CREATE_FOR_EP(pz, rmr) \
    (*DAT_HANDLE_TO_PROVIDER(pz)->rmr_create_for_ep_func)((pz), (rmr))

#define DAT_RMR_QUERY(rmr, mask, param) \
    (*DAT_HANDLE_TO_PROVIDER(rmr)->rmr_query_func)((rmr), (mask), (param))

#define DAT_RMR_BIND(rmr, lmr, region, privileges, va_type, ep, cookie, flags, rmr_context) \
    (*DAT_HANDLE_TO_PROVIDER(rmr)->rmr_bind_func)( \
        (rmr), (lmr), (region), (privileges), (va_type), (ep), (cookie), (flags), \
        (rmr_context))

#define DAT_RMR_FREE(rmr) \
    (*DAT_HANDLE_TO_PROVIDER(rmr)->rmr_free_func)((rmr))

/* ---- Public service points ---- */

typedef DAT_RETURN (DAT_API *DAT_PSP_CREATE_FUNC)(
    DAT_IA_HANDLE ia,
    DAT_CONN_QUAL qual,
    DAT_EVD_HANDLE cr_evd,
    DAT_PSP_FLAGS flags,
    DAT_PSP_HANDLE *psp);

/* As create, but the provider picks the qualifier and returns it. */
typedef DAT_RETURN (DAT_API *DAT_PSP_CREATE_ANY_FUNC)(
    DAT_IA_HANDLE ia,
    DAT_CONN_QUAL *qual,
    DAT_EVD_HANDLE cr_evd,
    DAT_PSP_FLAGS flags,
    DAT_PSP_HANDLE *psp);

typedef DAT_RETURN (DAT_API *DAT_PSP_QUERY_FUNC)(
    DAT_PSP_HANDLE psp,
    DAT_PSP_PARAM_MASK mask,
    DAT_PSP_PARAM *param);

/* One parameter (the spec's listing names it twice). */
typedef DAT_RETURN (DAT_API *DAT_PSP_FREE_FUNC)(
    DAT_PSP_HANDLE psp);

#define DAT_PSP_CREATE(ia, qual, cr_evd, flags, psp) \
    (*DAT_HANDLE_TO_PROVIDER(ia)->psp_create_func)((ia), (qual), (cr_evd), (flags), (psp))

#define DAT_PSP_CREATE_ANY(ia, qual, cr_evd, flags, psp) \
    (*DAT_HANDLE_TO_PROVIDER(ia)->psp_create_any_func)((ia), (qual), (cr_evd), (flags), (psp))

#define DAT_PSP_QUERY(psp, mask, param) \
    (*DAT_HANDLE_TO_PROVIDER(psp)->psp_query_func)((psp), (mask), (param))

#define DAT_PSP_FREE(psp) \
    (*DAT_HANDLE_TO_PROVIDER(psp)->psp_free_func)((psp))

/* ---- Reserved service points ---- */

typedef DAT_RETURN (DAT_API *DAT_RSP_CREATE_FUNC)(
    DAT_IA_HANDLE ia,
    DAT_CONN_QUAL qual,
    DAT_EP_HANDLE ep,
    DAT_EVD_HANDLE cr_evd,
    DAT_RSP_HANDLE *rsp);

typedef DAT_RETURN (DAT_API *DAT_RSP_QUERY_FUNC)(
    DAT_RSP_HANDLE rsp,
    DAT_RSP_PARAM_MASK mask,
    DAT_RSP_PARAM *param);

typedef DAT_RETURN (DAT_API *DAT_RSP_FREE_FUNC)(
    DAT_RSP_HANDLE rsp);

#define DAT_RSP_CREATE(ia, qual, ep, cr_evd, rsp) \
    (*DAT_HANDLE_TO_PROVIDER(ia)->rsp_create_func)((ia), (qual), (ep), (cr_evd), (rsp))

#define DAT_RSP_QUERY(rsp, mask, param) \
    (*DAT_HANDLE_TO_PROVIDER(rsp)->rsp_query_func)((rsp), (mask), (param))

#define DAT_RSP_FREE(rsp) \
    (*DAT_HANDLE_TO_PROVIDER(rsp)->rsp_free_func)((rsp))

/* ---- Common service points (DAT 2.0) ---- */

typedef DAT_RETURN (DAT_API *DAT_CSP_CREATE_FUNC)(
    DAT_IA_HANDLE ia,
    DAT_COMM *comm,
    DAT_IA_ADDRESS_PTR addr,
    DAT_EVD_HANDLE cr_evd,
    DAT_CSP_HANDLE *csp);

typedef DAT_RETURN (DAT_API *DAT_CSP_QUERY_FUNC)(
    DAT_CSP_HANDLE csp,
    DAT_CSP_PARAM_MASK mask,
    DAT_CSP_PARAM *param);

typedef DAT_RETURN (DAT_API *DAT_CSP_FREE_FUNC)(
    DAT_CSP_HANDLE csp);

#define DAT_CSP_CREATE(ia, comm, addr, cr_evd, csp) \
    (*DAT_HANDLE_TO_PROVIDER(ia)->csp_create_func)((ia), (comm), (addr), (cr_evd), (csp))

#define DAT_CSP_QUERY(csp, mask, param) \
    (*DAT_HANDLE_TO_PROVIDER(csp)->csp_query_func)((csp), (mask), (param))

#define DAT_CSP_FREE(csp) \
    (*DAT_HANDLE_TO_PROVIDER(csp)->csp_free_func)((csp))

/* ---- Protection zones ---- */

typedef DAT_RETURN (DAT_API *DAT_PZ_CREATE_FUNC)(
    DAT_IA_HANDLE ia,
    DAT_PZ_HANDLE *pz);

typedef DAT_RETURN (DAT_API *DAT_PZ_QUERY_FUNC)(
    DAT_PZ_HANDLE pz,
    DAT_PZ_PARAM_MASK mask,
    DAT_PZ_PARAM *param);

typedef DAT_RETURN (DAT_API *DAT_PZ_FREE_FUNC)(
    DAT_PZ_HANDLE pz);

#define DAT_PZ_CREATE(ia, pz) \
    (*DAT_HANDLE_TO_PROVIDER(ia)->pz_create_func)((ia), (pz))

#define DAT_PZ_QUERY(pz, mask, param) \
    (*DAT_HANDLE_TO_PROVIDER(pz)->pz_query_func)((pz), (mask), (param))

#define DAT_PZ_FREE(pz) \
    (*DAT_HANDLE_TO_PROVIDER(pz)->pz_free_func)((pz))

/* ---- Shared receive queues ---- */

/* attr is not const: the reference ABI declares it writable. */
typedef DAT_RETURN (DAT_API *DAT_SRQ_CREATE_FUNC)(
    DAT_IA_HANDLE ia,
    DAT_PZ_HANDLE pz,
    DAT_SRQ_ATTR *attr,
    DAT_SRQ_HANDLE *srq);

typedef DAT_RETURN (DAT_API *DAT_SRQ_SET_LW_FUNC)(
    DAT_SRQ_HANDLE srq,
    DAT_COUNT low_watermark);

typedef DAT_RETURN (DAT_API *DAT_SRQ_FREE_FUNC)(
    DAT_SRQ_HANDLE srq);

typedef DAT_RETURN (DAT_API *DAT_SRQ_QUERY_FUNC)(
    DAT_SRQ_HANDLE srq,
    DAT_SRQ_PARAM_MASK mask,
    DAT_SRQ_PARAM *param);

typedef DAT_RETURN (DAT_API *DAT_SRQ_RESIZE_FUNC)(
    DAT_SRQ_HANDLE srq,
    DAT_COUNT qlen);

/* No completion flags: a receive posted here completes on the recv EVD of
 * whichever EP consumes the buffer. */
typedef DAT_RETURN (DAT_API *DAT_SRQ_POST_RECV_FUNC)(
    DAT_SRQ_HANDLE srq,
    DAT_COUNT num_segments,
    DAT_LMR_TRIPLET *local_iov,
    DAT_DTO_COOKIE cookie);

#define DAT_SRQ_CREATE(ia, pz, attr, srq) \
    (*DAT_HANDLE_TO_PROVIDER(ia)->srq_create_func)((ia), (pz), (attr), (srq))

#define DAT_SRQ_SET_LW(srq, low_watermark) \
    (*DAT_HANDLE_TO_PROVIDER(srq)->srq_set_lw_func)((srq), (low_watermark))

#define DAT_SRQ_FREE(srq) \
    (*DAT_HANDLE_TO_PROVIDER(srq)->srq_free_func)((srq))

#define DAT_SRQ_QUERY(srq, mask, param) \
    (*DAT_HANDLE_TO_PROVIDER(srq)->srq_query_func)((srq), (mask), (param))

#define DAT_SRQ_RESIZE(srq, qlen) \
    (*DAT_HANDLE_TO_PROVIDER(srq)->srq_resize_func)((srq), (qlen))

#define DAT_SRQ_POST_RECV(srq, num_segments, local_iov, cookie) \
    (*DAT_HANDLE_TO_PROVIDER(srq)->srq_post_recv_func)( \
        (srq), (num_segments), (local_iov), (cookie))

/* ---- Extensions ---- */

#ifdef DAT_EXTENSIONS
/* dat_extension_op() collects its variadic arguments and hands them to the
 * provider as a va_list. EXTENDEDOP is the reference's spelling. */
typedef DAT_RETURN (DAT_API *DAT_HANDLE_EXTENDEDOP_FUNC)(
    DAT_HANDLE handle,
    DAT_EXTENDED_OP op,
    va_list args);

#define DAT_HANDLE_EXTENDEDOP(handle, op, args) \
    (*DAT_HANDLE_TO_PROVIDER(handle)->handle_extendedop_func)((handle), (op), (args))
#endif /* DAT_EXTENSIONS */

#ifdef __cplusplus
}
#endif

#endif /* _DAT_REDIRECTION_H_ */
