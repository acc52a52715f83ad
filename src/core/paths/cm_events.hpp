// What both connection managers (src/cm) report, in the core's terms.
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#pragma once

#include "../service_point.hpp"
#include "socket_cm.hpp" // cm::Outcome, cm::Request: shared by rdma_cm

namespace fastdapl::core {

inline AttemptOutcome outcome_of(cm::Outcome o)
{
    switch (o) {
    case cm::Outcome::established:
        return AttemptOutcome::established;
    case cm::Outcome::rejected:
        return AttemptOutcome::rejected;
    case cm::Outcome::no_listener:
        return AttemptOutcome::no_listener;
    case cm::Outcome::unreachable:
        return AttemptOutcome::unreachable;
    case cm::Outcome::timed_out:
        return AttemptOutcome::timed_out;
    case cm::Outcome::failed:
        break;
    }
    return AttemptOutcome::failed;
}

inline IncomingRequest incoming(const cm::Request& r)
{
    return {r.listener,    r.id,       r.remote,       static_cast<DAT_CONN_QUAL>(r.conn_qual),
            r.private_data, r.datagram, r.remote_qpn, r.datagram_port};
}

} // namespace fastdapl::core
