// A queue pair's wire between two processes on one host (the fastdapl-shm
// IA): two single-producer single-consumer byte rings in shared memory,
// one per direction, carrying the same frames as the TCP stream, beside a
// Unix stream socket that carries only what rings cannot: the ring's file
// descriptor at setup, wake-up bytes for a side that sleeps, and the end of
// the connection (the socket closes when the peer closes or dies).
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#pragma once

#include "cross_memory.hpp"

#include <sys/types.h>
#include <sys/uio.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>

namespace fastdapl::softnic {

// The shared head of one ring, a page of its own before the bytes. Each
// side owns one counter; the other's is hostile input (checked on every
// use, never trusted for where to write).
struct RingControl {
    alignas(64) std::atomic<std::uint64_t> head; // bytes written, free-running (the producer's)
    alignas(64) std::atomic<std::uint64_t> tail; // bytes read, free-running (the consumer's)
    // The consumer is about to block: the producer sends a wake-up byte on
    // the socket after its next write (and clears this).
    alignas(64) std::atomic<std::uint32_t> reader_sleeps;
    // The producer found the ring full: the consumer sends a wake-up byte
    // once it made room (and clears this).
    alignas(64) std::atomic<std::uint32_t> writer_waits;
    // Cross-memory attach (cross_memory.hpp), set by the owner before the
    // peer gets the ring: where the owner mapped this page, and a nonzero
    // word (0: the owner does not take part) the peer reads there with
    // process_vm_readv and compares with what it sees here.
    // (Atomics: in one process, as in the tests, the two sides' threads
    // share the page; the socket that carries the ring orders them.)
    alignas(64) std::atomic<std::uint64_t> owner_address;
    std::atomic<std::uint64_t> probe;
    // Written by the peer once that read worked: it will pull large
    // WRITEs from the owner's memory (a claim the owner cannot check; a
    // false one only fails the peer's own connection).
    std::atomic<std::uint32_t> peer_pulls;
};

class ShmLink {
public:
    // Bytes of one direction's ring (a power of two).
    static constexpr std::size_t kRingBytes = 2u << 20;

    // Takes `socket` (a connected Unix stream socket, non-blocking): creates
    // this side's receive ring and sends its descriptor to the peer. Null
    // (socket untouched) when memory or the socket refuses.
    static ShmLink* create(int socket);
    ~ShmLink();
    ShmLink(const ShmLink&) = delete;
    ShmLink& operator=(const ShmLink&) = delete;

    // As sendmsg on a non-blocking socket: bytes moved into the peer's ring,
    // or -1 with errno EAGAIN (full, or the peer's ring not here yet),
    // EFAULT (a source page unmapped: nothing after it moved), EPROTO (the
    // peer corrupted the ring's counters).
    // `registered`: the sources are a consumer's memory (copied under the
    // fault guard); otherwise the device's own buffers (copied plainly).
    ssize_t write(const iovec* iov, std::size_t count, bool registered = true);
    // What an empty ring's read does with the socket.
    enum class Look {
        no,       // nothing (a polling consumer, most times)
        for_end,  // asks whether the peer closed, leaving wake-ups to the
                  // engine: a consumer that took the wake-up meant for the
                  // engine's sleep (between its prepare_to_sleep and its
                  // epoll_wait) would leave it asleep with nobody to wake it
        all,      // reads wake-ups, the peer's ring, the end (the engine)
    };
    // As recv: bytes read from this side's ring, 0 at the end of the stream
    // (the socket closed; everything the peer wrote before was read), -1
    // with errno EAGAIN (nothing yet), EFAULT (the target page unmapped),
    // EPROTO (a malformed link message or counters).
    // `registered` as for write(), for the target.
    ssize_t read(void* into, std::size_t want, Look look, bool registered = true);
    // The bytes that arrived, as far as they run without wrapping, where
    // they are in the ring: parsed in place (one copy fewer than read()),
    // then given back with consume(). Empty when nothing came or the
    // counters are corrupt (read() reports that). The peer may still write
    // them: whoever parses reads each field once.
    struct Arrived {
        const std::uint8_t* bytes;
        std::size_t size;
    };
    Arrived peek() const
    {
        const std::uint64_t head = rx_->head.load(std::memory_order_acquire);
        const std::uint64_t ready = head - rx_tail_;
        if (ready == 0 || ready > kRingBytes)
            return {nullptr, 0};
        const std::size_t at = rx_tail_ & (kRingBytes - 1);
        return {rx_bytes_ + at, static_cast<std::size_t>(std::min<std::uint64_t>(ready, kRingBytes - at))};
    }
    // Frees the first `n` bytes peek() showed (the writer may reuse them).
    void consume(std::size_t n);
    // Room for `n` bytes at the head of the peer's ring, where they run
    // without wrapping: a small frame is built there in place, then
    // published with commit(n). Null when the peer's ring is not here, has
    // less room, would wrap, or its counters are corrupt: write() then says
    // which.
    std::uint8_t* reserve(std::size_t n) const
    {
        if (!tx_)
            return nullptr;
        const std::uint64_t used = tx_head_ - tx_->tail.load(std::memory_order_acquire);
        const std::size_t at = tx_head_ & (kRingBytes - 1);
        if (used > kRingBytes || n > kRingBytes - used || n > kRingBytes - at)
            return nullptr;
        return tx_bytes_ + at;
    }
    void commit(std::size_t n);

