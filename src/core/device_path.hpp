// The seam between the object model and the devices: chosen once, at
// dat_ia_open, by the IA's ia_params. A DevicePath is the control plane of
// one device kind (protection domains, memory registration, completion
// queues, queue pairs, SRQs, the limits the IA reports); the queue engines
// it creates for EVDs, EPs and SRQs carry each object's data path, and
// data_path.hpp is the one place that dispatches between them.
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#pragma once

#include "handles.hpp"

#include <sys/socket.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace fastdapl::core {

class ConnectionManager;
class Ep;
class Evd;
class Lmr;
class Pz;
class Rmr;
class Srq;

// The device kinds. An object copies its IA's kind when it is created, so
// the data path dispatches on a byte of the object itself.
enum class PathKind : std::uint8_t {
    softnic, // the software NIC (src/softnic): mlx5 queues over TCP
    verbs,   // any rdma-core device through ibv_post_*/ibv_poll_cq
    mlx5,    // an mlx5 device: rdma-core control objects, queues in src/fastpath
};

// Bases of the per-kind queue engines (paths/*.hpp): what an EP, a DTO EVD
// and an SRQ point at. Empty: only the engine of the object's kind knows
// its layout.
struct EpQueues {};
struct EvdCompletions {};
struct SrqRing {};

class DevicePath {
public:
    explicit DevicePath(PathKind kind) : kind_(kind) {}
    virtual ~DevicePath() = default;
    DevicePath(const DevicePath&) = delete;
    DevicePath& operator=(const DevicePath&) = delete;

    PathKind kind() const { return kind_; }

    // The connection manager of this kind (the socket CM or rdma_cm), made
    // once the IA exists: its callbacks name the IA.
    virtual std::unique_ptr<ConnectionManager> make_connections(Ia& ia) = 0;

    // Limits: the device's own over the provider's defaults.
    virtual void limit_ia_attr(DAT_IA_ATTR& attr) const = 0;
    // Whether the IB extensions run here (write with immediate data and its
    // receive, counters: extensions.cpp, data_path.hpp), and of them the
    // 8-byte atomics (compare and swap, fetch and add), which a device may
    // lack (verbs: atomic_cap).
    virtual bool ib_extensions() const { return false; }
    virtual bool atomics() const { return false; }
    // The IB extension's UD endpoints (DAT_IB_SERVICE_TYPE_UD). An address
    // handle (DAT_IB_ADDR_HANDLE.ah) names a peer's datagram queue pair,
    // learnt through the connection manager: make_address_handle also lets
    // `ep` take datagrams from it (nullptr when the table is full or the
    // device made none; `route`: the CM's, see cm_result); free_address_handle
    // is false for what is not a live one.
    virtual bool ud_endpoints() const { return false; }
    // A UD endpoint's largest message: one datagram, the path MTU.
    virtual std::uint32_t max_datagram_size() const { return 4096; }
    virtual void* make_address_handle(Ep&, const sockaddr_storage& /*peer*/, std::uint32_t /*qpn*/,
                                      std::uint16_t /*udp_port*/, const void* /*route*/)
    {
        return nullptr;
    }
    virtual bool free_address_handle(void*) { return false; }
    // `ep` takes datagrams from queue pair `qpn` at `peer`:`udp_port` from now
    // on (`expect`), or no longer; port 0: from any of `peer`'s, while an
    // exchange with it is under way.
    virtual void expect_datagrams(Ep&, const sockaddr_storage& /*peer*/, std::uint32_t /*qpn*/,
                                  std::uint16_t /*udp_port*/, bool /*expect*/)
    {
    }
    // Whether endpoints' high watermarks can be kept (the device shows when
    // an endpoint takes an SRQ buffer), and whether an SRQ endpoint may be
    // in another PZ than its SRQ.
    virtual bool high_watermarks() const = 0;
    virtual bool split_pz() const = 0;

    virtual DAT_RETURN create_pd(Pz& pz) = 0;
    virtual void destroy_pd(Pz& pz) = 0;

