// A verbs device as one IA sees it: the rdma-core context of one device
// and port, its attributes, one completion channel for every CQ of the IA,
// and a thread that turns completion-channel and async events into
// callbacks.
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#pragma once

#include <infiniband/verbs.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>

namespace fastdapl::verbs {

class Device {
public:
    struct Events { // called on the device's thread
        std::function<void(void* cq_context)> on_cq;            // a CQ that was armed has a completion
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
    ibv_comp_channel* channel() const { return channel_; }

    void start(Events events);

    // A CQ whose events may be delivered (its context is live). The thread
    // calls on_cq only for registered contexts, under a lock that
    // unregister_cq takes too: after it returns no callback names it.
    void register_cq(void* cq_context);
    void unregister_cq(void* cq_context);

private:
    Device() = default;
    void run();

    std::string name_;
    std::uint8_t port_ = 1;
    ibv_context* context_ = nullptr;
    bool owns_context_ = false; // opened here, not borrowed from librdmacm
    ibv_device_attr attr_{};
    ibv_port_attr port_attr_{};
    ibv_comp_channel* channel_ = nullptr;
    Events events_;
    std::recursive_mutex callback_mutex_; // a callback may free a CQ (through the API)
    std::set<void*> live_cqs_;
    int wake_fd_ = -1;
    std::atomic<bool> stop_{false};
    std::thread thread_;
};

// DAT memory privileges (DAT_MEM_PRIV_*) as verbs access flags.
int access_flags(std::uint32_t dat_privileges);

} // namespace fastdapl::verbs
