// Consumer notification objects.
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#include "cno.hpp"

#include "api.hpp"
#include "evd.hpp"
#include "ia.hpp"

#include <sys/eventfd.h>
#include <unistd.h>

#include <chrono>
#include <thread>

namespace fastdapl::core {

namespace {

bool agent_valid(const DAT_OS_WAIT_PROXY_AGENT& a)
{
    return a.proxy_agent_func || !a.instance_data;
}

DAT_RETURN cno_make(Ia* ia, const DAT_OS_WAIT_PROXY_AGENT& agent, int fd, DAT_CNO_HANDLE* out)
{
    Cno* cno = make_object<Cno>();
    if (!cno)
        return error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
    cno->provider = ia->provider;
    cno->ia = ia;
    cno->agent = agent;
    cno->fd = fd;
    ia->adopt(cno);
    *out = cno;
    return DAT_SUCCESS;
}

} // namespace

DAT_RETURN cno_create(DAT_IA_HANDLE handle, DAT_OS_WAIT_PROXY_AGENT agent, DAT_CNO_HANDLE* out)
{
    Ia* ia = from_handle<Ia>(handle);
    if (!ia)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA);
    if (!agent_valid(agent))
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    if (!out)
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    return cno_make(ia, agent, -1, out);
}

DAT_RETURN cno_fd_create(DAT_IA_HANDLE handle, DAT_FD* fd_out, DAT_CNO_HANDLE* out)
{
    Ia* ia = from_handle<Ia>(handle);
    if (!ia)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA);
    if (!fd_out || !out)
        return error(DAT_INVALID_PARAMETER, !fd_out ? DAT_INVALID_ARG2 : DAT_INVALID_ARG3);
    // Readable after a trigger; reading it (or dat_cno_wait) re-arms it.
    const int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (fd < 0)
        return error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
    if (DAT_RETURN rc = cno_make(ia, DAT_OS_WAIT_PROXY_AGENT{nullptr, nullptr}, fd, out); rc != DAT_SUCCESS) {
        ::close(fd);
        return rc;
    }
    *fd_out = fd;
    return DAT_SUCCESS;
}

DAT_RETURN cno_modify_agent(DAT_CNO_HANDLE handle, DAT_OS_WAIT_PROXY_AGENT agent)
{
    Cno* cno = from_handle<Cno>(handle);
    if (!cno)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_CNO);
    if (!agent_valid(agent))
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    std::lock_guard lock(cno->mutex);
    if (cno->fd >= 0)
        return error(DAT_INVALID_STATE); // its file descriptor is its agent for good
    cno->agent = agent;
    return DAT_SUCCESS;
}

DAT_RETURN cno_query(DAT_CNO_HANDLE handle, DAT_CNO_PARAM_MASK mask, DAT_CNO_PARAM* param)
{
    Cno* cno = from_handle<Cno>(handle);
    if (!cno)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_CNO);
    // The Linux values are not bit flags (PROXY = 3, ALL = 4): any of them fills everything.
    if (static_cast<unsigned>(mask) > DAT_CNO_FIELD_ALL)
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    if (mask && !param)
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    if (!mask)
        return DAT_SUCCESS;
    std::lock_guard lock(cno->mutex);
    std::memset(param, 0, sizeof *param);
    param->ia_handle = consumer_handle(cno->ia);
    if (cno->fd >= 0) {
        param->proxy_type = DAT_PROXY_TYPE_FD;
        param->proxy.fd = cno->fd;
    } else if (cno->agent.proxy_agent_func) {
        param->proxy_type = DAT_PROXY_TYPE_AGENT;
        param->proxy.agent = cno->agent;
    } else {
        param->proxy_type = DAT_PROXY_TYPE_NONE;
        param->proxy.agent = DAT_OS_WAIT_PROXY_AGENT{nullptr, nullptr};
    }
    return DAT_SUCCESS;
}

void destroy_cno(Cno* cno)
{
    if (cno->fd >= 0)
        ::close(cno->fd);
    destroy_object(cno);
}

DAT_RETURN cno_free(DAT_CNO_HANDLE handle)
{
    Cno* cno = from_handle<Cno>(handle);
    if (!cno)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_CNO);
    {
        std::lock_guard lock(cno->mutex);
        if (cno->users.load() > 0 || cno->waiters > 0)
            return error(DAT_INVALID_STATE,
                         cno->waiters > 0 ? DAT_INVALID_STATE_CNO_DEAD : DAT_INVALID_STATE_CNO_IN_USE);
    }
    cno->ia->forget(cno);
    destroy_cno(cno);
    return DAT_SUCCESS;
}

