// Cross-memory attach's pieces (src/softnic/cross_memory): the segment list
// a pulled WRITE's frame carries, decoded as the hostile input it is, and
// the copy from another process's memory with its last byte last.
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#include "cross_memory.hpp"

#include <gtest/gtest.h>

#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <vector>

using namespace fastdapl::softnic;

namespace {

constexpr std::size_t kMaxCount = 16;
constexpr std::uint64_t kMaxTotal = 1u << 30;

std::vector<std::uint8_t> encoded(const std::vector<PullSegment>& segments)
{
    std::vector<std::uint8_t> bytes(segments.size() * kPullSegmentBytes);
    encode_pull_segments(segments.data(), segments.size(), bytes.data());
    return bytes;
}

bool decodes(const std::vector<std::uint8_t>& bytes, std::size_t n, std::vector<PullSegment>* out = nullptr,
             std::uint64_t* total_out = nullptr)
{
    PullSegment segments[kMaxCount];
    std::size_t count = 99;
    std::uint64_t total = 0;
    if (!decode_pull_segments(bytes.data(), n, kMaxCount, kMaxTotal, segments, count, total))
        return false;
    if (out)
        out->assign(segments, segments + count);
    if (total_out)
        *total_out = total;
    return true;
}

TEST(PullSegments, RoundTripIsBigEndianOnTheWire)
{
    const std::vector<PullSegment> in = {{0x1122334455667788u, 3}, {0x1000, 0x40000}, {0x7fff00001000u, 1}};
    const std::vector<std::uint8_t> bytes = encoded(in);
    ASSERT_EQ(bytes.size(), 48u);
    EXPECT_EQ(bytes[0], 0x11);
    EXPECT_EQ(bytes[7], 0x88);
    EXPECT_EQ(bytes[15], 3);
    std::vector<PullSegment> out;
    std::uint64_t total = 0;
    ASSERT_TRUE(decodes(bytes, bytes.size(), &out, &total));
    ASSERT_EQ(out.size(), in.size());
    for (std::size_t i = 0; i < in.size(); ++i) {
        EXPECT_EQ(out[i].addr, in[i].addr);
        EXPECT_EQ(out[i].length, in[i].length);
    }
    EXPECT_EQ(total, 3u + 0x40000u + 1u);
}

TEST(PullSegments, EveryTruncationIsRefusedOrAShorterWholeList)
{
    const std::vector<std::uint8_t> bytes = encoded({{0x1000, 10}, {0x2000, 20}, {0x3000, 30}});
    for (std::size_t n = 0; n < bytes.size(); ++n) {
        std::vector<PullSegment> out;
        std::uint64_t total = 0;
        const bool ok = decodes(bytes, n, &out, &total);
        if (n == 0 || n % kPullSegmentBytes != 0) {
            EXPECT_FALSE(ok) << n << " bytes";
            continue;
        }
        // A whole shorter list is a smaller WRITE (the frame's length says
        // how many): its total is what the target checks its key against.
        ASSERT_TRUE(ok) << n << " bytes";
        EXPECT_EQ(out.size(), n / kPullSegmentBytes);
        EXPECT_EQ(total, n == 16 ? 10u : 30u);
    }
}

TEST(PullSegments, EmptyWrappingOversizedAndTooManyAreRefused)
{
    EXPECT_FALSE(decodes(encoded({{0x1000, 0}}), 16)) << "an empty segment";
    EXPECT_FALSE(decodes(encoded({{0x1000, 10}, {0x2000, 0}}), 32)) << "an empty segment after a good one";
    EXPECT_FALSE(decodes(encoded({{~std::uint64_t{0} - 0xfff, 0x2000}}), 16)) << "wraps past the address space";
    EXPECT_FALSE(decodes(encoded({{0x1000, kMaxTotal + 1}}), 16)) << "larger than a message";
    EXPECT_FALSE(decodes(encoded({{0x1000, ~std::uint64_t{0}}}), 16)) << "the largest length";
    EXPECT_FALSE(decodes(encoded({{0x1000, kMaxTotal}, {0x2000, 1}}), 32)) << "a sum past the limit";
    // Two lengths whose 64-bit sum wraps to something small.
    EXPECT_FALSE(decodes(encoded({{0x1000, kMaxTotal}, {0x2000, ~std::uint64_t{0} - kMaxTotal + 2}}), 32));
    EXPECT_TRUE(decodes(encoded({{0x1000, kMaxTotal}}), 16)) << "exactly the limit";
    std::vector<PullSegment> many(kMaxCount, PullSegment{0x1000, 1});
    EXPECT_TRUE(decodes(encoded(many), many.size() * kPullSegmentBytes));
    many.push_back({0x1000, 1});
    EXPECT_FALSE(decodes(encoded(many), many.size() * kPullSegmentBytes)) << "more segments than kMaxSge";
}

// A child holds `source` (copied at fork) and waits: the parent pulls
// from its memory.
struct Child {
    explicit Child()
    {
        if (pipe(fds) != 0)
            return;
        pid = fork();
        if (pid == 0) {
            char c;
            [[maybe_unused]] ssize_t n = read(fds[0], &c, 1);
            _exit(0);
        }
        if (pid > 0)
            peer.open(pid);
    }
    // Lets the child exit and waits until it has (a zombie, not reaped).
    void let_exit()
    {
        [[maybe_unused]] ssize_t n = write(fds[1], "x", 1);
        siginfo_t info{};
        waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOWAIT);
    }
    ~Child()
    {
        peer.close();
        if (pid > 0) {
            [[maybe_unused]] ssize_t n = write(fds[1], "x", 1);
            waitpid(pid, nullptr, 0);
        }
        close(fds[0]);
        close(fds[1]);
    }
    int fds[2] = {-1, -1};
    pid_t pid = -1;
    PeerProcess peer;
};

