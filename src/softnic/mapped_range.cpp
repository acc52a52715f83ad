// Is a range of this process's memory there, with the access asked for?
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#include "mapped_range.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <string_view>

namespace fastdapl::softnic {

namespace {

// One line of /proc/self/maps: "start-end perms offset dev inode   path".
struct Mapping {
    std::uint64_t start = 0, end = 0;
    bool read = false, write = false, shared = false;
};

// Parses the first fields of a (possibly truncated) line; false if they are
// not what the kernel writes.
bool parse(std::string_view line, Mapping& m)
{
    const char* p = line.data();
    const char* const e = p + line.size();
    auto r = std::from_chars(p, e, m.start, 16);
    if (r.ec != std::errc{} || r.ptr == e || *r.ptr != '-')
        return false;
    r = std::from_chars(r.ptr + 1, e, m.end, 16);
    if (r.ec != std::errc{} || e - r.ptr < 6 || r.ptr[0] != ' ' || r.ptr[5] != ' ' || m.end <= m.start)
        return false;
    m.read = r.ptr[1] == 'r';
    m.write = r.ptr[2] == 'w';
    m.shared = r.ptr[4] == 's';
    // The kernel's own mappings are not memory a device could pin. The path
    // (or [name]) follows offset, device and inode, after padding.
    std::string_view rest(r.ptr + 6, static_cast<std::size_t>(e - (r.ptr + 6)));
    for (int field = 0; field < 3; ++field) {
        const std::size_t space = rest.find(' ');
        if (space == std::string_view::npos)
            return false;
        rest.remove_prefix(space + 1);
    }
    const std::size_t path = rest.find_first_not_of(' ');
    rest.remove_prefix(path == std::string_view::npos ? rest.size() : path);
    if (rest.starts_with("[vvar") || rest.starts_with("[vsyscall]"))
        m.read = m.write = false;
    return true;
}

} // namespace

RangeFault check_mapped(std::uint64_t addr, std::uint64_t length, bool write, bool* shared)
{
    if (shared)
        *shared = true;
    if (length == 0 || addr + length < addr)
        return RangeFault::length;
    const std::uint64_t end = addr + length; // exclusive; nonzero
    int fd;
    do
        fd = ::open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
    while (fd < 0 && errno == EINTR);
    if (fd < 0)
        return RangeFault::unverified;

    // rcur: how far from addr the range is mapped readable without a gap;
    // wcur: how far readable and writable. Mappings come in address order.
    std::uint64_t rcur = addr, wcur = addr;
    bool rstopped = false, wstopped = false, bad = false;
    auto take = [&](const Mapping& m) {
        if (m.end <= rcur)
            return;
        if (m.start > rcur || !m.read) {
            rstopped = true; // a gap, or memory that cannot be read
            return;
        }
        rcur = m.end;
        if (shared && !m.shared)
            *shared = false;
        if (!wstopped && m.start <= wcur && wcur < m.end) {
            if (m.write)
                wcur = m.end;
            else
                wstopped = true;
        }
    };
    auto done = [&] { return bad || rstopped || (rcur >= end && (!write || wstopped || wcur >= end)); };

    // A line is kept up to kLine bytes: enough for every field but a long
    // path, which is never needed.
    constexpr std::size_t kLine = 192;
    char line[kLine];
    std::size_t used = 0;
    char chunk[1024];
    while (!done()) {
        const ssize_t n = ::read(fd, chunk, sizeof chunk);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            bad = true;
            break;
        }
        if (n == 0)
            break;
        for (ssize_t i = 0; i < n && !done(); ++i) {
            if (chunk[i] != '\n') {
                if (used < kLine)
                    line[used++] = chunk[i];
                continue;
            }
            Mapping m;
            if (!parse(std::string_view(line, used), m))
                bad = true;
            else
                take(m);
            used = 0;
        }
    }
    ::close(fd);
    if (bad)
        return RangeFault::unverified;
    if (rcur == addr)
        return RangeFault::start;
    if (rcur < end)
        return RangeFault::length;
    if (write && wcur < end)
        return RangeFault::rights;
    return RangeFault::none;
}

} // namespace fastdapl::softnic
