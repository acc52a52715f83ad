// Shared receive queues.
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#include "srq.hpp"

#include "api.hpp"
#include "data_path.hpp"
#include "ia.hpp"
#include "pz.hpp"

#include <dat2/fastdapl.h>

#include <algorithm>
#include <cstring>
#include <vector>

namespace fastdapl::core {

void srq_low_watermark(void* context)
{
    auto* srq = static_cast<Srq*>(context);
    post_async(srq->ia, static_cast<DAT_EVENT_NUMBER>(FASTDAPL_ASYNC_WATERMARK_EVENT), srq,
               DAT_SRQ_LOW_WATERMARK_EVENT);
}

void srq_failed(void* context)
{
    auto* srq = static_cast<Srq*>(context);
    post_async(srq->ia, DAT_ASYNC_ERROR_PROVIDER_INTERNAL_ERROR, srq, DAT_SRQ_TRANSFER_TO_ERROR);
}

DAT_RETURN srq_create(DAT_IA_HANDLE handle, DAT_PZ_HANDLE pz_handle, DAT_SRQ_ATTR* attr, DAT_SRQ_HANDLE* out)
{
    Ia* ia = from_handle<Ia>(handle);
    if (!ia)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA);
    Pz* pz = from_handle<Pz>(pz_handle);
    if (!pz || pz->ia != ia)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_PZ);
    if (!attr || !out)
        return error(DAT_INVALID_PARAMETER, !attr ? DAT_INVALID_ARG3 : DAT_INVALID_ARG4);
    // A new SRQ is empty: a low watermark would fire at once, so the spec
    // asks for DAT_SRQ_LW_DEFAULT here and dat_srq_set_lw afterwards.
    if (attr->max_recv_dtos <= 0 || attr->max_recv_iov <= 0 || attr->low_watermark != DAT_SRQ_LW_DEFAULT)
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    if (attr->max_recv_dtos > kMaxRecvPerSrq || attr->max_recv_iov > static_cast<DAT_COUNT>(kMaxSge))
        return error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_SRQ);
    Srq* srq = make_object<Srq>();
    if (!srq)
        return error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
    srq->provider = ia->provider;
    srq->ia = ia;
    srq->path = ia->device->kind();
    srq->pz = pz;
    srq->max_recv_dtos = attr->max_recv_dtos;
    srq->max_recv_iov = attr->max_recv_iov;
    if (DAT_RETURN rc = ia->device->create_srq(*srq); rc != DAT_SUCCESS) {
        destroy_object(srq);
        return rc;
    }
    ++pz->users;
    ia->adopt(srq);
    *out = srq;
    return DAT_SUCCESS;
}

void destroy_srq(Srq* srq)
{
    srq->ia->device->destroy_srq(*srq);
    destroy_object(srq);
}

DAT_RETURN srq_free(DAT_SRQ_HANDLE handle)
{
    Srq* srq = from_handle<Srq>(handle);
    if (!srq)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_SRQ);
    if (srq->users.load() > 0) // nothing changes: the endpoints go first
        return error(DAT_INVALID_STATE, DAT_INVALID_STATE_SRQ_IN_USE);
    --srq->pz->users;
    srq->ia->forget(srq);
    destroy_srq(srq);
    return DAT_SUCCESS;
}

DAT_RETURN srq_post_recv(DAT_SRQ_HANDLE handle, DAT_COUNT n, DAT_LMR_TRIPLET* iov, DAT_DTO_COOKIE cookie)
{
    Srq* srq = from_handle<Srq>(handle);
    if (!srq) [[unlikely]]
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_SRQ);
    if (n < 0 || n > srq->max_recv_iov || (n > 0 && !iov)) [[unlikely]]
        return error(DAT_INVALID_PARAMETER, n < 0 || n > srq->max_recv_iov ? DAT_INVALID_ARG2 : DAT_INVALID_ARG3);
    return dp::srq_post(srq, n, iov, cookie);
}

namespace {

DAT_SRQ_STATE srq_state(Srq* srq)
{
    return dp::srq_failed(srq) ? DAT_SRQ_STATE_ERROR : DAT_SRQ_STATE_OPERATIONAL;
}

} // namespace

