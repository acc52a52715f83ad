// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#include "verbs_device.hpp"

#include <dat2/udat.h>
#include <fcntl.h>
#include <rdma/rdma_cma.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cstring>

namespace fastdapl::verbs {

namespace {

constexpr std::uint64_t kAsyncTag = 1, kWakeTag = 2;

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
    d->wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    d->epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
    if (d->wake_fd_ < 0 || d->epoll_fd_ < 0) {
        why = "cannot create the event thread's descriptors for " + name;
        return nullptr;
    }
    set_nonblocking(d->context_->async_fd);
    // Two fixed sources, told apart from watched CQs (whose data is their
    // context, never a small number) by their data.
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = kAsyncTag;
    ::epoll_ctl(d->epoll_fd_, EPOLL_CTL_ADD, d->context_->async_fd, &ev);
    ev.data.u64 = kWakeTag;
    ::epoll_ctl(d->epoll_fd_, EPOLL_CTL_ADD, d->wake_fd_, &ev);
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
    if (epoll_fd_ >= 0)
        ::close(epoll_fd_);
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

void Device::watch_cq(void* cq_context, ibv_comp_channel* channel)
{
    std::lock_guard lock(callback_mutex_);
    if (!watched_.emplace(cq_context, channel).second)
        return;
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.ptr = cq_context;
    ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, channel->fd, &ev);
}

void Device::unwatch_cq(void* cq_context)
{
    std::lock_guard lock(callback_mutex_);
    auto it = watched_.find(cq_context);
    if (it == watched_.end())
        return;
    ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, it->second->fd, nullptr);
    watched_.erase(it);
}

void Device::run()
{
    while (!stop_) {
        epoll_event ready[16];
        const int n = ::epoll_wait(epoll_fd_, ready, 16, 1000);
        for (int i = 0; i < n; ++i) {
            if (ready[i].data.u64 == kWakeTag) {
                std::uint64_t v;
                [[maybe_unused]] ssize_t r = ::read(wake_fd_, &v, sizeof v);
            } else if (ready[i].data.u64 == kAsyncTag) {
                ibv_async_event ev;
                while (ibv_get_async_event(context_, &ev) == 0) {
                    {
                        std::lock_guard lock(callback_mutex_);
                        if (events_.on_async)
                            events_.on_async(ev);
                    }
                    ibv_ack_async_event(&ev);
                }
            } else {
                // Looked up under the lock: the CQ may have been unwatched
                // (and its channel destroyed) since epoll_wait returned. A
                // thread waiting on the CQ may take the event first; then
                // this finds none.
                std::lock_guard lock(callback_mutex_);
                auto it = watched_.find(ready[i].data.ptr);
                if (it == watched_.end())
                    continue;
                ibv_cq* cq = nullptr;
                void* context = nullptr;
                unsigned events = 0;
                while (ibv_get_cq_event(it->second, &cq, &context) == 0) {
                    ibv_ack_cq_events(cq, 1); // ibv_destroy_cq waits for every event's ack
                    ++events;
                }
                if (events > 0 && events_.on_cq)
                    events_.on_cq(ready[i].data.ptr, events);
            }
        }
    }
}

ibv_comp_channel* create_channel(ibv_context* context)
{
    ibv_comp_channel* channel = ibv_create_comp_channel(context);
    if (channel)
        set_nonblocking(channel->fd);
    return channel;
}

int access_flags(std::uint32_t p, bool atomics)
{
    int a = 0;
    if (p & DAT_MEM_PRIV_LOCAL_WRITE_FLAG)
        a |= IBV_ACCESS_LOCAL_WRITE;
    if (p & DAT_MEM_PRIV_REMOTE_READ_FLAG)
        a |= IBV_ACCESS_REMOTE_READ;
    if (p & DAT_MEM_PRIV_REMOTE_WRITE_FLAG)
        a |= IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE; // verbs requires local write with it
    // DAT_MEM_PRIV_EXTENSION_BASE is the IB extension's DAT_IB_MEM_PRIV_REMOTE_ATOMIC.
    constexpr std::uint32_t read_write = DAT_MEM_PRIV_REMOTE_READ_FLAG | DAT_MEM_PRIV_REMOTE_WRITE_FLAG;
    if (atomics && ((p & DAT_MEM_PRIV_EXTENSION_BASE) || (p & read_write) == read_write))
        a |= IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_LOCAL_WRITE; // local write again, as verbs requires
    return a;
}

} // namespace fastdapl::verbs
