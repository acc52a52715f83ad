// RDMA device and port discovery: libibverbs for the ports and GIDs, sysfs
// for the network interface behind each, getifaddrs() for its address.
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#include "discovery.hpp"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <infiniband/verbs.h>
#include <net/if.h>
#include <netinet/in.h>
#ifdef FASTDAPL_HAVE_MLX5DV
#include <infiniband/mlx5dv.h>
#endif

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace fastdapl::verbs {

namespace {

namespace fs = std::filesystem;

// Where sysfs is: "/sys", or FASTDAPL_SYSFS_ROOT, a test hook (tests/fake_mlx5
// builds a small tree there for its software mlx5 device). Both
// <root>/class/infiniband and <root>/class/net are read under it.
fs::path sysfs_root()
{
    const char* root = std::getenv("FASTDAPL_SYSFS_ROOT");
    return root && *root ? fs::path(root) : fs::path("/sys");
}
fs::path sys_infiniband() { return sysfs_root() / "class" / "infiniband"; }
fs::path sys_net() { return sysfs_root() / "class" / "net"; }

// The first line of a sysfs file; "" when it is absent or unreadable (an
// empty GID table entry answers reads with EINVAL).
std::string read_line(const fs::path& p)
{
    std::ifstream in(p);
    std::string s;
    if (in)
        std::getline(in, s);
    while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\r'))
        s.pop_back();
    return s;
}

// One interface address as getifaddrs() reports it.
struct IfAddress {
    std::string netdev;
    sockaddr_storage address{};
};

std::vector<IfAddress> interface_addresses()
{
    std::vector<IfAddress> out;
    ifaddrs* list = nullptr;
    if (getifaddrs(&list) != 0)
        return out;
    for (const ifaddrs* i = list; i; i = i->ifa_next) {
        if (!i->ifa_addr || !i->ifa_name)
            continue;
        const int family = i->ifa_addr->sa_family;
        if (family != AF_INET && family != AF_INET6)
            continue;
        IfAddress a;
        a.netdev = i->ifa_name;
        std::memcpy(&a.address, i->ifa_addr, family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6));
        out.push_back(std::move(a));
    }
    freeifaddrs(list);
    return out;
}

bool is_link_local(const sockaddr_storage& a)
{
    return a.ss_family == AF_INET6 && IN6_IS_ADDR_LINKLOCAL(&reinterpret_cast<const sockaddr_in6&>(a).sin6_addr);
}

// The address of `netdev` an IA would use: IPv4, else a global IPv6 one,
// else a link-local IPv6 one (with its scope), else AF_UNSPEC. Only of
// `family`, unless that is AF_UNSPEC.
sockaddr_storage netdev_address(const std::string& netdev, const std::vector<IfAddress>& addresses,
                                int family = AF_UNSPEC)
{
    sockaddr_storage none{};
    if (netdev.empty())
        return none;
    int best_rank = 0;
    const sockaddr_storage* best = nullptr;
    for (const auto& a : addresses) {
        if (a.netdev != netdev || (family != AF_UNSPEC && a.address.ss_family != family))
            continue;
        const int rank = a.address.ss_family == AF_INET ? 3 : is_link_local(a.address) ? 1 : 2;
        if (rank > best_rank) {
            best_rank = rank;
            best = &a.address;
        }
    }
    return best ? *best : none;
}

std::string gid_text(const ibv_gid& g)
{
    char buf[48];
    char* p = buf;
    for (int i = 0; i < 16; i += 2)
        p += std::snprintf(p, sizeof buf - static_cast<std::size_t>(p - buf), "%s%02x%02x", i ? ":" : "", g.raw[i],
                           g.raw[i + 1]);
    return buf;
}

bool gid_is_zero(const ibv_gid& g)
{
    return std::all_of(std::begin(g.raw), std::end(g.raw), [](std::uint8_t b) { return b == 0; });
}

// An IPv4 address as RoCE puts it in a GID: ::ffff:a.b.c.d.
bool gid_is_v4_mapped(const ibv_gid& g)
{
    static constexpr std::uint8_t prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    return std::memcmp(g.raw, prefix, sizeof prefix) == 0;
}

// Whether `gid` is the GID of address `a` (IPv4-mapped or the IPv6 address itself).
bool gid_matches(const ibv_gid& gid, const sockaddr_storage& a)
{
    if (a.ss_family == AF_INET)
        return gid_is_v4_mapped(gid) &&
               std::memcmp(gid.raw + 12, &reinterpret_cast<const sockaddr_in&>(a).sin_addr, 4) == 0;
    if (a.ss_family == AF_INET6)
        return std::memcmp(gid.raw, &reinterpret_cast<const sockaddr_in6&>(a).sin6_addr, 16) == 0;
    return false;
}

// The kernel's driver of the device, by the name users know it by
// ("mlx5_core" → "mlx5"). Soft devices (rxe, siw) have no device/driver
// link; their name says the driver: "rxe0" → "rxe".
std::string driver_of(const fs::path& sys, const std::string& name)
{
    std::error_code ec;
    const fs::path target = fs::read_symlink(sys / "device" / "driver", ec);
    std::string driver = ec ? std::string() : target.filename().string();
    if (driver.size() > 5 && driver.ends_with("_core"))
        driver.resize(driver.size() - 5);
    if (!driver.empty())
        return driver;
    for (const char* soft : {"rxe", "siw"}) {
        const std::size_t n = std::strlen(soft);
        if (name.size() > n && name.compare(0, n, soft) == 0 &&
            std::all_of(name.begin() + static_cast<std::ptrdiff_t>(n), name.end(),
                        [](char c) { return c >= '0' && c <= '9'; }))
            return soft;
    }
    return {};
}

// The IPoIB interface of `port`: an interface of the device whose dev_port
// is port - 1, preferring one with an address; else the device's first.
std::string ipoib_netdev(const fs::path& sys, std::uint8_t port, const std::vector<IfAddress>& addresses)
{
    std::error_code ec;
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(sys / "device" / "net", ec))
        names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    std::string first_of_port, with_address;
    for (const auto& n : names) {
        const std::string dev_port = read_line(sys_net() / n / "dev_port");
        if (dev_port != std::to_string(port - 1))
            continue;
        if (first_of_port.empty())
            first_of_port = n;
        if (with_address.empty() && netdev_address(n, addresses).ss_family != AF_UNSPEC)
            with_address = n;
    }
    if (!with_address.empty())
        return with_address;
    if (!first_of_port.empty())
        return first_of_port;
    return names.empty() ? std::string() : names.front();
}

