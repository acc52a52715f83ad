// The connection seam on verbs IAs: rdma_cm (src/cm/rdma_cm). The
// endpoint's QP is handed to the rdma_cm id, so rdma_cm moves it through
// INIT/RTR/RTS and to ERROR; the established connection's id is kept until
// the EP is reset or freed.
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#include "../connection.hpp"
#include "../data_path.hpp"
#include "../ia.hpp"
#include "../service_point.hpp"
#include "cm_events.hpp"
#include "rdma_cm.hpp"
#include "verbs.hpp"

#include <algorithm>
#include <map>

namespace fastdapl::core {

namespace {

ibv_qp* qp_of(Ep& ep)
{
    return static_cast<VerbsQp*>(ep.queues)->qp;
}

class RdmaConnections final : public ConnectionManager {
public:
    RdmaConnections(Ia& ia, verbs::Device& device)
        : ia_(ia), device_(device),
          cm_(cm::RdmaCm::Callbacks{[&ia](const cm::Request& r) {
                                        cm_request(&ia, incoming(r));
                                    },
                                    [&ia](std::uint64_t id, cm::Outcome o, const cm::Message& m,
                                          const cm::DatagramPeer* peer) {
                                        if (peer) // a UD exchange: the address handle is made from the route
                                            cm_result(&ia, id, outcome_of(o), -1, m.private_data, peer->qpn, 0,
                                                      &peer->ah_attr);
                                        else
                                            cm_result(&ia, id, outcome_of(o), -1, m.private_data);
                                    },
                                    [this](std::uint64_t id, bool orderly) { disconnected(id, orderly); }})
    {
    }

    // What an IB CM REQ leaves after rdma_cm's header (the smallest of REQ/REP/REJ).
    DAT_COUNT max_private_data() const override { return static_cast<DAT_COUNT>(cm::kRdmaCmMaxPrivateData); }

    // rdma_cm carries no qualifier: one listener per port, so qualifiers
    // that share a port (port_of_qualifier) exclude each other.
    int listen(const sockaddr_storage& local, std::uint64_t& qual, std::uint64_t listener) override
    {
        std::uint16_t port = cm::port_of_qualifier(qual);
        const int err = cm_.listen(reinterpret_cast<const sockaddr*>(&local), port, listener, ia_.device->ud_endpoints());
        if (err == 0 && qual == 0)
            qual = port;
        return err;
    }
    void unlisten(std::uint64_t listener) override { cm_.unlisten(listener); }

    std::uint64_t connect(Ep& ep, std::vector<std::uint8_t> pdata, std::chrono::milliseconds timeout) override
    {
        if (ep.ud)
            return cm_.connect_datagram(reinterpret_cast<const sockaddr*>(&ia_.address),
                                        reinterpret_cast<const sockaddr*>(&ep.remote), qp_of(ep)->qp_num,
                                        std::move(pdata), timeout);
        return cm_.connect(reinterpret_cast<const sockaddr*>(&ia_.address),
                           reinterpret_cast<const sockaddr*>(&ep.remote), qp_of(ep), std::move(pdata), timeout,
                           read_depth(ep));
    }
    bool accept(std::uint64_t id, Ep& ep, std::vector<std::uint8_t> pdata, std::chrono::milliseconds timeout) override
    {
        return cm_.accept(id, qp_of(ep), std::move(pdata), timeout, read_depth(ep));
    }
    void reject(std::uint64_t id, std::vector<std::uint8_t> pdata) override { cm_.reject(id, std::move(pdata)); }
    void first_data_arrived(Ep& ep) override { cm_.first_data_arrived(qp_of(ep)); }
    void refuse(std::uint64_t id, Refusal) override { cm_.refuse(id); }

    void stop_datagram_attempt(std::uint64_t id) override { cm_.release(id); }
    void stop_attempt(Ep& ep, bool freeing) override
    {
        if (freeing)
            cm_.release(ep.cm_id);
        else
            cm_.disconnect(ep.cm_id);
    }
    // cm_mutex held (cm_result): its id is kept for the disconnect.
    void will_establish(Ep& ep, std::uint64_t id) override
    {
        ep.connection_id = id;
        connections_[id] = &ep;
    }
    void established(Ep&, int) override {}
    void failed(Ep&) override {} // rdma_cm moved the queue pair to the error state already
    void close(Ep& ep) override
    {
        if (ep.connection_id)
            cm_.disconnect(ep.connection_id); // the queue pair flushes
    }
    void close_gracefully(Ep& ep) override
    {
        if (dp::requests_done(&ep)) // else the reaper of the last one closes it
            close(ep);
    }
    void release(Ep& ep) override
    {
        if (!ep.connection_id)
            return;
        std::lock_guard lock(ia_.cm_mutex);
        cm_.disconnect(ep.connection_id); // nothing if it ended already
        cm_.release(ep.connection_id);
        connections_.erase(ep.connection_id);
        ep.connection_id = 0;
    }

private:
    // RDMA reads in flight each way, as rdma_cm negotiates them.
    cm::ReadDepth read_depth(const Ep& ep) const
    {
        const ibv_device_attr& dev = device_.attr();
        const auto clamp = [](DAT_COUNT want, int most) {
            return static_cast<std::uint8_t>(std::clamp<long>(want, 0, std::min(most, 255)));
        };
        return {clamp(ep.attr.max_rdma_read_out, dev.max_qp_init_rd_atom),
                clamp(ep.attr.max_rdma_read_in, dev.max_qp_rd_atom)};
    }

    void disconnected(std::uint64_t id, bool orderly)
    {
        std::lock_guard lock(ia_.cm_mutex); // the EP cannot be freed under us
        if (auto it = connections_.find(id); it != connections_.end())
            ep_connection_ended(it->second, orderly);
    }

    Ia& ia_;
    verbs::Device& device_;
    std::map<std::uint64_t, Ep*> connections_; // established connections by rdma_cm id (cm_mutex)
    cm::RdmaCm cm_;                            // last: its thread stops first
};

} // namespace

std::unique_ptr<ConnectionManager> make_rdma_connections(Ia& ia, verbs::Device& device)
{
    return std::make_unique<RdmaConnections>(ia, device);
}

} // namespace fastdapl::core
