// Socket addresses of either family (IPv4, IPv6) as the connection managers
// and the provider keep them: in a sockaddr_storage, port in network order.
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdint>
#include <cstring>

namespace fastdapl::cm {

// The size of an address of `family`; 0 for a family we do not speak.
inline socklen_t address_size(sa_family_t family)
{
    return family == AF_INET ? sizeof(sockaddr_in) : family == AF_INET6 ? sizeof(sockaddr_in6) : 0;
}

// Copies an IPv4 or IPv6 address; false (out cleared) for any other family.
inline bool copy_address(sockaddr_storage& out, const sockaddr* in)
{
    out = {};
    const socklen_t size = in ? address_size(in->sa_family) : 0;
    if (size == 0)
        return false;
    std::memcpy(&out, in, size);
    return true;
}

inline std::uint16_t port_of(const sockaddr_storage& a)
{
    if (a.ss_family == AF_INET6)
        return ntohs(reinterpret_cast<const sockaddr_in6&>(a).sin6_port);
    return ntohs(reinterpret_cast<const sockaddr_in&>(a).sin_port);
}

// The port a 64-bit connection qualifier listens on and connects to: its
// lowest 16-bit piece that is not zero. 1..65535 are ports as they are, and
// larger qualifiers truncate as the reference's rdma_cm provider does
// (0xaffab1e -> 0xab1e); 0x10000 takes the next piece (1). 0 has no port.
inline std::uint16_t port_of_qualifier(std::uint64_t qual)
{
    for (; qual != 0; qual >>= 16)
        if (const auto piece = static_cast<std::uint16_t>(qual & 0xffff); piece != 0)
            return piece;
    return 0;
}

inline void set_port(sockaddr_storage& a, std::uint16_t port)
{
    if (a.ss_family == AF_INET6)
        reinterpret_cast<sockaddr_in6&>(a).sin6_port = htons(port);
    else
        reinterpret_cast<sockaddr_in&>(a).sin_port = htons(port);
}

// Whether two addresses name the same host (family and address; ports and,
// for IPv6, flow labels aside).
inline bool same_host(const sockaddr_storage& a, const sockaddr* b)
{
    if (!b || a.ss_family != b->sa_family)
        return false;
    if (a.ss_family == AF_INET)
        return reinterpret_cast<const sockaddr_in&>(a).sin_addr.s_addr ==
               reinterpret_cast<const sockaddr_in*>(b)->sin_addr.s_addr;
    if (a.ss_family == AF_INET6)
        return std::memcmp(&reinterpret_cast<const sockaddr_in6&>(a).sin6_addr,
                           &reinterpret_cast<const sockaddr_in6*>(b)->sin6_addr, sizeof(in6_addr)) == 0;
    return false;
}

} // namespace fastdapl::cm