DAT_RETURN srq_query(DAT_SRQ_HANDLE handle, DAT_SRQ_PARAM_MASK mask, DAT_SRQ_PARAM* p)
{
    Srq* srq = from_handle<Srq>(handle);
    if (!srq)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_SRQ);
    if (mask & ~DAT_SRQ_FIELD_ALL)
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    if (!p)
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    std::memset(p, 0, sizeof *p);
    p->ia_handle = consumer_handle(srq->ia);
    p->srq_state = srq_state(srq);
    p->pz_handle = srq->pz;
    p->max_recv_dtos = srq->max_recv_dtos;
    p->max_recv_iov = srq->max_recv_iov;
    p->low_watermark = srq->low_watermark.load();
    // Outstanding first: a buffer reaped between the two reads then shows
    // in neither, never as available yet not outstanding.
    p->outstanding_dto_count = dp::srq_outstanding(srq);
    p->available_dto_count = dp::srq_available(srq);
    if (srq->path != PathKind::softnic) {
        // A verbs device does not show when an endpoint takes a buffer, but
        // a completed receive is in a CQ before it is reaped: those buffers
        // are taken. Looked for in the receive EVDs of the SRQ's endpoints.
        std::vector<Evd*> evds;
        {
            std::lock_guard lock(srq->ia->objects_mutex);
            for (Object* o : srq->ia->objects)
                if (o->type == DAT_HANDLE_TYPE_EP)
                    if (const Ep* ep = static_cast<const Ep*>(o); ep->srq == srq && ep->recv_evd && ep->queues &&
                                                                  std::find(evds.begin(), evds.end(), ep->recv_evd) ==
                                                                      evds.end())
                        evds.push_back(ep->recv_evd);
        }
        DAT_COUNT arrived = 0;
        for (Evd* evd : evds) {
            std::lock_guard lock(evd->mutex);
            arrived += dp::srq_arrived(evd, srq);
        }
        p->available_dto_count = std::max<DAT_COUNT>(0, p->available_dto_count - arrived);
    }
    return DAT_SUCCESS;
}

DAT_RETURN srq_resize(DAT_SRQ_HANDLE handle, DAT_COUNT qlen)
{
    Srq* srq = from_handle<Srq>(handle);
    if (!srq)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_SRQ);
    if (qlen <= 0)
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    if (dp::srq_failed(srq))
        return error(DAT_INVALID_STATE, DAT_INVALID_STATE_SRQ_ERROR);
    if (qlen > kMaxRecvPerSrq)
        return error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_SRQ);
    // Never lose a buffer: not below what is outstanding, nor below the
    // low watermark (spec 6.5.5).
    if (qlen < dp::srq_outstanding(srq) || qlen < srq->low_watermark.load())
        return error(DAT_INVALID_STATE, DAT_INVALID_STATE_SRQ_IN_USE);
    if (DAT_RETURN rc = srq->ia->device->grow_srq(*srq, qlen); rc != DAT_SUCCESS)
        return rc;
    // Shrinking keeps the ring and lowers what may be outstanding.
    srq->max_recv_dtos = qlen;
    return DAT_SUCCESS;
}

DAT_RETURN srq_set_lw(DAT_SRQ_HANDLE handle, DAT_COUNT low_watermark)
{
    Srq* srq = from_handle<Srq>(handle);
    if (!srq)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_SRQ);
    if (low_watermark < 0 || low_watermark > srq->max_recv_dtos)
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    if (dp::srq_failed(srq))
        return error(DAT_INVALID_STATE, DAT_INVALID_STATE_SRQ_ERROR);
    srq->low_watermark = low_watermark;
    // Already below it: the one event of this arming now.
    bool below_now = false;
    if (DAT_RETURN rc = srq->ia->device->arm_srq_limit(*srq, low_watermark, below_now); rc != DAT_SUCCESS)
        return rc;
    if (below_now)
        srq_low_watermark(srq);
    return DAT_SUCCESS;
}

} // namespace fastdapl::core