    // Sets lmr.lmr_context and lmr.rmr_context.
    virtual DAT_RETURN register_memory(Lmr& lmr, std::uint64_t addr, std::uint64_t length) = 0;
    virtual void deregister_memory(Lmr& lmr) = 0;

    // Memory windows (RMRs): how many this kind offers (0: none; the calls
    // then answer DAT_MODEL_NOT_SUPPORTED). bind_window binds rmr's window
    // over `range` of `lmr` (length 0: unbinds) for `ep` (rmr.scope EP:
    // usable only over its connection) and sets rmr.context to the new
    // context; rmr.va_type DAT_VA_TYPE_ZB: the peer addresses the window
    // from 0 (DAT_MODEL_NOT_SUPPORTED where the kind cannot bind that). A kind whose device binds through a posted request posts it
    // on `ep`, signalled, and sets `posted`; otherwise the caller posts a NOP
    // request whose completion reports the bind in order with the EP's
    // other requests. bind_failed: that completion came back in error (the
    // window must not stay bound).
    virtual DAT_COUNT max_rmrs() const { return 0; }
    virtual DAT_RETURN create_window(Rmr&) { return error(DAT_MODEL_NOT_SUPPORTED); }
    virtual DAT_RETURN bind_window(Rmr&, const Lmr*, const DAT_LMR_TRIPLET&, DAT_MEM_PRIV_FLAGS, Ep&, bool& posted)
    {
        posted = false;
        return error(DAT_MODEL_NOT_SUPPORTED);
    }
    virtual void bind_failed(Rmr&) {}
    virtual void destroy_window(Rmr&) {}

    // A DTO EVD's completion engine (evd.completions), sized for evd.qlen.
    virtual DAT_RETURN create_completions(Evd& evd) = 0;
    virtual DAT_RETURN resize_completions(Evd& evd, DAT_COUNT qlen) = 0;
    virtual void destroy_completions(Evd& evd) = 0;
    // A CNO is (linked) or is no longer (!linked) fed by this EVD: its
    // completions must trigger it without a waiter.
    virtual void watch_completions(Evd& evd, bool linked) = 0;

    // An EP's queue pair and queues (ep.queues), for its PZ, EVDs and sizes.
    virtual DAT_RETURN create_queues(Ep& ep) = 0;
    // It stops, its completions not yet reaped are dropped from the EVDs
    // (an SRQ's buffers they name go back), and it goes.
    virtual void destroy_queues(Ep& ep) = 0;
    // The endpoint's receive watermarks changed (high_watermarks() only):
    // true when the soft one is crossed already.
    virtual bool apply_watermarks(Ep& ep) = 0;

    virtual DAT_RETURN create_srq(Srq& srq) = 0;
    // Room for `qlen` outstanding receives; nothing posted is lost.
    virtual DAT_RETURN grow_srq(Srq& srq, DAT_COUNT qlen) = 0;
    // Arms the low watermark; true when fewer than it are available now
    // (the one event of this arming is the caller's to post).
    virtual DAT_RETURN arm_srq_limit(Srq& srq, DAT_COUNT low_watermark, bool& below_now) = 0;
    virtual void destroy_srq(Srq& srq) = 0;

private:
    const PathKind kind_;
};

} // namespace fastdapl::core

namespace fastdapl::core {

// The device path an IA's ia_params name (paths/open.cpp): "verbs:<dev>:<port>[:ipv4|:ipv6]"
// for an rdma-core port (the mlx5 kind where chosen), else the softnic on
// an interface or IPv4 address. Also the IA's address and the
// provider-specific attributes that say which device and path it took.
// Whether [addr, addr+length) is mapped throughout, and shared (MAP_SHARED,
// as DAT_MEM_TYPE_SHARED_VIRTUAL memory must be), in this process.
bool memory_is_shared(std::uint64_t addr, std::uint64_t length);

DAT_RETURN open_device_path(const std::string& ia_params, std::unique_ptr<DevicePath>& path, sockaddr_storage& address,
                            std::vector<std::pair<std::string, std::string>>& specific);

} // namespace fastdapl::core
