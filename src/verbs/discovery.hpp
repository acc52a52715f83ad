// RDMA devices and ports present on this host, and how an IA names one.
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#pragma once

#include <sys/socket.h>

#include <cstdint>
#include <string>
#include <vector>

namespace fastdapl::verbs {

struct PortInfo {
    std::string device;         // ibv device name, e.g. "rxe0", "mlx5_0"
    std::uint8_t port = 0;      // 1-based
    bool active = false;        // IBV_PORT_ACTIVE
    std::string link_layer;     // "InfiniBand" or "Ethernet"
    std::string gid;            // the GID at gid_index as text, empty if none
    int gid_index = -1;         // RoCE: an entry whose netdev has the address; else 0
    std::string netdev;         // the port's network interface, empty if unknown
    sockaddr_storage address{}; // IPv4 address of that netdev (else IPv6, else AF_UNSPEC)
    sockaddr_storage address6{}; // its IPv6 address (global before link-local), else AF_UNSPEC
    bool mlx5 = false;          // mlx5dv_is_supported() on the device
    std::string driver;         // e.g. "rxe", "mlx5"; may be empty
};

// Every port of every device (inactive ones too); empty without rdma-core
// devices or kernel support. Never throws.
std::vector<PortInfo> discover_ports();
std::string ia_name(const PortInfo& p);   // "fastdapl-rxe0-1"
std::string ia_params(const PortInfo& p); // "verbs:rxe0:1"
// Parses ia_params of the form "verbs:<device>:<port>[:ipv4|:ipv6]"; false
// if it is not one. The suffix picks the IA address's family (`family`
// gets AF_INET or AF_INET6); without it, AF_UNSPEC: the port's IPv4
// address, else its IPv6 one.
bool parse_ia_params(const std::string& params, std::string& device, std::uint8_t& port, int* family = nullptr);
std::string address_text(const sockaddr_storage& a); // "192.0.2.1", IPv6 text, or ""

} // namespace fastdapl::verbs