// RoCE: the GID table entries that name a network interface. The entry
// chosen is the one of an address of its interface (IPv4 before IPv6,
// RoCE v2 before v1, lowest index first), as rdma_cm would resolve it;
// without one, the first entry.
void choose_roce_gid(ibv_context* ctx, const fs::path& sys, PortInfo& p, const std::vector<IfAddress>& addresses,
                     int gid_table_len)
{
    const fs::path attrs = sys / "ports" / std::to_string(p.port) / "gid_attrs";
    int best_rank = -1;
    for (int index = 0; index < gid_table_len; ++index) {
        const std::string netdev = read_line(attrs / "ndevs" / std::to_string(index));
        if (netdev.empty())
            continue;
        ibv_gid gid{};
        if (ibv_query_gid(ctx, p.port, index, &gid) != 0 || gid_is_zero(gid))
            continue;
        const bool v2 = read_line(attrs / "types" / std::to_string(index)) == "RoCE v2";
        int rank = 0;
        sockaddr_storage address{};
        for (const auto& a : addresses) {
            if (a.netdev == netdev && gid_matches(gid, a.address)) {
                address = a.address;
                rank = (a.address.ss_family == AF_INET ? 4 : is_link_local(a.address) ? 1 : 2) * 2 + (v2 ? 1 : 0);
                break;
            }
        }
        if (rank > best_rank) {
            best_rank = rank;
            p.gid_index = index;
            p.gid = gid_text(gid);
            p.netdev = netdev;
            p.address = address.ss_family != AF_UNSPEC ? address : netdev_address(netdev, addresses);
        }
    }
}

// One port, from an open device context.
PortInfo query_port(ibv_context* ctx, const std::string& name, const fs::path& sys, std::uint8_t port,
                    const ibv_port_attr& pa, const std::vector<IfAddress>& addresses)
{
    PortInfo p;
    p.device = name;
    p.port = port;
    p.active = pa.state == IBV_PORT_ACTIVE;
    p.link_layer = pa.link_layer == IBV_LINK_LAYER_ETHERNET ? "Ethernet" : "InfiniBand";
    if (pa.link_layer == IBV_LINK_LAYER_ETHERNET)
        choose_roce_gid(ctx, sys, p, addresses, std::min(pa.gid_tbl_len, 1024));
    if (p.gid_index < 0) { // InfiniBand (or RoCE without a usable entry): GID 0
        ibv_gid gid{};
        if (ibv_query_gid(ctx, port, 0, &gid) == 0 && !gid_is_zero(gid)) {
            p.gid_index = 0;
            p.gid = gid_text(gid);
        }
        if (p.netdev.empty())
            p.netdev = ipoib_netdev(sys, port, addresses);
        p.address = netdev_address(p.netdev, addresses);
    }
    p.address6 = netdev_address(p.netdev, addresses, AF_INET6);
    return p;
}

