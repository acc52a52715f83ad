// A verbs device as one IA sees it: the rdma-core context of one device
// and port, its attributes, and a thread that turns async events, and the
// completion events of the CQs it is asked to watch, into callbacks.
// Each CQ has a completion channel of its own, so that a thread waiting on
// one CQ sleeps on that channel's fd directly (one wake-up, no hand-off).
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#pragma once

#include <infiniband/verbs.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <map>
#include <string>
#include <thread>

namespace fastdapl::verbs {

class Device {
public:
    struct Events { // called on the device's thread
        // A CQ that was armed has a completion; `events` were read (and
        // acknowledged) from its channel: an mlx5 CQ armed by hand counts them.
        std::function<void(void* cq_context, unsigned events)> on_cq;
        std::function<void(const ibv_async_event&)> on_async;    // before the event is acknowledged
    };

    // Opens `name`'s context (the one librdmacm uses, so queue pairs and
    // rdma_cm ids share it) for `port`. nullptr, with `why` said, when the
    // device or port is not there.
    static std::unique_ptr<Device> open(const std::string& name, std::uint8_t port, std::string& why);
    ~Device();
    Device(const Device&) = delete;
    Device& operator=(const Device&) = delete;

    ibv_context* context() const { return context_; }
    std::uint8_t port() const { return port_; }
    const std::string& name() const { return name_; }
    const ibv_device_attr& attr() const { return attr_; }
    const ibv_port_attr& port_attr() const { return port_attr_; }

    void start(Events events);

    // The thread reads `channel`'s events from now on and calls on_cq with
    // `cq_context` for each (a CQ nobody waits on directly: one that
    // triggers a CNO). It calls on_cq only for watched contexts, under a
    // lock that unwatch_cq takes too: after unwatch_cq returns, no callback
    // names the context and the thread no longer touches the channel.
    void watch_cq(void* cq_context, ibv_comp_channel* channel);
    void unwatch_cq(void* cq_context);

private:
    Device() = default;
    void run();

    std::string name_;
    std::uint8_t port_ = 1;
    ibv_context* context_ = nullptr;
    bool owns_context_ = false; // opened here, not borrowed from librdmacm
    ibv_device_attr attr_{};
    ibv_port_attr port_attr_{};
    Events events_;
    std::recursive_mutex callback_mutex_; // a callback may free a CQ (through the API)
    std::map<void*, ibv_comp_channel*> watched_;
    int epoll_fd_ = -1;
    int wake_fd_ = -1;
    std::atomic<bool> stop_{false};
    std::thread thread_;
};

// A completion channel whose fd does not block (ibv_get_cq_event then
// answers EAGAIN when there is nothing), or nullptr.
ibv_comp_channel* create_channel(ibv_context* context);

// DAT memory privileges (DAT_MEM_PRIV_*) as verbs access flags. Where the
// device runs atomics (`atomics`), remote atomic access is granted by the IB
// extension's privilege (DAT_IB_MEM_PRIV_REMOTE_ATOMIC, as the reference
// dapl maps it) and by remote read and write together, which already allow
// what an atomic does (the softnic's rule); without atomics it grants nothing.
int access_flags(std::uint32_t dat_privileges, bool atomics);

} // namespace fastdapl::verbs
