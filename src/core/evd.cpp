// Event dispatchers: the event queue, overflow, and the calls that create,
// query, configure and free an EVD (dequeue and wait: evd_wait.cpp).
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#include "evd.hpp"

#include "api.hpp"
#include "cno.hpp"
#include "data_path.hpp"
#include "ep.hpp"
#include "ia.hpp"

#include <thread>

namespace fastdapl::core {

namespace {

constexpr DAT_EVD_FLAGS kStreams = static_cast<DAT_EVD_FLAGS>(
    DAT_EVD_SOFTWARE_FLAG | DAT_EVD_ASYNC_FLAG | DAT_EVD_DTO_FLAG | DAT_EVD_CONNECTION_FLAG | DAT_EVD_CR_FLAG);

DAT_RETURN evd_set_enabled(DAT_EVD_HANDLE handle, bool enabled)
{
    Evd* evd = from_handle<Evd>(handle);
    if (!evd)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_REQUEST);
    std::lock_guard lock(evd->mutex);
    evd->enabled = enabled;
    return DAT_SUCCESS;
}

} // namespace

Evd* new_evd(Ia* ia, DAT_COUNT qlen, DAT_EVD_FLAGS flags)
{
    Evd* evd = make_object<Evd>();
    if (!evd)
        return nullptr;
    evd->provider = ia->provider;
    evd->ia = ia;
    evd->path = ia->device->kind();
    evd->qlen = qlen;
    evd->flags = flags;
    return evd;
}

void wake_waiters(Evd* evd)
{
    // Only dat_evd_wait sleeps on cv, counted in waiters under the EVD's
    // lock (held here): with none, the notify (a lock and a broadcast of
    // condition_variable_any) is skipped for each completion a poller reaps.
    if (evd->waiters > 0)
        evd->cv.notify_all();
    if (evd->completions)
        dp::wake_fd_sleeper(evd);
}

Cno* cno_to_trigger(Evd* evd)
{
    return evd->enabled && evd->waiters == 0 ? evd->cno.load() : nullptr;
}

bool post_event(Evd* evd, const DAT_EVENT& event)
{
    Cno* cno;
    {
        std::lock_guard lock(evd->mutex);
        if (static_cast<DAT_COUNT>(evd->events.size()) >= evd->qlen)
            return false;
        evd->events.push_back(event);
        wake_waiters(evd);
        cno = cno_to_trigger(evd);
    }
    if (cno)
        trigger_cno(cno, evd);
    return true;
}

void post_async(Ia* ia, DAT_EVENT_NUMBER number, DAT_HANDLE about, DAT_COUNT reason)
{
    Evd* async = ia->async_evd;
    if (!async)
        return; // opened with DAT_EVD_ASYNC_EXISTS and none given: nowhere to report
    DAT_EVENT e{};
    e.event_number = number;
    e.evd_handle = async;
    e.event_data.asynch_error_event_data.dat_handle = about;
    e.event_data.asynch_error_event_data.reason = reason;
    std::lock_guard lock(async->mutex);
    if (async->overflow_reported)
        return;
    if (static_cast<DAT_COUNT>(async->events.size()) >= async->qlen) {
        async->overflow_reported = true;
        e.event_number = DAT_ASYNC_ERROR_EVD_OVERFLOW;
        e.event_data.asynch_error_event_data.dat_handle = async;
        e.event_data.asynch_error_event_data.reason = DAT_EVD_OVERFLOW_ERROR;
    }
    async->events.push_back(e);
    wake_waiters(async);
}

void report_overflow(Evd* evd)
{
    if (!evd->overflow_reported.exchange(true))
        post_async(evd->ia, DAT_ASYNC_ERROR_EVD_OVERFLOW, evd, DAT_EVD_OVERFLOW_ERROR);
}

void completions_arrived(Evd* evd)
{
    Cno* cno;
    {
        std::lock_guard lock(evd->mutex);
        wake_waiters(evd);
        cno = cno_to_trigger(evd);
    }
    if (cno)
        trigger_cno(cno, evd);
}