    // The side that owns this link is about to block in epoll on the
    // socket: the peer's next write wakes it. False when bytes arrived
    // meanwhile (do not block).
    bool prepare_to_sleep();
    // The peer's ring is here (writes can go out).
    bool ready() const { return tx_ != nullptr; }
    // Nothing new in this side's ring (one acquire load): a read would find
    // nothing but what the socket holds. A corrupt head reads as not empty
    // (read() then reports it).
    // The next frame's line is fetched meanwhile: a busy poll that finds
    // the head moved then finds the bytes it announces at hand, not one
    // cache miss after the other.
    bool rx_empty() const
    {
        __builtin_prefetch(rx_bytes_ + (rx_tail_ & (kRingBytes - 1)));
        return rx_->head.load(std::memory_order_acquire) == rx_tail_;
    }
    void woke() { rx_->reader_sleeps.store(0, std::memory_order_relaxed); }
    // Cross-memory attach: whether this side may read the peer's memory
    // (the probe at setup worked; fixed from the moment the peer's ring is
    // here), the peer's process (SO_PEERCRED on the socket, never a frame),
    // and whether the peer said it reads ours.
    bool can_pull() const { return can_pull_; }
    const PeerProcess& peer() const { return peer_; }
    bool peer_pulls() const { return rx_->peer_pulls.load(std::memory_order_relaxed) != 0; }
    // Whether the peer said goodbye on the socket (a disconnect before its
    // rings existed): its end of the stream is then orderly.
    bool goodbye_seen() const { return goodbye_seen_; }
    // A goodbye on a socket whose rings never came (see goodbye_seen).
    static void send_goodbye(int socket);
    // Whether the peer said goodbye on `socket` (what it holds is read and
    // dropped): asked when no link could be made because the peer had
    // closed already, to tell an orderly end from a broken one.
    static bool goodbye_on(int socket);

private:
    ShmLink() = default;
    // Reads what the socket holds: wake-ups, the peer's ring, a goodbye,
    // the end. -1 with errno as read(), 0 at the end, 1 otherwise.
    int drain_socket();
    bool map_peer_ring(int fd);
    // Reads the probe word of the peer's ring in the peer's memory.
    void probe_peer();
    void wake_peer();

    int socket_ = -1;
    RingControl* rx_ = nullptr; // this side's receive ring (created here)
    std::uint8_t* rx_bytes_ = nullptr;
    RingControl* tx_ = nullptr; // the peer's receive ring (mapped from its descriptor)
    std::uint8_t* tx_bytes_ = nullptr;
    std::uint64_t rx_tail_ = 0; // own copies: the shared counters are checked against them
    std::uint64_t rx_published_ = 0; // the tail the writer sees (consume)
    static constexpr std::uint64_t kPublishTail = kRingBytes / 32;
    void publish_tail();
    std::uint64_t tx_head_ = 0;
    bool ended_ = false; // the socket reached its end
    bool goodbye_seen_ = false;
    bool can_pull_ = false;
    PeerProcess peer_;
};

} // namespace fastdapl::softnic
