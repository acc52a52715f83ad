// Taking events: dat_evd_dequeue (never blocks) and dat_evd_wait.
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#include "api.hpp"
#include "data_path.hpp"
#include "evd.hpp"

#include <chrono>
#include <cstdlib>

namespace fastdapl::core {

namespace {

// Longer than a thread's wake-up on a small VM (50-150 us): a spin shorter
// than the peer's wake-up lets a ping-pong settle into both sides sleeping
// (README, "Waiting").
constexpr unsigned long kDefaultWaitSpinUs = 200;

// How long dat_evd_wait polls the device before it sleeps
// (FASTDAPL_WAIT_SPIN_US, microseconds; 0: sleep at once). A reply that
// comes within it costs no wake-up on either side.
std::chrono::microseconds wait_spin()
{
    static const std::chrono::microseconds spin = [] {
        const char* v = std::getenv("FASTDAPL_WAIT_SPIN_US");
        if (!v || !*v)
            return std::chrono::microseconds(kDefaultWaitSpinUs);
        char* end = nullptr;
        const unsigned long us = std::strtoul(v, &end, 10);
        if (*end || us > 1000000)
            return std::chrono::microseconds(kDefaultWaitSpinUs);
        return std::chrono::microseconds(us);
    }();
    return spin;
}

// Past the first look, which found no completion: software and connection
// events, then a round of the device's progress. Entered with the EVD's
// lock held.
[[gnu::noinline]] DAT_RETURN dequeue_slow(Evd* evd, DAT_EVENT* event)
{
    std::unique_lock lock(evd->mutex, std::adopt_lock);
    if (!evd->events.empty()) {
        *event = evd->events.front();
        evd->events.pop_front();
        return DAT_SUCCESS;
    }
    // Let the device move (the softnic, in this thread), then look once
    // more, unless it found nothing to do (the common busy poll).
    if (evd->completions && dp::polls_device(evd)) {
        lock.unlock();
        if (!dp::poll_device(evd))
            return DAT_QUEUE_EMPTY;
        lock.lock();
        if (take_event(evd, *event))
            return DAT_SUCCESS;
    }
    // An empty queue is the ordinary answer of a polling loop, not an
    // error: the value without the class bit, as the reference returns it
    // (its dtest -p compares the whole value). DAT_GET_TYPE reads it alike.
    return DAT_QUEUE_EMPTY;
}

} // namespace

DAT_RETURN evd_dequeue(DAT_EVD_HANDLE handle, DAT_EVENT* event)
{
    Evd* evd = from_handle<Evd>(handle);
    if (!evd) [[unlikely]]
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_REQUEST);
    if (!event) [[unlikely]]
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    evd->mutex.lock();
    if (evd->waiters > 0) [[unlikely]] {
        evd->mutex.unlock();
        return error(DAT_INVALID_STATE, DAT_INVALID_STATE_EVD_WAITER);
    }
    // A completion first: the data path's common case.
    if (evd->completions && dp::take_completion(evd, *event)) [[likely]] {
        evd->mutex.unlock();
        return DAT_SUCCESS;
    }
    return dequeue_slow(evd, event);
}

DAT_RETURN evd_wait(DAT_EVD_HANDLE handle, DAT_TIMEOUT timeout, DAT_COUNT threshold, DAT_EVENT* event, DAT_COUNT* nmore)
{
    Evd* evd = from_handle<Evd>(handle);
    if (!evd)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_REQUEST);
    evd->ib_counters.add(DCNT_EVD_WAIT);
    if (threshold <= 0 || threshold > evd->qlen)
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    if (!event)
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG4);
    if (threshold > 1 && fed_without_threshold(evd))
        return error(DAT_INVALID_STATE, DAT_INVALID_STATE_EVD_CONFIG_NOTIFY);
    std::unique_lock lock(evd->mutex);
    if (!evd->waitable)
        return error(DAT_INVALID_STATE, DAT_INVALID_STATE_EVD_UNWAITABLE);
    if (evd->waiters > 0)
        return error(DAT_INVALID_STATE, DAT_INVALID_STATE_EVD_WAITER);
    ++evd->waiters;
    evd->notify_interest.fetch_add(1, std::memory_order_seq_cst);
#if !defined(__SANITIZE_THREAD__) // which has no fences (Device::notify_cqs)
    std::atomic_thread_fence(std::memory_order_seq_cst); // before any look at the CQ (Evd::notify_interest)
#endif
    if (evd->completions)
        dp::consumer_waits(evd);
    const std::uint64_t epoch = evd->unwaitable_epoch;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::microseconds(timeout);
    const bool forever = timeout == DAT_TIMEOUT_INFINITE;
    bool timed_out = false;
    // The device is polled for a while first (not past the deadline).
    const auto spin_until = timeout == 0 ? std::chrono::steady_clock::time_point{}
                                         : std::chrono::steady_clock::now() + wait_spin();
    while (ready_events(evd, threshold) < threshold && evd->unwaitable_epoch == epoch && !timed_out) {
        // A round of the device's progress before sleeping.
        if (evd->completions && dp::progress(evd, lock)) {
            if (ready_events(evd, threshold) >= threshold || evd->unwaitable_epoch != epoch)
                break;
            const auto now = std::chrono::steady_clock::now();
            if (now < spin_until && (forever || now < deadline))
                continue;
            dp::consumer_sleeps(evd);
        }
        if (evd->completions && dp::sleeps_on_fd(evd)) {
            // A verbs CQ is polled by the loop's look (ready_events) until
            // the spin ends, the lock let go between looks: a completion
            // within it costs no interrupt and no wake-up.
            const auto now = std::chrono::steady_clock::now();
            if (now < spin_until && (forever || now < deadline)) {
                lock.unlock();
                lock.lock();
                continue;
            }
            // Armed, then looked at once more: a completion after the look
            // wakes the sleeper. It sleeps on the device's fd, and on a wake
            // fd for everything else (posts, unwaitable, abort).
            dp::arm(evd);
            if (ready_events(evd, threshold) >= threshold)
                break;
            timed_out = !dp::sleep_on_fd(evd, lock, forever ? nullptr : &deadline);
            continue;
        }
        // Woken by a post, by the device's completion notification, or by unwaitable.
        if (forever)
            evd->cv.wait(lock);
        else
            timed_out = evd->cv.wait_until(lock, deadline) == std::cv_status::timeout;
    }
    --evd->waiters;
    evd->notify_interest.fetch_sub(1, std::memory_order_relaxed);
    if (evd->completions && dp::sleeps_on_fd(evd) && evd->cno.load()) // the CNO's trigger may have been taken here
        dp::arm(evd);
    if (evd->aborted)
        return error(DAT_ABORT);
    if (evd->unwaitable_epoch != epoch)
        return error(DAT_INVALID_STATE, DAT_INVALID_STATE_EVD_UNWAITABLE);
    const DAT_COUNT ready = ready_events(evd, threshold);
    if (ready < threshold) {
        if (nmore)
            *nmore = ready_events(evd, evd->qlen);
        return error(DAT_TIMEOUT_EXPIRED);
    }
    take_event(evd, *event);
    if (nmore)
        *nmore = ready_events(evd, evd->qlen);
    return DAT_SUCCESS;
}

} // namespace fastdapl::core