TEST(PullLastByteLast, CopiesSegmentsFromAnotherProcess)
{
    std::vector<std::uint8_t> source(200000);
    for (std::size_t i = 0; i < source.size(); ++i)
        source[i] = static_cast<std::uint8_t>(i * 13 + 1);
    Child child;
    ASSERT_GT(child.pid, 0);
    const std::vector<std::uint8_t> expected = source;
    std::fill(source.begin(), source.end(), 0); // ours changes; the child's copy does not
    // Three remote segments into two local ones of other sizes.
    std::vector<std::uint8_t> a(70000, 0xee), b(130000, 0xee);
    const iovec local[2] = {{a.data(), a.size()}, {b.data(), b.size()}};
    const iovec remote[3] = {{source.data(), 1}, {source.data() + 1, 99999}, {source.data() + 100000, 100000}};
    if (!pull_last_byte_last(child.peer, local, 2, remote, 3) && (errno == EPERM || errno == ENOSYS))
        GTEST_SKIP() << "process_vm_readv is not allowed here: " << std::strerror(errno);
    EXPECT_EQ(std::memcmp(a.data(), expected.data(), a.size()), 0);
    EXPECT_EQ(std::memcmp(b.data(), expected.data() + a.size(), b.size()), 0);
}

TEST(PullLastByteLast, UnmappedPagesOnEitherSideAreEfault)
{
    const long page = sysconf(_SC_PAGESIZE);
    auto* mapped = static_cast<std::uint8_t*>(
        mmap(nullptr, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    ASSERT_NE(mapped, MAP_FAILED);
    std::memset(mapped, 0x5a, 2 * page);
    ASSERT_EQ(munmap(mapped + page, page), 0); // the second page goes, in both processes after the fork
    Child child;
    ASSERT_GT(child.pid, 0);
    std::vector<std::uint8_t> into(2 * page, 0);
    const iovec local{into.data(), into.size()};
    const iovec remote{mapped, static_cast<std::size_t>(2 * page)};
    errno = 0;
    EXPECT_FALSE(pull_last_byte_last(child.peer, &local, 1, &remote, 1));
    if (errno == EPERM || errno == ENOSYS)
        GTEST_SKIP() << "process_vm_readv is not allowed here";
    EXPECT_EQ(errno, EFAULT) << "the source's second page is unmapped";
    EXPECT_EQ(into[2 * page - 1], 0) << "the last byte is never stored after a fault";
    // The target's second page unmapped.
    std::vector<std::uint8_t> source(2 * page, 7);
    const iovec to{mapped, static_cast<std::size_t>(2 * page)};
    const iovec from{source.data(), source.size()};
    errno = 0;
    EXPECT_FALSE(pull_last_byte_last(child.peer, &to, 1, &from, 1));
    EXPECT_EQ(errno, EFAULT);
    munmap(mapped, page);
}

TEST(PullLastByteLast, ListsThatDisagreeOrHoldNothingAreEinval)
{
    PeerProcess self;
    ASSERT_TRUE(self.open(getpid()));
    std::uint8_t a[8] = {}, b[9] = {};
    const iovec eight{a, sizeof a}, nine{b, sizeof b}, empty{a, 0};
    errno = 0;
    EXPECT_FALSE(pull_last_byte_last(self, &eight, 1, &nine, 1));
    EXPECT_EQ(errno, EINVAL);
    errno = 0;
    EXPECT_FALSE(pull_last_byte_last(self, &empty, 1, &empty, 1));
    EXPECT_EQ(errno, EINVAL);
    std::vector<iovec> long_list(65, iovec{a, 0});
    long_list[0].iov_len = 1;
    const iovec one{b, 1};
    errno = 0;
    EXPECT_FALSE(pull_last_byte_last(self, long_list.data(), long_list.size(), &one, 1));
    EXPECT_EQ(errno, EINVAL);
    self.close();
}

// The peer exited and its pid now names another process (made here by
// pairing a live child's pid with an exited child's pidfd): what was read
// through the pid is not the peer's, so the pull fails and the last byte
// is never stored.
TEST(PullLastByteLast, APidThatNoLongerNamesThePeerIsEsrch)
{
    const std::vector<std::uint8_t> source(4096, 9); // before the fork: the children hold it too
    std::vector<std::uint8_t> into(4096, 0);
    Child gone, other;
    ASSERT_GT(gone.pid, 0);
    ASSERT_GT(other.pid, 0);
    ASSERT_GE(gone.peer.pidfd, 0);
    EXPECT_TRUE(gone.peer.alive());
    gone.let_exit();
    EXPECT_FALSE(gone.peer.alive()) << "an exited (unreaped) process";
    EXPECT_TRUE(other.peer.alive());
    const iovec local{into.data(), into.size()};
    const iovec remote{const_cast<std::uint8_t*>(source.data()), source.size()};
    if (!pull_last_byte_last(other.peer, &local, 1, &remote, 1) && (errno == EPERM || errno == ENOSYS))
        GTEST_SKIP() << "process_vm_readv is not allowed here";
    EXPECT_EQ(into.back(), 9) << "the live peer's bytes arrive";
    std::fill(into.begin(), into.end(), 0);
    const PeerProcess reused{other.pid, gone.peer.pidfd};
    errno = 0;
    EXPECT_FALSE(pull_last_byte_last(reused, &local, 1, &remote, 1));
    EXPECT_EQ(errno, ESRCH);
    EXPECT_EQ(into.back(), 0) << "the last byte is not stored";
}

} // namespace
