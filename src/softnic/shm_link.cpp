// The shared-memory wire of the fastdapl-shm IA (shm_link.hpp).
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#include "shm_link.hpp"

#include "cross_memory.hpp"
#include "fault_guard.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace fastdapl::softnic {

namespace {

constexpr std::size_t kControlBytes = 4096;
constexpr std::size_t kMapBytes = kControlBytes + ShmLink::kRingBytes;
constexpr std::uint64_t kMask = ShmLink::kRingBytes - 1;

// The wake-up handshakes: one side stores `mine` (a counter it moved, or
// the flag that it sleeps or waits), then looks at `theirs`; the other side
// stores that one before it looks at ours. A fence between the store and
// the look, on both sides, lets no more than one of them miss the other's
// store. A plain store and a fence, not a seq_cst store: that is an
// exchange on the counter's line, which first waits for the frame's lines
// to reach the peer and only then asks for its own, where the fence waits
// for all of them at once (an 8-byte ping-pong over the rings went from
// 0.65 to 0.45 us one-way). ThreadSanitizer builds have no fences: they
// keep seq_cst stores and loads.
template <typename T, typename U> U store_then_look(std::atomic<T>& mine, T value, const std::atomic<U>& theirs)
{
#if defined(__SANITIZE_THREAD__)
    mine.store(value, std::memory_order_seq_cst);
    return theirs.load(std::memory_order_seq_cst);
#else
    mine.store(value, std::memory_order_release);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    return theirs.load(std::memory_order_acquire);
#endif
}

// A consumer's memory may be unmapped under us: copied under the fault
// guard. The rings (sealed at their size) and the device's own buffers
// cannot fault, and skip the guard's setjmp.
bool copy(void* to, const void* from, std::size_t n, bool registered)
{
    if (registered)
        return guarded_copy(to, from, n);
    std::memcpy(to, from, n);
    return true;
}
// Bytes on the socket after setup.
constexpr char kRingMessage = 'R'; // carries the sender's receive ring (SCM_RIGHTS)
constexpr char kWake = 'W';
constexpr char kGoodbye = 'G';

void* map_ring(int fd)
{
    void* p = ::mmap(nullptr, kMapBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    return p == MAP_FAILED ? nullptr : p;
}

void send_byte(int socket, char byte)
{
    [[maybe_unused]] ssize_t n = ::send(socket, &byte, 1, MSG_NOSIGNAL | MSG_DONTWAIT);
}

} // namespace

ShmLink* ShmLink::create(int socket)
{
    // The ring is sealed at its size before the peer gets it: a peer that
    // could shrink it would turn our next access into SIGBUS.
    const int fd = memfd_create("fastdapl-shm-ring", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0)
        return nullptr;
    void* map = nullptr;
    if (ftruncate(fd, kMapBytes) != 0 || fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0 ||
        !(map = map_ring(fd))) {
        ::close(fd);
        return nullptr;
    }
    auto* link = new ShmLink;
    link->socket_ = socket;
    link->rx_ = new (map) RingControl{};
    if (cma_mode() != CmaMode::off) {
        std::uint64_t probe = 0;
        if (getrandom(&probe, sizeof probe, GRND_NONBLOCK) != sizeof probe)
            probe = reinterpret_cast<std::uintptr_t>(map) ^ static_cast<std::uint64_t>(getpid()) << 40;
        link->rx_->owner_address.store(reinterpret_cast<std::uintptr_t>(map), std::memory_order_relaxed);
        link->rx_->probe.store(probe | 1, std::memory_order_relaxed);
    }
    link->rx_bytes_ = static_cast<std::uint8_t*>(map) + kControlBytes;
    // The descriptor, with one byte naming what it is.
    char byte = kRingMessage;
    iovec iov{&byte, 1};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(c), &fd, sizeof fd);
    const ssize_t sent = ::sendmsg(socket, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    ::close(fd); // the mapping and the peer's copy keep the memory
    if (sent != 1) {
        link->socket_ = -1;
        delete link;
        return nullptr;
    }
    return link;
}

ShmLink::~ShmLink()
{
    if (rx_)
        ::munmap(rx_, kMapBytes);
    if (tx_)
        ::munmap(tx_, kMapBytes);
    peer_.close();
}

void ShmLink::send_goodbye(int socket) { send_byte(socket, kGoodbye); }

bool ShmLink::map_peer_ring(int fd)
{
    // Only a sealed memfd of the agreed size: anything else could shrink
    // under us or be something other than memory.
    struct stat st {};
    const int seals = fcntl(fd, F_GET_SEALS);
    if (tx_ || seals < 0 || (seals & (F_SEAL_SHRINK | F_SEAL_SEAL)) != (F_SEAL_SHRINK | F_SEAL_SEAL) ||
        fstat(fd, &st) != 0 || static_cast<std::size_t>(st.st_size) < kMapBytes)
        return false;
    void* map = map_ring(fd);
    if (!map)
        return false;
    tx_ = static_cast<RingControl*>(map);
    tx_bytes_ = static_cast<std::uint8_t*>(map) + kControlBytes;
    tx_head_ = tx_->head.load(std::memory_order_relaxed); // a fresh ring's is 0; checked on every write
    probe_peer();
    return true;
}

void ShmLink::probe_peer()
{
    // Off here (FASTDAPL_SHM_CMA=0), or: the peer's process from the
    // kernel, then its probe word read in its memory: the same value as in our mapping of that page, or no cross-
    // memory attach on this link (no ptrace rights, another process
    // behind the socket, a peer that does not take part).
    ucred cred{};
    socklen_t len = sizeof cred;
    const std::uint64_t expected = tx_->probe.load(std::memory_order_relaxed);
    const std::uint64_t owner_address = tx_->owner_address.load(std::memory_order_relaxed);
    int why = 0;
    errno = 0;
    if (cma_mode() == CmaMode::off) {
        why = ENOTSUP; // FASTDAPL_SHM_CMA=0 here
    } else if (getsockopt(socket_, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 || cred.pid <= 0) {
        why = errno ? errno : ESRCH;
    } else if (expected == 0) {
        why = ENOTSUP; // the peer does not take part (FASTDAPL_SHM_CMA=0)
    } else if (!peer_.open(cred.pid)) {
        why = errno; // no pidfd_open: a pid alone could be reused
    } else {
        std::uint64_t seen = 0;
        const std::uintptr_t offset = reinterpret_cast<std::uintptr_t>(&tx_->probe) - reinterpret_cast<std::uintptr_t>(tx_);
        const iovec local{&seen, sizeof seen};
        const iovec remote{reinterpret_cast<void*>(owner_address + offset), sizeof seen};
        const ssize_t n = process_vm_readv(cred.pid, &local, 1, &remote, 1, 0);
        if (n != static_cast<ssize_t>(sizeof seen))
            why = n < 0 ? errno : EFAULT;
        else if (seen != expected || !peer_.alive())
            why = ESRCH; // someone else at that pid (the pidfd, opened first, names whoever answered)
        if (why != 0)
            peer_.close();
    }
    if (why == 0) {
        can_pull_ = true;
        tx_->peer_pulls.store(1, std::memory_order_release);
    }
    static const bool debug = std::getenv("FASTDAPL_DEBUG") != nullptr;
    if (debug)
        std::fprintf(stderr, "fastdapl-shm: link to pid %d: cross-memory attach %s%s%s\n", static_cast<int>(cred.pid),
                     why ? "off (" : "on", why ? std::strerror(why) : "", why ? ")" : "");
}

namespace {

// One non-blocking read of a link's socket: its bytes, and the descriptors
// that came with them (closed unless taken). n as recvmsg's.
struct SocketMessage {
    char bytes[64];
    int fds[4];
    std::size_t fd_count = 0;
    bool truncated = false; // more descriptors came than fit: they are lost
    ssize_t n = 0;

    explicit SocketMessage(int socket)
    {
        alignas(cmsghdr) char control[CMSG_SPACE(sizeof fds)];
        do {
            iovec iov{bytes, sizeof bytes};
            msghdr msg{};
            msg.msg_iov = &iov;
            msg.msg_iovlen = 1;
            msg.msg_control = control;
            msg.msg_controllen = sizeof control;
            n = ::recvmsg(socket, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
            truncated = n > 0 && (msg.msg_flags & MSG_CTRUNC) != 0;
            for (cmsghdr* c = n > 0 ? CMSG_FIRSTHDR(&msg) : nullptr; c; c = CMSG_NXTHDR(&msg, c)) {
                if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
                    continue;
                for (std::size_t i = 0; i < (c->cmsg_len - CMSG_LEN(0)) / sizeof(int) && fd_count < std::size(fds); ++i)
                    std::memcpy(&fds[fd_count++], CMSG_DATA(c) + i * sizeof(int), sizeof(int));
            }
        } while (n < 0 && errno == EINTR);
    }
    ~SocketMessage()
    {
        for (std::size_t i = 0; i < fd_count; ++i)
            if (fds[i] >= 0)
                ::close(fds[i]);
    }
    SocketMessage(const SocketMessage&) = delete;
    SocketMessage& operator=(const SocketMessage&) = delete;
};

} // namespace

bool ShmLink::goodbye_on(int socket)
{
    // A bounded look: a live peer that keeps writing cannot hold us here
    // (a goodbye is the last thing a peer sends before it closes).
    bool goodbye = false;
    for (int reads = 0; reads < 64; ++reads) {
        const SocketMessage m(socket); // a ring we will not use is closed with it
        if (m.n <= 0)
            break;
        goodbye |= std::memchr(m.bytes, kGoodbye, static_cast<std::size_t>(m.n)) != nullptr;
    }
    return goodbye;
}

int ShmLink::drain_socket()
{
    if (ended_)
        return 0;
    for (;;) {
        SocketMessage m(socket_);
        if (m.n < 0 && errno != ECONNRESET)
            return -1; // EAGAIN: nothing more; anything else: broken
        // A Unix socket closed with bytes unread (wake-ups) resets its
        // peer: that is the end of the stream too; the rings say whether
        // it was orderly (the goodbye frame).
        if (m.n <= 0) {
            ended_ = true;
            return 0;
        }
        // Descriptors: one ring, with the byte that names it; any other is
        // closed (with m), and the link fails.
        bool protocol_error = m.truncated || m.fd_count > 1 || (m.fd_count == 1 && m.bytes[0] != kRingMessage);
        int ring_fd = -1;
        if (m.fd_count == 1 && m.bytes[0] == kRingMessage)
            std::swap(ring_fd, m.fds[0]);
        for (ssize_t i = 0; i < m.n; ++i) {
            if (m.bytes[i] == kGoodbye)
                goodbye_seen_ = true;
            else if (m.bytes[i] == kRingMessage)
                protocol_error |= i != 0 || ring_fd < 0;
            else if (m.bytes[i] != kWake)
                protocol_error = true;
        }
        if (ring_fd >= 0) {
            protocol_error |= !map_peer_ring(ring_fd);
            ::close(ring_fd);
        }
        if (protocol_error) {
            errno = EPROTO;
            return -1;
        }
    }
}

void ShmLink::wake_peer() { send_byte(socket_, kWake); }

ssize_t ShmLink::write(const iovec* iov, std::size_t count, bool registered)
{
    if (!tx_) { // the peer's ring has not come yet: perhaps it is waiting on the socket
        if (drain_socket() < 0 && errno != EAGAIN)
            return -1;
        if (!tx_) {
            errno = ended_ ? EPIPE : EAGAIN;
            return -1;
        }
    }
    // The peer's tail: behind our head by at most the ring, or corrupt.
    std::uint64_t tail = tx_->tail.load(std::memory_order_acquire);
    if (tx_head_ - tail > kRingBytes) {
        errno = EPROTO;
        return -1;
    }
    std::uint64_t room = kRingBytes - (tx_head_ - tail);
    if (room == 0) {
        // Ask for a wake-up, then look once more (the consumer clears the
        // flag after it moved its tail: one of the two sees the other).
        tail = store_then_look(tx_->writer_waits, 1u, tx_->tail);
        if (tx_head_ - tail > kRingBytes) {
            errno = EPROTO;
            return -1;
        }
        room = kRingBytes - (tx_head_ - tail);
        if (room == 0) {
            errno = EAGAIN;
            return -1;
        }
    }
    std::uint64_t head = tx_head_;
    for (std::size_t i = 0; i < count && room > 0; ++i) {
        const auto* from = static_cast<const std::uint8_t*>(iov[i].iov_base);
        std::size_t left = std::min<std::uint64_t>(iov[i].iov_len, room);
        while (left > 0) {
            const std::size_t at = head & kMask;
            const std::size_t n = std::min(left, kRingBytes - at);
            if (!copy(tx_bytes_ + at, from, n, registered)) { // the source was unmapped under us
                if (head == tx_head_) {
                    errno = EFAULT;
                    return -1;
                }
                left = 0;
                room = 0;
                break;
            }
            from += n;
            head += n;
            left -= n;
            room -= n;
        }
    }
    const auto moved = static_cast<ssize_t>(head - tx_head_);
    commit(static_cast<std::size_t>(moved));
    return moved;
}

void ShmLink::commit(std::size_t n)
{
    tx_head_ += n;
    if (store_then_look(tx_->head, tx_head_, tx_->reader_sleeps) && tx_->reader_sleeps.exchange(0))
        wake_peer();
}

ssize_t ShmLink::read(void* into, std::size_t want, Look look, bool registered)
{
    const std::uint64_t head = rx_->head.load(std::memory_order_acquire);
    if (head - rx_tail_ > kRingBytes) {
        errno = EPROTO;
        return -1;
    }
    std::size_t n = std::min<std::uint64_t>(want, head - rx_tail_);
    if (n == 0) {
        // Empty: the end of the stream counts only once the ring is read
        // out (the peer wrote its last frames before it closed).
        if (look == Look::no) {
            errno = EAGAIN;
            return -1;
        }
        if (look == Look::for_end && !ended_) {
            pollfd p{socket_, POLLRDHUP, 0};
            if (::poll(&p, 1, 0) <= 0 || !(p.revents & (POLLRDHUP | POLLHUP | POLLERR))) {
                errno = EAGAIN;
                return -1;
            }
        }
        const int r = drain_socket();
        if (r < 0 && errno != EAGAIN)
            return -1;
        // Bytes may have come while the socket was read.
        const std::uint64_t again = rx_->head.load(std::memory_order_acquire);
        if (again - rx_tail_ > kRingBytes) {
            errno = EPROTO;
            return -1;
        }
        n = std::min<std::uint64_t>(want, again - rx_tail_);
        if (n == 0) {
            if (ended_)
                return 0;
            errno = EAGAIN;
            return -1;
        }
    }
    const std::size_t at = rx_tail_ & kMask;
    const std::size_t first = std::min(n, kRingBytes - at);
    auto* to = static_cast<std::uint8_t*>(into);
    if (!copy(to, rx_bytes_ + at, first, registered) || (n > first && !copy(to + first, rx_bytes_, n - first, registered))) {
        errno = EFAULT; // the target was unmapped under us; nothing is consumed
        return -1;
    }
    consume(n);
    return static_cast<ssize_t>(n);
}

void ShmLink::consume(std::size_t n)
{
    rx_tail_ += n;
    // The tail is published once kPublishTail (64 KiB) was read since the
    // last time, not per frame: its cache line then stays in the writer's
    // cache, and the seq_cst store (a locked instruction) is rare. A writer
    // that finds the ring full waits on a tail at most that far behind, so
    // nearly the whole ring is unread and reading it publishes the tail.
    if (rx_tail_ - rx_published_ >= kPublishTail)
        publish_tail();
}

void ShmLink::publish_tail()
{
    rx_published_ = rx_tail_;
    if (store_then_look(rx_->tail, rx_tail_, rx_->writer_waits) && rx_->writer_waits.exchange(0))
        wake_peer();
}

bool ShmLink::prepare_to_sleep()
{
    if (rx_published_ != rx_tail_) // all the room there is, while this side sleeps
        publish_tail();
    return store_then_look(rx_->reader_sleeps, 1u, rx_->head) == rx_tail_;
}

} // namespace fastdapl::softnic
