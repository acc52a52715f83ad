// Choosing the device kind of an IA, once, at dat_ia_open.
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#include "../device_path.hpp"
#include "discovery.hpp" // src/verbs
#include "mapped_range.hpp" // src/softnic
#include "mlx5.hpp"
#include "softnic.hpp"
#include "verbs.hpp"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>

#include <algorithm>
#include <cstring>

namespace fastdapl::core {

std::string mtu_text(ibv_mtu mtu);

namespace {

// A softnic IA's address from ia_params: an interface name ("lo", "eth0")
// or an IPv4 address; empty means loopback.
bool resolve_address(const std::string& params, sockaddr_storage& out)
{
    std::string word = params.substr(0, params.find(' '));
    if (word.empty())
        word = "lo";
    auto* sin = reinterpret_cast<sockaddr_in*>(&out);
    std::memset(&out, 0, sizeof out);
    sin->sin_family = AF_INET;
    if (inet_pton(AF_INET, word.c_str(), &sin->sin_addr) == 1)
        return true;
    ifaddrs* list = nullptr;
    if (getifaddrs(&list) != 0)
        return false;
    bool found = false;
    for (ifaddrs* i = list; i && !found; i = i->ifa_next) {
        if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET && word == i->ifa_name) {
            std::memcpy(sin, i->ifa_addr, sizeof *sin);
            found = true;
        }
    }
    freeifaddrs(list);
    return found;
}

// The IB extensions an IA runs (extensions.cpp), named as consumers of the
// reference look for them: every kind runs write with immediate data and
// counters, atomics where the device has them; UD endpoints on the softnic
// and on verbs IAs over RoCE (generic and mlx5 direct path).
void add_extension_attributes(std::vector<std::pair<std::string, std::string>>& specific, bool atomics, bool ud)
{
    const char* const atomics_text = atomics ? "TRUE" : "FALSE";
    specific.emplace_back(DAT_IB_ATTR_IMMED_DATA, "TRUE");
    specific.emplace_back(DAT_IB_ATTR_CMP_AND_SWAP, atomics_text);
    specific.emplace_back(DAT_IB_ATTR_FETCH_AND_ADD, atomics_text);
    specific.emplace_back(DAT_IB_ATTR_COUNTERS, "TRUE");
    specific.emplace_back(DAT_IB_ATTR_UD, ud ? "TRUE" : "FALSE");
}

// Opens the device and port of a verbs IA and finds its address (the
// port's network interface's). The provider-specific attributes say which
// device, port and data path the IA uses.
DAT_RETURN open_verbs(const std::string& name, std::uint8_t port, int family, std::unique_ptr<DevicePath>& path,
                      sockaddr_storage& addr, std::vector<std::pair<std::string, std::string>>& specific)
{
    std::string why;
    std::unique_ptr<verbs::Device> device = verbs::Device::open(name, port, why);
    if (!device) {
        if (g_debug)
            std::fprintf(stderr, "fastdapl: %s\n", why.c_str());
        return error(DAT_PROVIDER_NOT_FOUND, DAT_NAME_NOT_REGISTERED);
    }
    bool mlx5 = false;
    std::string driver;
    for (const verbs::PortInfo& p : verbs::discover_ports()) {
        if (p.device != name || p.port != port)
            continue;
        addr = family == AF_INET6 ? p.address6 : p.address;
        driver = p.driver;
        specific = {{"FASTDAPL_DEVICE", p.device},
                    {"FASTDAPL_PORT", std::to_string(p.port)},
                    {"FASTDAPL_GID", p.gid},
                    {"FASTDAPL_GID_INDEX", std::to_string(p.gid_index)},
                    {"FASTDAPL_LINK_LAYER", p.link_layer},
                    {"FASTDAPL_NETDEV", p.netdev}};
        std::string data_path = "generic verbs";
        if (p.mlx5)
            mlx5 = Mlx5Path::usable(device->context(), data_path);
        specific.emplace_back("FASTDAPL_DATA_PATH", data_path);
    }
    // rdma_cm and the DAT address need an IP address of the port's interface.
    if (addr.ss_family == AF_UNSPEC || (family != AF_UNSPEC && addr.ss_family != family)) {
        if (g_debug)
            std::fprintf(stderr, "fastdapl: %s port %u has no %s address\n", name.c_str(), port,
                         family == AF_INET6  ? "IPv6"
                         : family == AF_INET ? "IPv4"
                                             : "IP");
        return error(DAT_INVALID_ADDRESS, DAT_INVALID_ADDRESS_UNREACHABLE);
    }
    specific.emplace_back("DAT_IB_TRANSPORT_MTU", mtu_text(device->port_attr().active_mtu));
    // UD endpoints: on an Ethernet (RoCE) port, either path (verbs.hpp says why).
    add_extension_attributes(specific, device->attr().atomic_cap != IBV_ATOMIC_NONE,
                             device->port_attr().link_layer == IBV_LINK_LAYER_ETHERNET);
    if (mlx5)
        path = std::make_unique<Mlx5Path>(std::move(device));
    else
        path = std::make_unique<VerbsPath>(PathKind::verbs, std::move(device), driver);
    return DAT_SUCCESS;
}

} // namespace

bool memory_is_shared(std::uint64_t addr, std::uint64_t length)
{
    bool shared = false;
    return softnic::check_mapped(addr, length, false, &shared) == softnic::RangeFault::none && shared;
}

DAT_RETURN open_device_path(const std::string& ia_params, std::unique_ptr<DevicePath>& path, sockaddr_storage& address,
                            std::vector<std::pair<std::string, std::string>>& specific)
{
    // A verbs IA names its device and port; a softnic IA its interface.
    std::string device_name;
    std::uint8_t port = 0;
    int family = AF_UNSPEC;
    if (verbs::parse_ia_params(ia_params, device_name, port, &family))
        return open_verbs(device_name, port, family, path, address, specific);
    // "shm [interface or address]": the shared-memory kind, for processes of
    // this host; its address is the interface's (loopback by default).
    const bool shm = ia_params == "shm" || ia_params.starts_with("shm ");
    if (!resolve_address(shm ? ia_params.substr(std::min<std::size_t>(4, ia_params.size())) : ia_params, address))
        return error(DAT_INVALID_ADDRESS, DAT_INVALID_ADDRESS_UNSUPPORTED);
    path = std::make_unique<SoftnicPath>(address, shm);
    // As verbs IAs say theirs (dat_info and FASTDAPL_DEBUG print it).
    specific.emplace_back("FASTDAPL_DATA_PATH", shm ? "softnic shm" : "softnic tcp");
    // Consumers written for IB providers size messages by the transport's
    // MTU when not told (the reference's dtestsrq refuses to run without
    // it). The softnic has no packets; 4096 is the largest IB/RoCE MTU.
    specific.emplace_back("DAT_IB_TRANSPORT_MTU", "4096");
    add_extension_attributes(specific, true, true);
    return DAT_SUCCESS;
}

} // namespace fastdapl::core
