// RDMA discovery: the IA naming functions, address text, and that
// discover_ports() is safe wherever it runs (no devices, no kernel support).
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#include "discovery.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <gtest/gtest.h>

#include <cstring>
#include <string>

namespace {

using namespace fastdapl::verbs;

PortInfo port_of(const std::string& device, std::uint8_t port)
{
    PortInfo p;
    p.device = device;
    p.port = port;
    return p;
}

TEST(IaNames, NameAndParams)
{
    EXPECT_EQ(ia_name(port_of("rxe0", 1)), "fastdapl-rxe0-1");
    EXPECT_EQ(ia_params(port_of("rxe0", 1)), "verbs:rxe0:1");
    EXPECT_EQ(ia_name(port_of("mlx5_0", 2)), "fastdapl-mlx5_0-2");
    EXPECT_EQ(ia_params(port_of("mlx5_0", 2)), "verbs:mlx5_0:2");
    EXPECT_EQ(ia_params(port_of("mlx5_bond_0", 255)), "verbs:mlx5_bond_0:255");
}

TEST(IaNames, ParamsRoundTrip)
{
    for (const char* device : {"rxe0", "mlx5_0", "siw_eth0", "x"}) {
        for (int port : {1, 2, 9, 10, 99, 100, 255}) {
            const PortInfo p = port_of(device, static_cast<std::uint8_t>(port));
            std::string d = "unchanged";
            std::uint8_t n = 0;
            ASSERT_TRUE(parse_ia_params(ia_params(p), d, n)) << ia_params(p);
            EXPECT_EQ(d, device);
            EXPECT_EQ(n, port);
        }
    }
}

TEST(IaNames, ParseAccepts)
{
    std::string d;
    std::uint8_t n = 0;
    ASSERT_TRUE(parse_ia_params("verbs:rxe0:1", d, n));
    EXPECT_EQ(d, "rxe0");
    EXPECT_EQ(n, 1);
    ASSERT_TRUE(parse_ia_params("verbs:mlx5_1:2", d, n));
    EXPECT_EQ(d, "mlx5_1");
    EXPECT_EQ(n, 2);
    ASSERT_TRUE(parse_ia_params("verbs:rxe0:007", d, n)); // leading zeros are still a number
    EXPECT_EQ(n, 7);
}

TEST(IaNames, ParseAddressFamily)
{
    std::string d;
    std::uint8_t n = 0;
    int family = -1;
    ASSERT_TRUE(parse_ia_params("verbs:rxe0:1", d, n, &family));
    EXPECT_EQ(family, AF_UNSPEC);
    ASSERT_TRUE(parse_ia_params("verbs:rxe0:2:ipv6", d, n, &family));
    EXPECT_EQ(d, "rxe0");
    EXPECT_EQ(n, 2);
    EXPECT_EQ(family, AF_INET6);
    ASSERT_TRUE(parse_ia_params("verbs:mlx5_0:1:ipv4", d, n, &family));
    EXPECT_EQ(d, "mlx5_0");
    EXPECT_EQ(family, AF_INET);
    for (const char* text : {"verbs:rxe0:ipv6", "verbs:rxe0:1:ipv5", "verbs:rxe0:1:IPV6", "verbs:rxe0:1:ipv6:ipv6",
                             "verbs:rxe0:1ipv6", "verbs::1:ipv6", "verbs:rxe0:1:ipv6 "}) {
        family = 42;
        EXPECT_FALSE(parse_ia_params(text, d, n, &family)) << '"' << text << '"';
        EXPECT_EQ(family, 42) << text;
    }
}

TEST(IaNames, ParseRejects)
{
    for (const char* text : {"",
                             "lo",
                             "192.0.2.1",
                             "eth0",
                             "verbs",
                             "verbs:",
                             "verbs::",
                             "verbs::1",
                             "verbs:rxe0",
                             "verbs:rxe0:",
                             "verbs:rxe0:0",
                             "verbs:rxe0:256",
                             "verbs:rxe0:1000",
                             "verbs:rxe0:-1",
                             "verbs:rxe0:+1",
                             "verbs:rxe0:1x",
                             "verbs:rxe0:x",
                             "verbs:rxe0: 1",
                             "verbs:rxe0:1 ",
                             "verbs:rxe0:1 extra",
                             "verbs:a:b:1",
                             "verbs:rx e0:1",
                             "verbs:rxe/0:1",
                             "Verbs:rxe0:1",
                             " verbs:rxe0:1",
                             "mlx5_0 1",
                             "verbs:rxe0:99999999999999999999"}) {
        std::string d = "unchanged";
        std::uint8_t n = 42;
        EXPECT_FALSE(parse_ia_params(text, d, n)) << '"' << text << '"';
        EXPECT_EQ(d, "unchanged") << text;
        EXPECT_EQ(n, 42) << text;
    }
    // A device name longer than the kernel allows.
    std::string d;
    std::uint8_t n = 0;
    EXPECT_FALSE(parse_ia_params("verbs:" + std::string(200, 'a') + ":1", d, n));
    // An embedded NUL is not part of any device name.
    EXPECT_FALSE(parse_ia_params(std::string("verbs:rx\0e0:1", 13), d, n));
}

TEST(AddressText, Families)
{
    sockaddr_storage none{};
    EXPECT_EQ(address_text(none), "");

    sockaddr_storage v4{};
    auto& in = reinterpret_cast<sockaddr_in&>(v4);
    in.sin_family = AF_INET;
    ASSERT_EQ(inet_pton(AF_INET, "192.0.2.1", &in.sin_addr), 1);
    EXPECT_EQ(address_text(v4), "192.0.2.1");

    sockaddr_storage v6{};
    auto& in6 = reinterpret_cast<sockaddr_in6&>(v6);
    in6.sin6_family = AF_INET6;
    ASSERT_EQ(inet_pton(AF_INET6, "2001:db8::1", &in6.sin6_addr), 1);
    EXPECT_EQ(address_text(v6), "2001:db8::1");

    sockaddr_storage other{};
    other.ss_family = AF_UNIX;
    EXPECT_EQ(address_text(other), "");
}

TEST(AddressText, LinkLocalHasScope)
{
    sockaddr_storage v6{};
    auto& in6 = reinterpret_cast<sockaddr_in6&>(v6);
    in6.sin6_family = AF_INET6;
    ASSERT_EQ(inet_pton(AF_INET6, "fe80::1", &in6.sin6_addr), 1);
    EXPECT_EQ(address_text(v6), "fe80::1"); // no scope given
    in6.sin6_scope_id = 1;                  // the loopback interface's index on Linux
    const std::string text = address_text(v6);
    EXPECT_EQ(text.rfind("fe80::1%", 0), 0u) << text;
}

TEST(Discovery, SafeWithoutDevices)
{
    // Any host: never throws or aborts; every port it reports is well formed.
    const auto ports = discover_ports();
    for (const auto& p : ports) {
        EXPECT_FALSE(p.device.empty());
        EXPECT_GE(p.port, 1);
        EXPECT_TRUE(p.link_layer == "InfiniBand" || p.link_layer == "Ethernet") << p.link_layer;
        EXPECT_EQ(p.gid.empty(), p.gid_index < 0) << p.device;
        EXPECT_TRUE(p.address.ss_family == AF_UNSPEC || p.address.ss_family == AF_INET ||
                    p.address.ss_family == AF_INET6);
        std::string d;
        std::uint8_t n = 0;
        ASSERT_TRUE(parse_ia_params(ia_params(p), d, n));
        EXPECT_EQ(d, p.device);
        EXPECT_EQ(n, p.port);
    }
    // Side-effect free: a second look finds the same ports.
    const auto again = discover_ports();
    ASSERT_EQ(again.size(), ports.size());
    for (std::size_t i = 0; i < ports.size(); ++i)
        EXPECT_EQ(ia_name(again[i]), ia_name(ports[i]));
}

} // namespace
