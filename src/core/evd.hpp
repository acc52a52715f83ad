// Event dispatcher: a queue of software, connection, CR and async events,
// and for a DTO EVD the completion engine of its IA's device kind.
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#pragma once

#include "device_path.hpp"
#include "extensions.hpp"
#include "handles.hpp"

#include "spin_lock.hpp" // fastpath

#include <condition_variable>
#include <deque>
#include <mutex>

namespace fastdapl::core {

using fastpath::SpinLock;

class Cno;
class Ep;

class Evd : public Object {
public:
    static constexpr DAT_HANDLE_TYPE kHandleType = DAT_HANDLE_TYPE_EVD;
    PathKind path = PathKind::softnic;
    EvdCompletions* completions = nullptr; // DTO EVDs: the engine of the IA's kind
    DAT_EVD_FLAGS flags = DAT_EVD_DEFAULT_FLAG;
    DAT_COUNT qlen = 0;
    bool enabled = true;
    bool waitable = true;
    bool is_async = false; // the IA's async EVD: freed with the IA
    // See ia.hpp for where this lock sits in the lock order.
    SpinLock mutex;
    std::condition_variable_any cv;
    std::deque<DAT_EVENT> events;
    int waiters = 0;
    // Nonzero while a thread waits or a CNO is linked: only then does a
    // softnic device call this EVD's completion notification (Cq::set_notify;
    // raised, then a seq_cst fence, before the waiter looks at the CQ).
    std::atomic<std::uint32_t> notify_interest{0};
    std::uint64_t unwaitable_epoch = 0;         // bumped to release waiters
    bool aborted = false;                       // the IA closed abruptly under a waiter
    std::atomic<bool> overflow_reported{false}; // DAT_ASYNC_ERROR_EVD_OVERFLOW goes out once
    std::atomic<int> users{0};                  // EPs and PSPs that report here
    std::atomic<Cno*> cno{nullptr};             // notified of new events while enabled and not waited on
    EvdCounters ib_counters;                    // dat_ib_query_counters
};

Evd* new_evd(Ia* ia, DAT_COUNT qlen, DAT_EVD_FLAGS flags);
// Waiters leave (with DAT_ABORT), its CNO link and completions go, then it.
void destroy_evd(Evd* evd);
// Wakes every waiter and waits until they have left.
void release_waiters(Evd* evd);

// Queues an event; false when the queue is full.
bool post_event(Evd* evd, const DAT_EVENT& event);
// An event on the IA's async EVD. When that EVD fills up, its own overflow
// is the last thing it reports (the spec calls that catastrophic).
void post_async(Ia* ia, DAT_EVENT_NUMBER number, DAT_HANDLE about, DAT_COUNT reason);
// Once per EVD: events that did not fit were lost.
void report_overflow(Evd* evd);
// Completions arrived on a DTO EVD (a device thread): waiters and the CNO hear of it.
void completions_arrived(Evd* evd);

// Wakes the EVD's waiter, wherever it sleeps (the EVD's lock held).
void wake_waiters(Evd* evd);
// The CNO to trigger for a new event, read under the EVD's lock: none while
// the EVD is disabled or a thread waits on it directly.
Cno* cno_to_trigger(Evd* evd);

// A DTO completion event of `ep` on `evd`: the fields a DTO event has are
// set here (the rest of the event is not read for this event number), its
// data left for the caller.
inline DAT_DTO_COMPLETION_EVENT_DATA& begin_dto_event(DAT_EVENT& e, Evd* evd, Ep* ep)
{
    e.event_number = DAT_DTO_COMPLETION_EVENT;
    e.evd_handle = evd;
    auto& d = e.event_data.dto_completion_event_data;
    d.ep_handle = reinterpret_cast<DAT_EP_HANDLE>(ep);
    d.rmr_context = 0;
    return d;
}

// Events ready on an EVD, counting at most `limit` (its lock held;
// completions are not consumed).
DAT_COUNT ready_events(Evd* evd, DAT_COUNT limit);
// The next event (its lock held): completions first, so a connection's DTOs
// complete (or flush) before its DISCONNECTED, and none before ESTABLISHED.
bool take_event(Evd* evd, DAT_EVENT& e);

// Whether an EP stream feeding `evd` completes in a mode where a wait
// threshold above 1 means nothing.
bool fed_without_threshold(Evd* evd);

// Whether the EVD is a DTO EVD with completions.
inline bool dto_evd(const Evd* evd)
{
    return evd && (evd->flags & DAT_EVD_DTO_FLAG) && evd->completions;
}

} // namespace fastdapl::core