// Wakes every waiter with a NULL EVD (the IA closes, or no EVD feeds it any more).
void release_cno_waiters(Cno* cno)
{
    std::unique_lock lock(cno->mutex);
    ++cno->release_epoch;
    cno->cv.notify_all();
    while (cno->waiters > 0) {
        lock.unlock();
        std::this_thread::yield();
        lock.lock();
    }
}

DAT_RETURN cno_wait(DAT_CNO_HANDLE handle, DAT_TIMEOUT timeout, DAT_EVD_HANDLE* evd_out)
{
    Cno* cno = from_handle<Cno>(handle);
    if (!cno)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_CNO);
    if (!evd_out)
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    std::unique_lock lock(cno->mutex);
    ++cno->waiters;
    const std::uint64_t epoch = cno->release_epoch;
    auto woken = [&] { return cno->pending > 0 || cno->release_epoch != epoch; };
    if (timeout == DAT_TIMEOUT_INFINITE)
        cno->cv.wait(lock, woken);
    else
        cno->cv.wait_for(lock, std::chrono::microseconds(timeout), woken);
    --cno->waiters;
    if (cno->pending > 0) {
        cno->pending = 0; // this waiter takes the trigger
        *evd_out = cno->last_trigger;
        if (cno->fd >= 0) { // taken here: the descriptor is no longer readable
            std::uint64_t drained;
            [[maybe_unused]] ssize_t n = ::read(cno->fd, &drained, sizeof drained);
        }
        return DAT_SUCCESS;
    }
    *evd_out = DAT_HANDLE_NULL;
    if (cno->release_epoch != epoch)
        return DAT_SUCCESS; // released: the hint is NULL
    return error(DAT_QUEUE_EMPTY);
}

DAT_RETURN cno_trigger(DAT_CNO_HANDLE handle, DAT_EVD_HANDLE* evd_out)
{
    Cno* cno = from_handle<Cno>(handle);
    if (!cno)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_CNO);
    if (!evd_out)
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    std::lock_guard lock(cno->mutex);
    *evd_out = cno->last_trigger;
    return DAT_SUCCESS;
}

// Moves an EVD from its CNO (if any) to `to` (may be NULL).
void link_cno(Evd* evd, Cno* to)
{
    Cno* from = evd->cno.exchange(to);
    if (to && !from) // its completions are told again (Evd::notify_interest)
        evd->notify_interest.fetch_add(1, std::memory_order_seq_cst);
    else if (from && !to)
        evd->notify_interest.fetch_sub(1, std::memory_order_relaxed);
    if (to)
        ++to->users;
    if (evd->completions && (to || from)) // its completions trigger the CNO, or no longer
        evd->ia->device->watch_completions(*evd, to != nullptr);
    if (from && --from->users == 0)
        release_cno_waiters(from); // nothing can trigger it any more
}

DAT_RETURN evd_modify_cno(DAT_EVD_HANDLE handle, DAT_CNO_HANDLE cno_handle)
{
    Evd* evd = from_handle<Evd>(handle);
    if (!evd)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_REQUEST);
    Cno* cno = cno_handle ? from_handle<Cno>(cno_handle) : nullptr;
    if (cno_handle && (!cno || cno->ia != evd->ia))
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_CNO);
    link_cno(evd, cno);
    return DAT_SUCCESS;
}

// One trigger: a waiter wakes (or the next wait returns at once), the agent
// is called once and detached, the eventfd becomes readable.
void trigger_cno(Cno* cno, Evd* evd)
{
    DAT_OS_WAIT_PROXY_AGENT agent{nullptr, nullptr};
    {
        std::lock_guard lock(cno->mutex);
        cno->last_trigger = evd;
        cno->pending = 1; // several triggers before a wake-up merge into one
        std::swap(agent, cno->agent);
        if (cno->fd >= 0) {
            const std::uint64_t one = 1;
            [[maybe_unused]] ssize_t n = ::write(cno->fd, &one, sizeof one);
        }
        cno->cv.notify_one();
    }
    if (agent.proxy_agent_func) // outside the lock: the agent may call us
        agent.proxy_agent_func(agent.instance_data, evd);
}

} // namespace fastdapl::core
