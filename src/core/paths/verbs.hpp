// The verbs device kind: any rdma-core device, posted and polled through
// libibverbs (ibv_post_*, ibv_poll_cq), connections through rdma_cm. The
// mlx5 kind (mlx5.hpp) extends its control plane. Control plane: VerbsPath
// (verbs.cpp). Data path: the inline functions below, reached through
// data_path.hpp.
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#pragma once

#include "../device_path.hpp"
#include "../ep.hpp"
#include "../evd.hpp"
#include "../extensions.hpp"
#include "../ia.hpp"
#include "../srq.hpp"
#include "address_handles.hpp"
#include "qpn_table.hpp"
#include "verbs_device.hpp"

#include <infiniband/mlx5dv.h> // MLX5_OPCODE_*: the data path names operations by their mlx5 opcodes
#include <infiniband/verbs.h>

#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

namespace fastdapl::core {

// What every verbs kind's EP has: the queue pair rdma_cm drives.
struct VerbsQp : EpQueues {
    ibv_qp* qp = nullptr;
    const AddressHandles* address_handles = nullptr; // a UD endpoint's: the IA's
};

// A ring of what each posted request was (wr_id is its sequence number; a
// signalled completion retires every earlier one). Receives carry their
// slot in wr_id.
struct VerbsEpQueues : VerbsQp {
    struct Send {
        std::uint64_t cookie;
        std::uint32_t length;
        std::uint32_t operation; // DAT_DTOS
    };
    std::vector<Send> sends;
    std::uint64_t send_posted = 0, send_retired = 0;
    std::uint32_t recv_posted = 0, recv_reaped = 0;
    std::vector<std::uint64_t> recv_cookies; // own receive queue: completes in order
    std::uint32_t max_inline = 0;
    // Sends that invalidate the peer's key are posted (the IA offers
    // windows: max_rmrs > 0; verbs_path::post_send_invalidate says why).
    bool sends_invalidate = false;
};

// What every verbs kind's DTO EVD has: its CQ, with a completion channel of
// its own (a waiter sleeps on its fd) and an eventfd for wake-ups that are
// not completions.
struct VerbsCq : EvdCompletions {
    ibv_cq* cq = nullptr;
    ibv_comp_channel* channel = nullptr;
    int wake_fd = -1;
    bool fd_waiting = false; // a waiter sleeps on the fds (the EVD's lock guards it)
    const QpnTable* eps = nullptr;
};

// Work completions polled ahead of the consumer (to count them for wait
// thresholds).
struct VerbsCompletions : VerbsCq {
    std::vector<ibv_wc> polled;
    std::uint32_t polled_head = 0, polled_count = 0;
    // The wc_flags bit of a receive whose sender invalidated one of our
    // keys, and it with IBV_WC_WITH_IMM (a receive that is not plain).
    // Soft-RoCE passes the kernel's flags through unconverted: there it is
    // the kernel's IB_WC_WITH_INVALIDATE (1 << 2, which libibverbs calls
    // IBV_WC_IP_CSUM_OK), not IBV_WC_WITH_INV (1 << 3).
    unsigned invalidated_flag = IBV_WC_WITH_INV;
    unsigned special_receive_flags = IBV_WC_WITH_IMM | IBV_WC_WITH_INV;
};

struct VerbsSrqBase : SrqRing {
    ibv_srq* srq = nullptr;
    std::atomic<bool> failed{false}; // IBV_EVENT_SRQ_ERR
};

// Receives posted and completions reaped (the device's take is not visible
// to software). A receive's wr_id names its slot, which holds the cookie;
// free slots wait in a ring with one writer each way (the poster takes, the
// reaper, under lock_completions, gives back).
struct VerbsSrqRing : VerbsSrqBase {
    std::atomic<std::uint32_t> posted{0}, reaped{0};
    std::vector<std::uint64_t> cookies;
    std::vector<std::uint32_t> free_slots;
    std::atomic<std::uint32_t> free_head{0}, free_tail{0};
};

class VerbsPath : public DevicePath {
public:
    // Opens the device and port of a verbs IA; the provider-specific
    // attributes name device, port and data path. `kind` is verbs, or mlx5
    // for the subclass.
    VerbsPath(PathKind kind, std::unique_ptr<verbs::Device> device, std::string driver = {});
    ~VerbsPath() override;

