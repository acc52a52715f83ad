// A software mlx5 device for tests: libibverbs, libmlx5 and librdmacm
// entry points, LD_PRELOADed, over the project's software NIC (README of
// tests/fake_mlx5 is run.sh's header). Shared by fake_verbs.cpp and
// fake_rdmacm.cpp.
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#pragma once

#include "device.hpp" // softnic

#include <infiniband/mlx5dv.h>
#include <infiniband/verbs.h>

#include <unistd.h>

#include <cstdint>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>

#define FAKE_API extern "C" __attribute__((visibility("default")))

namespace fake {

namespace sn = fastdapl::softnic;

[[noreturn]] void trap(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

// An fd that is readable while `items` is not empty (an EFD_SEMAPHORE
// eventfd: one count per item), as uverbs and rdma_cm event files are.
template <class T>
struct EventQueue {
    int fd = -1;
    std::mutex mu;
    std::deque<T> items;
    void push(const T& v)
    {
        std::lock_guard lock(mu);
        items.push_back(v);
        const std::uint64_t one = 1;
        [[maybe_unused]] ssize_t n = ::write(fd, &one, sizeof one);
    }
    // False when none (errno from read: EAGAIN on a non-blocking fd).
    bool pop(T& out)
    {
        for (;;) {
            std::uint64_t v;
            if (::read(fd, &v, sizeof v) != sizeof v)
                return false;
            std::lock_guard lock(mu);
            if (items.empty())
                continue; // its item went with a destroyed object
            out = items.front();
            items.pop_front();
            return true;
        }
    }
};

enum class QpState { reset, init, rtr, rts, error };

struct Pd;
struct Cq;
struct Qp {
    ibv_qp qp{};
    sn::Qp* sq = nullptr; // the softnic's queue pair
    Pd* pd = nullptr;     // the parent domain (or PD) it was created on
    Cq* send_cq = nullptr;
    Cq* recv_cq = nullptr;
    QpState state = QpState::reset;
    bool direct = false; // mlx5dv_create_qp
    std::uint32_t reset_db[2] = {0, 0}; // doorbell records when it entered RESET
};

// An address handle: the address vector a UD send's datagram segment
// copies (mlx5dv_init_obj, MLX5DV_OBJ_AH). The model's UD queue pairs are
// the softnic's datagram queue pairs that take address vectors
// (softnic::Device::set_datagram_qkey), each on a UDP socket of its own
// bound to 127.0.0.1. What it reads of a WQE's AV is what a RoCE v2 NIC
// does: the destination GID (rgid; IPv4-mapped, the only kind it makes),
// the queue pair (dqp_dct, with the extended-AV bit) and the qkey. The
// softnic port of that queue pair is in no AV field: an AH names a host,
// not a queue pair (rdma_cm's passive side builds its own from GIDs), so
// the device finds the queue pair by number among its own, as a NIC
// delivers to its own GID (loopback). rlid holds RoCE v2's UDP source
// port, rmac lo's (zero) MAC, as rdma-core fills them.
struct Ah {
    ibv_ah ah{};
    mlx5_wqe_av av{};
    Pd* pd = nullptr;
};

// The model's state is never destroyed: its threads (the pump, the softnic's
// engine) run until the process exits, after static destructors.
extern std::recursive_mutex& g_mu; // every object table; never taken under the softnic's lock
// Destroys wait (g_mu held once) for their object's events to be acknowledged,
// as rdma-core does; an acknowledgement that never comes is a trap.
extern std::condition_variable_any& g_acked;
template <class Pred>
void wait_acked(std::unique_lock<std::recursive_mutex>& lock, Pred done, const char* what)
{
    if (!g_acked.wait_for(lock, std::chrono::seconds(10), done))
        trap("%s: events not acknowledged after 10 s (rdma-core would wait forever)", what);
}
sn::Device& device();
ibv_context* shared_context(); // the one librdmacm "opened"
// The rdma_cm model moves queue pairs through RTR/RTS and connects them.
bool connect_pair(Qp* active, Qp* passive);
int set_state(Qp* qp, QpState to);
Qp* qp_of(ibv_qp* qp);

} // namespace fake