DAT_COUNT ready_events(Evd* evd, DAT_COUNT limit)
{
    const auto n = static_cast<DAT_COUNT>(evd->events.size());
    return evd->completions ? dp::ready_completions(evd, n, limit) : n;
}

bool take_event(Evd* evd, DAT_EVENT& e)
{
    if (evd->completions && dp::take_completion(evd, e))
        return true;
    if (evd->events.empty())
        return false;
    e = evd->events.front();
    evd->events.pop_front();
    return true;
}

bool fed_without_threshold(Evd* evd)
{
    constexpr auto kRecvModes =
        static_cast<DAT_COMPLETION_FLAGS>(DAT_COMPLETION_UNSIGNALLED_FLAG | DAT_COMPLETION_SOLICITED_WAIT_FLAG);
    std::lock_guard lock(evd->ia->objects_mutex);
    for (Object* o : evd->ia->objects) {
        if (o->type != DAT_HANDLE_TYPE_EP)
            continue;
        const auto* ep = static_cast<const Ep*>(o);
        if ((ep->recv_evd == evd && (ep->attr.recv_completion_flags & kRecvModes)) ||
            (ep->request_evd == evd && (ep->attr.request_completion_flags & DAT_COMPLETION_UNSIGNALLED_FLAG)))
            return true;
    }
    return false;
}

void release_waiters(Evd* evd)
{
    std::unique_lock lock(evd->mutex);
    evd->aborted = true;
    ++evd->unwaitable_epoch;
    wake_waiters(evd);
    while (evd->waiters > 0) { // they leave promptly once woken
        lock.unlock();
        std::this_thread::yield();
        lock.lock();
    }
}

void destroy_evd(Evd* evd)
{
    release_waiters(evd);
    link_cno(evd, nullptr); // CNOs go after every EVD
    if (evd->completions)
        evd->ia->device->destroy_completions(*evd);
    destroy_object(evd);
}

DAT_RETURN evd_create(DAT_IA_HANDLE handle, DAT_COUNT qlen, DAT_CNO_HANDLE cno, DAT_EVD_FLAGS flags,
                      DAT_EVD_HANDLE* out)
{
    Ia* ia = from_handle<Ia>(handle);
    if (!ia)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA);
    if (qlen <= 0 || qlen > kMaxEvdQlen)
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    if (!out)
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG5);
    if (flags == 0 || (flags & ~(DAT_EVD_SOFTWARE_FLAG | DAT_EVD_DEFAULT_FLAG | DAT_EVD_ASYNC_FLAG)))
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG4);
    // DAT_EVD_DEFAULT_FLAG includes the RMR bind stream; accepting it is
    // harmless while dat_rmr_bind is unsupported (no such event can occur).
    if (flags & ~(kStreams | DAT_EVD_RMR_BIND_FLAG))
        return not_supported();
    Cno* linked = cno ? from_handle<Cno>(cno) : nullptr;
    if (cno && (!linked || linked->ia != ia))
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_CNO);
    Evd* evd = new_evd(ia, qlen, flags);
    if (!evd)
        return error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
    if (flags & DAT_EVD_DTO_FLAG) {
        if (DAT_RETURN rc = ia->device->create_completions(*evd); rc != DAT_SUCCESS) {
            destroy_object(evd);
            return rc;
        }
    }
    if (linked)
        link_cno(evd, linked);
    ia->adopt(evd);
    *out = evd;
    return DAT_SUCCESS;
}

DAT_RETURN evd_query(DAT_EVD_HANDLE handle, DAT_EVD_PARAM_MASK mask, DAT_EVD_PARAM* param)
{
    Evd* evd = from_handle<Evd>(handle);
    if (!evd)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_REQUEST);
    if (mask & ~DAT_EVD_FIELD_ALL)
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    if (mask && !param)
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    if (!mask)
        return DAT_SUCCESS;
    std::lock_guard lock(evd->mutex);
    param->ia_handle = consumer_handle(evd->ia);
    param->evd_qlen = evd->qlen;
    param->evd_state = static_cast<DAT_EVD_STATE>(
        (evd->enabled ? DAT_EVD_STATE_ENABLED : DAT_EVD_STATE_DISABLED) |
        (evd->waitable ? DAT_EVD_STATE_WAITABLE : DAT_EVD_STATE_UNWAITABLE) |
        (fed_without_threshold(evd) ? DAT_EVD_STATE_CONFIG_NOTIFY : DAT_EVD_STATE_CONFIG_THRESHOLD));
    param->cno_handle = evd->cno.load();
    param->evd_flags = evd->flags;
    return DAT_SUCCESS;
}