void discover_device(ibv_device* device, const std::vector<IfAddress>& addresses, std::vector<PortInfo>& out)
{
    const char* raw_name = ibv_get_device_name(device);
    if (!raw_name)
        return;
    const std::string name = raw_name;
    const fs::path sys = sys_infiniband() / name;
    bool mlx5 = false;
#ifdef FASTDAPL_HAVE_MLX5DV
    mlx5 = mlx5dv_is_supported(device);
#endif
    const std::string driver = driver_of(sys, name);

    ibv_context* ctx = ibv_open_device(device);
    if (!ctx)
        return; // no access to its uverbs file: no IA could open it either
    ibv_device_attr attr{};
    if (ibv_query_device(ctx, &attr) == 0) {
        for (unsigned port = 1; port <= attr.phys_port_cnt; ++port) {
            ibv_port_attr pa{};
            if (ibv_query_port(ctx, static_cast<std::uint8_t>(port), &pa) != 0)
                continue;
            PortInfo p = query_port(ctx, name, sys, static_cast<std::uint8_t>(port), pa, addresses);
            p.mlx5 = mlx5;
            p.driver = driver;
            out.push_back(std::move(p));
        }
    }
    ibv_close_device(ctx);
}

} // namespace

std::vector<PortInfo> discover_ports()
{
    std::vector<PortInfo> out;
    try {
        // Without kernel support there is nothing to find; do not let
        // libibverbs look (it may warn on stderr).
        std::error_code ec;
        if (!fs::is_directory(sys_infiniband(), ec))
            return out;
        int n = 0;
        ibv_device** devices = ibv_get_device_list(&n);
        if (!devices)
            return out;
        const std::vector<IfAddress> addresses = interface_addresses();
        for (int i = 0; i < n; ++i) {
            try {
                discover_device(devices[i], addresses, out);
            } catch (...) { // allocation failure: skip the device, keep the rest
            }
        }
        ibv_free_device_list(devices);
    } catch (...) {
    }
    std::sort(out.begin(), out.end(), [](const PortInfo& a, const PortInfo& b) {
        return a.device != b.device ? a.device < b.device : a.port < b.port;
    });
    return out;
}

std::string ia_name(const PortInfo& p)
{
    return "fastdapl-" + p.device + "-" + std::to_string(p.port);
}

std::string ia_params(const PortInfo& p)
{
    return "verbs:" + p.device + ":" + std::to_string(p.port);
}

bool parse_ia_params(const std::string& params, std::string& device, std::uint8_t& port, int* family)
{
    static constexpr std::string_view prefix = "verbs:";
    std::string_view s = params;
    if (!s.starts_with(prefix))
        return false;
    int chosen = AF_UNSPEC;
    if (s.ends_with(":ipv4") || s.ends_with(":ipv6")) {
        chosen = s.ends_with("6") ? AF_INET6 : AF_INET;
        s.remove_suffix(5);
    }
    const std::string_view rest = s.substr(prefix.size());
    const std::size_t colon = rest.rfind(':');
    if (colon == std::string_view::npos || colon == 0)
        return false;
    const std::string_view dev = rest.substr(0, colon);
    const std::string_view num = rest.substr(colon + 1);
    // Device names are kernel names: no separators, blanks or control characters.
    if (dev.size() >= IBV_SYSFS_NAME_MAX ||
        std::any_of(dev.begin(), dev.end(), [](char c) { return c <= ' ' || c == 0x7f || c == ':' || c == '/'; }))
        return false;
    if (num.empty() || num.size() > 3)
        return false;
    unsigned value = 0;
    for (char c : num) {
        if (c < '0' || c > '9')
            return false;
        value = value * 10 + static_cast<unsigned>(c - '0');
    }
    if (value < 1 || value > 255)
        return false;
    device.assign(dev);
    port = static_cast<std::uint8_t>(value);
    if (family)
        *family = chosen;
    return true;
}

std::string address_text(const sockaddr_storage& a)
{
    char buf[INET6_ADDRSTRLEN] = "";
    if (a.ss_family == AF_INET) {
        if (!inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in&>(a).sin_addr, buf, sizeof buf))
            return {};
        return buf;
    }
    if (a.ss_family == AF_INET6) {
        const auto& in6 = reinterpret_cast<const sockaddr_in6&>(a);
        if (!inet_ntop(AF_INET6, &in6.sin6_addr, buf, sizeof buf))
            return {};
        std::string text = buf;
        if (in6.sin6_scope_id != 0 && IN6_IS_ADDR_LINKLOCAL(&in6.sin6_addr)) {
            char ifname[IF_NAMESIZE] = "";
            text += '%';
            text += if_indextoname(in6.sin6_scope_id, ifname) ? std::string(ifname) : std::to_string(in6.sin6_scope_id);
        }
        return text;
    }
    return {};
}

} // namespace fastdapl::verbs
