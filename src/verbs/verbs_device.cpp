// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#include "verbs_device.hpp"

#include <dat2/udat.h>
#include <fcntl.h>
#include <poll.h>
#include <rdma/rdma_cma.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cstring>

namespace fastdapl::verbs {

namespace {

void set_nonblocking(int fd) { ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK); }

// The context librdmacm opened for the device (rdma_cm ids bind to it), or
// nullptr. The list itself is freed at once; the contexts live with
// librdmacm.
ibv_context* rdmacm_context(const std::string& name)
{
    int n = 0;
    ibv_context** list = rdma_get_devices(&n);
    if (!list)
        return nullptr;
    ibv_context* found = nullptr;
    for (int i = 0; i < n && list[i]; ++i)
        if (name == ibv_get_device_name(list[i]->device))
            found = list[i];
    rdma_free_devices(list);
    return found;
}

} // namespace

std::unique_ptr<Device> Device::open(const std::string& name, std::uint8_t port, std::string& why)
{
    std::unique_ptr<Device> d(new Device);
    d->name_ = name;
    d->port_ = port;
    d->context_ = rdmacm_context(name);
    if (!d->context_) {
        int n = 0;
        ibv_device** devices = ibv_get_device_list(&n);
        for (int i = 0; devices && i < n; ++i)
            if (name == ibv_get_device_name(devices[i]))
                d->context_ = ibv_open_device(devices[i]);
        if (devices)
            ibv_free_device_list(devices);
        d->owns_context_ = d->context_ != nullptr;
    }
    if (!d->context_) {
        why = "no RDMA device named " + name;
        return nullptr;
    }
    if (ibv_query_device(d->context_, &d->attr_) != 0 || port < 1 || port > d->attr_.phys_port_cnt ||
        ibv_query_port(d->context_, port, &d->port_attr_) != 0) {
        why = name + " has no port " + std::to_string(port);
        return nullptr;
    }
    d->channel_ = ibv_create_comp_channel(d->context_);
    d->wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (!d->channel_ || d->wake_fd_ < 0) {
        why = "cannot create a completion channel on " + name;
        return nullptr;
    }
    set_nonblocking(d->channel_->fd);
    set_nonblocking(d->context_->async_fd);
    return d;
}

Device::~Device()
{
    stop_ = true;
    if (thread_.joinable()) {
        const std::uint64_t one = 1;
        [[maybe_unused]] ssize_t n = ::write(wake_fd_, &one, sizeof one);
        thread_.join();
    }
    if (channel_)
        ibv_destroy_comp_channel(channel_);
    if (wake_fd_ >= 0)
        ::close(wake_fd_);
    if (owns_context_)
        ibv_close_device(context_);
}

void Device::start(Events events)
{
    events_ = std::move(events);
    thread_ = std::thread([this] { run(); });
}

void Device::register_cq(void* cq_context)
{
    std::lock_guard lock(callback_mutex_);
    live_cqs_.insert(cq_context);
}

void Device::unregister_cq(void* cq_context)
{
    std::lock_guard lock(callback_mutex_);
    live_cqs_.erase(cq_context);
}

void Device::run()
{
    while (!stop_) {
        pollfd fds[3] = {{channel_->fd, POLLIN, 0}, {context_->async_fd, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
        if (::poll(fds, 3, 1000) <= 0)
            continue;
        if (fds[2].revents) {
            std::uint64_t v;
            [[maybe_unused]] ssize_t n = ::read(wake_fd_, &v, sizeof v);
        }
        ibv_cq* cq = nullptr;
        void* context = nullptr;
        while (ibv_get_cq_event(channel_, &cq, &context) == 0) {
            ibv_ack_cq_events(cq, 1); // one at a time: ibv_destroy_cq waits for every event's ack
            std::lock_guard lock(callback_mutex_);
            if (live_cqs_.count(context) && events_.on_cq)
                events_.on_cq(context);
        }
        ibv_async_event ev;
        while (ibv_get_async_event(context_, &ev) == 0) {
            {
                std::lock_guard lock(callback_mutex_);
                if (events_.on_async)
                    events_.on_async(ev);
            }
            ibv_ack_async_event(&ev);
        }
    }
}

int access_flags(std::uint32_t p)
{
    int a = 0;
    if (p & DAT_MEM_PRIV_LOCAL_WRITE_FLAG)
        a |= IBV_ACCESS_LOCAL_WRITE;
    if (p & DAT_MEM_PRIV_REMOTE_READ_FLAG)
        a |= IBV_ACCESS_REMOTE_READ;
    if (p & DAT_MEM_PRIV_REMOTE_WRITE_FLAG)
        a |= IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE; // verbs requires local write with it
    return a;
}

} // namespace fastdapl::verbs