    std::unique_ptr<ConnectionManager> make_connections(Ia& ia) override;
    void limit_ia_attr(DAT_IA_ATTR& attr) const override;
    // Write with immediate data runs on every RC queue pair; atomics where
    // the device has them (atomic_cap: rxe and mlx5 have).
    bool ib_extensions() const override { return true; }
    bool atomics() const override;
    // UD endpoints: a UD queue pair each; address handles are ibv_ahs
    // behind the table's entries (a post takes only a live entry; what an
    // entry holds: ah_destination). On an Ethernet (RoCE) port only: the
    // passive side builds the route back from GIDs (rdma_cm.cpp).
    bool ud_endpoints() const override { return ud_; }
    std::uint32_t max_datagram_size() const override;
    void* make_address_handle(Ep& ep, const sockaddr_storage& peer, std::uint32_t qpn, std::uint16_t udp_port,
                              const void* route) override;
    bool free_address_handle(void* ah) override;
    bool high_watermarks() const override { return false; } // a device does not show when a buffer is taken
    bool split_pz() const override { return false; }        // it checks SRQ buffers against the QP's PD
    DAT_RETURN create_pd(Pz& pz) override;
    void destroy_pd(Pz& pz) override;
    DAT_RETURN register_memory(Lmr& lmr, std::uint64_t addr, std::uint64_t length) override;
    void deregister_memory(Lmr& lmr) override;
    DAT_RETURN create_completions(Evd& evd) override;
    DAT_RETURN resize_completions(Evd& evd, DAT_COUNT qlen) override;
    void destroy_completions(Evd& evd) override;
    void watch_completions(Evd& evd, bool linked) override;
    DAT_RETURN create_queues(Ep& ep) override;
    void destroy_queues(Ep& ep) override;
    bool apply_watermarks(Ep&) override { return false; }
    DAT_RETURN create_srq(Srq& srq) override;
    DAT_RETURN grow_srq(Srq& srq, DAT_COUNT qlen) override;
    DAT_RETURN arm_srq_limit(Srq& srq, DAT_COUNT low_watermark, bool& below_now) override;
    void destroy_srq(Srq& srq) override;
    // Memory windows: type 1 for PZ scope (ibv_bind_mw), type 2 for EP
    // scope (IBV_WR_BIND_MW, LOCAL_INV to unbind), each bind a signalled
    // request on the EP (its completion: kBindOperation).
    DAT_COUNT max_rmrs() const override;
    DAT_RETURN create_window(Rmr& rmr) override;
    DAT_RETURN bind_window(Rmr& rmr, const Lmr* lmr, const DAT_LMR_TRIPLET& range, DAT_MEM_PRIV_FLAGS privileges,
                           Ep& ep, bool& posted) override;
    // A bind came back in error: the window may still hold the binding
    // before it (a type 1 one's would keep working over every connection
    // of its PD), or be in a state the failed request left unknown; a new
    // window replaces it.
    void bind_failed(Rmr& rmr) override;
    void destroy_window(Rmr& rmr) override;

    verbs::Device& device() { return *device_; }
    // Starts the device's event thread (async events, CNO-watched CQs).
    void start(Ia& ia);

protected:
    // The RMR's window is deallocated (its key dies with it) and a fresh
    // one of the same type allocated: false, and the RMR without one, when
    // the device has none to give (the next bind tries again).
    bool replace_window(Rmr& rmr);
    // The window `rmr` binds with on queue pair `qpn`: a new one where a
    // failed bind lost it, or, with `replace_elsewhere`, where a type 2
    // window is bound for another queue pair (which alone may free or
    // invalidate it; the old binding goes with it). Null when the device
    // has none to give.
    ibv_mw* window_for(Rmr& rmr, std::uint32_t qpn, bool replace_elsewhere);
    // The parts the mlx5 kind does its own way.
    virtual DAT_RETURN make_cq(Evd& evd, int cqe, ibv_comp_channel* channel, int wake_fd);
    virtual ibv_qp* make_qp(Ep& ep, ibv_qp_init_attr& init);
    virtual bool init_queues(Ep& ep, ibv_qp* qp, const ibv_qp_cap& cap);
    virtual void before_destroy_qp(Ep& ep, ibv_qp* qp);
    virtual void release_queues(Ep& ep);
    // A QP's completions on the CQ after it was destroyed (its SRQ slots).
    virtual void after_destroy_qp(Ep& ep, std::uint32_t qpn);
    virtual DAT_RETURN make_srq_ring(Srq& srq, ibv_srq* s);
    // What a UD post needs of address handle `ah`, kept in its table entry
    // (0: none, the handle is not made): the generic path's ibv_post_send
    // takes the ibv_ah itself.
    virtual std::uint64_t ah_destination(ibv_ah* ah) { return reinterpret_cast<std::uintptr_t>(ah); }