DAT_RETURN evd_free(DAT_EVD_HANDLE handle)
{
    Evd* evd = from_handle<Evd>(handle);
    if (!evd)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_REQUEST);
    {
        std::lock_guard lock(evd->mutex);
        if (evd->waiters > 0)
            return error(DAT_INVALID_STATE, DAT_INVALID_STATE_EVD_WAITER);
    }
    if (evd->is_async && evd->ia->async_evd == evd)
        return error(DAT_INVALID_STATE, DAT_INVALID_STATE_EVD_ASYNC); // freed with its IA
    if (evd->users.load() > 0)
        return error(DAT_INVALID_STATE, DAT_INVALID_STATE_EVD_IN_USE);
    evd->ia->forget(evd);
    link_cno(evd, nullptr);
    if (evd->completions)
        evd->ia->device->destroy_completions(*evd);
    destroy_object(evd);
    return DAT_SUCCESS;
}

DAT_RETURN evd_post_se(DAT_EVD_HANDLE handle, const DAT_EVENT* event)
{
    Evd* evd = from_handle<Evd>(handle);
    if (!evd)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_REQUEST);
    if (!event || event->event_number != DAT_SOFTWARE_EVENT)
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    if (!(evd->flags & DAT_EVD_SOFTWARE_FLAG))
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG1);
    DAT_EVENT e = *event;
    e.evd_handle = evd;
    if (!post_event(evd, e))
        return error(DAT_QUEUE_FULL);
    return DAT_SUCCESS;
}

DAT_RETURN evd_enable(DAT_EVD_HANDLE h)
{
    return evd_set_enabled(h, true);
}
DAT_RETURN evd_disable(DAT_EVD_HANDLE h)
{
    return evd_set_enabled(h, false);
}

DAT_RETURN evd_set_unwaitable(DAT_EVD_HANDLE handle)
{
    Evd* evd = from_handle<Evd>(handle);
    if (!evd)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_REQUEST);
    std::lock_guard lock(evd->mutex);
    evd->waitable = false;
    ++evd->unwaitable_epoch; // releases a blocked waiter with INVALID_STATE
    wake_waiters(evd);
    return DAT_SUCCESS;
}

DAT_RETURN evd_clear_unwaitable(DAT_EVD_HANDLE handle)
{
    Evd* evd = from_handle<Evd>(handle);
    if (!evd)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_REQUEST);
    std::lock_guard lock(evd->mutex);
    evd->waitable = true;
    return DAT_SUCCESS;
}

DAT_RETURN evd_resize(DAT_EVD_HANDLE handle, DAT_COUNT qlen)
{
    // Not thread safe with other calls on the same EVD (the spec leaves that
    // to the provider): its completion queue may be replaced.
    Evd* evd = from_handle<Evd>(handle);
    if (!evd)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_REQUEST);
    if (qlen <= 0 || qlen > kMaxEvdQlen)
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    {
        std::lock_guard lock(evd->mutex);
        if (evd->waiters > 0)
            return error(DAT_INVALID_STATE, DAT_INVALID_STATE_EVD_WAITER);
        if (qlen < ready_events(evd, kMaxEvdQlen))
            return error(DAT_INVALID_STATE); // events would be lost
    }
    // Outside the EVD's lock: the software NIC takes its own, then notifies
    // EVDs (which takes theirs).
    if (evd->completions) {
        if (DAT_RETURN rc = evd->ia->device->resize_completions(*evd, qlen); rc != DAT_SUCCESS)
            return rc;
    }
    std::lock_guard lock(evd->mutex);
    evd->qlen = qlen; // software events: the queue grows on demand
    return DAT_SUCCESS;
}

} // namespace fastdapl::core