    std::unique_ptr<verbs::Device> device_;
    std::string driver_; // the kernel driver ("rxe", "mlx5"), empty if unknown
    QpnTable eps_; // endpoints by queue pair number (24 bits)

private:
    bool ud_ = false;
    AddressHandles address_handles_;
    std::mutex address_handles_mutex_;       // a free and the destroy of its ibv_ah are one step
    struct MadeAh {
        ibv_pd* pd; // a PD's handles go before it
        ibv_ah* ah;
    };
    std::map<const void*, MadeAh> made_ahs_; // live handles (address_handles_mutex_)
    // A UD endpoint's queue pair: from RESET to RTS with the fixed qkey.
    bool ready_datagram_qp(ibv_qp* qp);
    void async_event(Ia& ia, const ibv_async_event& ev);
};

// --- data path (generic verbs) ------------------------------------------------------------

// A verbs work request's wr_id: a request's sequence number shifted left
// (bit 0 clear), or a receive's slot shifted left with bit 0 set. A
// completion in error does not say its opcode, so the tag tells which.
inline constexpr std::uint64_t kVerbsRecvTag = 1;
// A request slot's operation for a memory-window bind (rmr.cpp reports it).
// Like the IB extensions' operations it is at kExtendedOperationBase or
// above: one test on the completion path finds both.
inline constexpr std::uint32_t kBindOperation = 0xffffffffu;
static_assert(kBindOperation >= kExtendedOperationBase);

DAT_DTO_COMPLETION_STATUS status_of_wc(ibv_wc_status s);

// After a completion of a verbs kind's EP was turned into an event (the
// reaper holds `locked`'s lock): an error other than a flush breaks the
// connection, and a graceful disconnect ends once its requests drained.
inline void verbs_completion_reaped(Ep* ep, Evd* locked, DAT_DTO_COMPLETION_STATUS status, bool request,
                                    bool requests_done)
{
    if (status != DAT_DTO_SUCCESS && status != DAT_DTO_ERR_FLUSHED) [[unlikely]]
        ep_completion_broke(ep, locked);
    else if (request && requests_done && ep->state.load(std::memory_order_relaxed) == DAT_EP_STATE_DISCONNECT_PENDING)
        [[unlikely]]
        ep->ia->cm->close(*ep);
}

namespace verbs_path {

unsigned send_flags(DAT_COMPLETION_FLAGS flags);

// A DAT IOV as verbs scatter/gather entries (n is checked by the caller).
inline void to_sges(const DAT_LMR_TRIPLET* iov, DAT_COUNT n, ibv_sge* sge)
{
    for (DAT_COUNT i = 0; i < n; ++i)
        sge[i] = {iov[i].virtual_address, static_cast<std::uint32_t>(iov[i].segment_length), iov[i].lmr_context};
}

// A receive work request for `slot` (own RQ or SRQ: the completion names it).
inline ibv_recv_wr recv_wr(std::uint32_t slot, ibv_sge* sge, DAT_COUNT n)
{
    ibv_recv_wr wr{};
    wr.wr_id = (static_cast<std::uint64_t>(slot) << 1) | kVerbsRecvTag;
    wr.sg_list = sge;
    wr.num_sge = n;
    return wr;
}

DAT_RETURN post_request(Ep* ep, std::uint8_t mlx5_opcode, DAT_COUNT n, const DAT_LMR_TRIPLET* iov, std::uint32_t total,
                        std::uint64_t cookie, const DAT_RMR_TRIPLET* remote, DAT_COMPLETION_FLAGS flags);
// The IB extensions' requests (extensions.cpp checked them): an RDMA write
// with immediate data (`imm` as given, data_path.hpp says why), and an
// 8-byte compare and swap (`compare_swap`: stores `swap_add` where the
// target equals `compare`) or fetch and add (adds `swap_add`).
DAT_RETURN post_write_immediate(Ep* ep, DAT_COUNT n, const DAT_LMR_TRIPLET* iov, std::uint32_t total,
                                std::uint64_t cookie, const DAT_RMR_TRIPLET* remote, std::uint32_t imm,
                                DAT_COMPLETION_FLAGS flags);
DAT_RETURN post_atomic(Ep* ep, bool compare_swap, const DAT_LMR_TRIPLET& local, const DAT_RMR_TRIPLET& remote,
                       std::uint64_t swap_add, std::uint64_t compare, std::uint64_t cookie,
                       DAT_COMPLETION_FLAGS flags);
// One datagram of a UD endpoint to address handle `ah` (an entry of the
// IA's table, checked) and queue pair `qpn`.
DAT_RETURN post_datagram(Ep* ep, DAT_COUNT n, const DAT_LMR_TRIPLET* iov, std::uint32_t total, std::uint64_t cookie,
                         const void* ah, std::uint32_t qpn, DAT_COMPLETION_FLAGS flags);
// A send that invalidates the peer's remote key `rkey` (IBV_WR_SEND_WITH_INV):
// DAT_MODEL_NOT_SUPPORTED where the IA offers no windows.
DAT_RETURN post_send_invalidate(Ep* ep, DAT_COUNT n, const DAT_LMR_TRIPLET* iov, std::uint32_t total,
                                std::uint64_t cookie, std::uint32_t rkey, DAT_COMPLETION_FLAGS flags);
DAT_RETURN post_recv(Ep* ep, DAT_COUNT n, const DAT_LMR_TRIPLET* iov, std::uint64_t cookie);
DAT_RETURN srq_post(Srq* srq, DAT_COUNT n, const DAT_LMR_TRIPLET* iov, std::uint64_t cookie);
bool take_completion(Evd* evd, DAT_EVENT& e);
// Work completions polled ahead into the EVD's buffer (its lock held).
std::uint32_t poll_ahead(VerbsCompletions& c);
// Receives of `srq` completed in `evd`'s CQ and not yet reaped (its lock
// held): polled ahead into the EVD's buffer, then counted.
DAT_COUNT srq_arrived(Evd* evd, const Srq* srq);

inline DAT_COUNT ready_completions(Evd* evd, DAT_COUNT have, DAT_COUNT limit)
{
    if (have >= limit)
        return have;
    return have + static_cast<DAT_COUNT>(poll_ahead(*static_cast<VerbsCompletions*>(evd->completions)));
}

inline bool requests_done(const Ep* ep)
{
    const auto* q = static_cast<const VerbsEpQueues*>(ep->queues);
    return q->send_posted == q->send_retired;
}

inline std::uint32_t receives_outstanding(const Ep* ep)
{
    const auto* q = static_cast<const VerbsEpQueues*>(ep->queues);
    return q->recv_posted - q->recv_reaped;
}

inline DAT_COUNT srq_outstanding(const Srq* srq)
{
    const auto* r = static_cast<const VerbsSrqRing*>(srq->ring);
    return static_cast<DAT_COUNT>(r->posted.load() - r->reaped.load());
}

} // namespace verbs_path

// --- waiting, for every verbs kind ----------------------------------------------------------

namespace verbs_wait {

// Asks the CQ for one event on its channel at the next completion (the
// EVD's lock held). An mlx5 CQ on the direct path is armed by hand.
void arm(Evd* evd);
// Sleeps on the EVD's channel and wake fd, the EVD's lock released around
// it; false when the deadline (nullptr: none) passed.
bool sleep(Evd* evd, std::unique_lock<SpinLock>& lock, const std::chrono::steady_clock::time_point* deadline);

inline void wake(Evd* evd)
{
    auto* c = static_cast<VerbsCq*>(evd->completions);
    if (c->fd_waiting) {
        const std::uint64_t one = 1;
        [[maybe_unused]] ssize_t n = ::write(c->wake_fd, &one, sizeof one);
    }
}

} // namespace verbs_wait

} // namespace fastdapl::core
