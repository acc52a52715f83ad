// dat_info: lists the DAT registry's providers and every attribute of each IA.
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#include "conf_parser.hpp"
#ifdef FASTDAPL_HAVE_VERBS
#include "discovery.hpp"
#endif

#include <dat2/udat.h>

#include <dat2/fastdapl.h> // after udat.h

#include <arpa/inet.h>
#include <dlfcn.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {

using fastdapl::registry::parse_conf;

struct Options {
    bool open_ias = true;
    bool show_conf = true;
    bool conf_lines = false;        // --conf: print dat.conf lines for this host's RDMA ports, nothing else
    std::vector<std::string> names; // empty: every provider
};

void usage(FILE* out)
{
    std::fprintf(out,
                 "usage: dat_info [options] [IA_NAME...]\n"
                 "       dat_info --conf\n"
                 "Lists the RDMA devices and ports of this host, the providers of the DAT\n"
                 "registry (dat.conf) and the libdat2.so.2 file in use and, for each IA,\n"
                 "opens it and prints the provider library and data path in use and every\n"
                 "IA and provider attribute.\n"
                 "\n"
                 "  -n, --no-open   list the registry only; do not open the IAs\n"
                 "  -q, --quiet     do not print the dat.conf entries, diagnostics and RDMA ports\n"
                 "      --conf      print a dat.conf line for each active RDMA port with an IP\n"
                 "                  address, and nothing else on stdout (append them to\n"
                 "                  /etc/dat.conf); skipped ports are said on stderr\n"
                 "  -h, --help      this text\n"
                 "\n"
                 "The registry reads $DAT_OVERRIDE if set, else /etc/dat.conf, else the\n"
                 "installation's etc/dat.conf. Set FASTDAPL_DEBUG=1 to see why an entry\n"
                 "is skipped or a provider fails to load. See dat_info(1).\n");
}

std::string error_text(DAT_RETURN rc)
{
    const char* major = "?";
    const char* minor = "?";
    dat_strerror(rc, &major, &minor);
    char hex[16];
    std::snprintf(hex, sizeof hex, "0x%08x", static_cast<unsigned>(rc));
    return std::string(major) + " " + minor + " (" + hex + ")";
}

std::string address_text(const DAT_SOCK_ADDR* sa)
{
    if (!sa)
        return "(none)";
    char buf[INET6_ADDRSTRLEN] = "?";
    if (sa->sa_family == AF_INET) {
        inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(sa)->sin_addr, buf, sizeof buf);
        return std::string("IPv4 ") + buf;
    }
    if (sa->sa_family == AF_INET6) {
        inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr, buf, sizeof buf);
        return std::string("IPv6 ") + buf;
    }
    return "family " + std::to_string(sa->sa_family);
}

const char* yes_no(DAT_BOOLEAN b) { return b ? "yes" : "no"; }

std::string conf_path_in_use()
{
    if (const char* p = std::getenv("DAT_OVERRIDE"); p && *p)
        return p;
    std::ifstream etc("/etc/dat.conf");
    if (etc || std::strcmp(FASTDAPL_SYSCONF_DAT_CONF, "/etc/dat.conf") == 0)
        return "/etc/dat.conf";
    return FASTDAPL_SYSCONF_DAT_CONF;
}

void print_conf()
{
    const std::string path = conf_path_in_use();
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        std::printf("dat.conf: %s (cannot be read)\n\n", path.c_str());
        return;
    }
    std::ostringstream ss;
    ss << in.rdbuf();
    const auto parsed = parse_conf(ss.str());
    std::printf("dat.conf: %s (%zu entries)\n", path.c_str(), parsed.entries.size());
    for (const auto& e : parsed.entries)
        std::printf("  line %-3u %-24s %c%u.%u %-13s %-10s %s %s.%u.%u \"%s\"%s\n", e.line, e.ia_name.c_str(),
                    e.api_kind, e.api_major, e.api_minor, e.thread_safe ? "threadsafe" : "nonthreadsafe",
                    e.is_default ? "default" : "nondefault", e.library.c_str(), e.provider_id.c_str(),
                    e.provider_major, e.provider_minor, e.ia_params.c_str(),
                    e.api_kind == 'u' && e.is_default ? "" : "  (not loaded: only u... default lines are)");
    for (const auto& d : parsed.diagnostics)
        std::printf("  %s:%u: %s\n", path.c_str(), d.line, d.message.c_str());
    std::printf("\n");
}

#ifdef FASTDAPL_HAVE_VERBS

// The provider library a --conf line names: the build's when this dat_info
// runs from that build tree (and the library is there), else the installed one.
std::string provider_library()
{
#ifdef FASTDAPL_BUILD_PROVIDER
    namespace fs = std::filesystem;
    std::error_code ec;
    const fs::path exe = fs::canonical("/proc/self/exe", ec);
    const fs::path root = ec ? fs::path() : fs::canonical(FASTDAPL_BUILD_ROOT, ec);
    if (!ec && !exe.empty() && !root.empty() && fs::exists(FASTDAPL_BUILD_PROVIDER, ec)) {
        const auto [r, e] = std::mismatch(root.begin(), root.end(), exe.begin(), exe.end());
        if (r == root.end())
            return FASTDAPL_BUILD_PROVIDER;
    }
#endif
    return FASTDAPL_INSTALLED_PROVIDER;
}

// A dat.conf field: as it is, or quoted (with \" and \\) when it has to be.
std::string conf_field(const std::string& text)
{
    if (!text.empty() && text.find_first_of(" \t\"\\#") == std::string::npos)
        return text;
    std::string out = "\"";
    for (char c : text) {
        if (c == '"' || c == '\\')
            out += '\\';
        out += c;
    }
    return out + "\"";
}

// dat.conf lines for the active ports that have an IP address (the
// provider's verbs IAs, through rdma_cm, need one), on stdout; why the
// others are left out, on stderr. A port with both families gets a second
// IA, "<name>-ipv6", whose address is the IPv6 one.
int print_conf_lines()
{
    const auto ports = fastdapl::verbs::discover_ports();
    const std::string library = conf_field(provider_library());
    int printed = 0;
    for (const auto& p : ports) {
        const std::string name = fastdapl::verbs::ia_name(p);
        if (!p.active) {
            std::fprintf(stderr, "# %s: skipped, port %s %u is not active\n", name.c_str(), p.device.c_str(), p.port);
            continue;
        }
        if (p.address.ss_family == AF_UNSPEC) {
            const std::string why = p.netdev.empty() ? "has no network interface, so no IP address"
                                                     : "has no IP address on " + p.netdev;
            std::fprintf(stderr, "# %s: skipped, port %s %u %s\n", name.c_str(), p.device.c_str(), p.port, why.c_str());
            continue;
        }
        std::printf("%s u2.0 nonthreadsafe default %s %s \"%s\" \"\"\n", name.c_str(), library.c_str(),
                    FASTDAPL_PROVIDER_VERSION, fastdapl::verbs::ia_params(p).c_str());
        ++printed;
        if (p.address.ss_family == AF_INET && p.address6.ss_family == AF_INET6) {
            std::printf("%s-ipv6 u2.0 nonthreadsafe default %s %s \"%s:ipv6\" \"\"\n", name.c_str(), library.c_str(),
                        FASTDAPL_PROVIDER_VERSION, fastdapl::verbs::ia_params(p).c_str());
            ++printed;
        }
    }
    if (ports.empty())
        std::fprintf(stderr, "dat_info: no RDMA device found\n");
    if (!printed)
        std::fprintf(stderr, "dat_info: no active RDMA port with an IP address\n");
    return std::fflush(stdout) == 0 ? 0 : 1;
}

void print_ports()
{
    const auto ports = fastdapl::verbs::discover_ports();
    std::printf("RDMA ports: %zu\n", ports.size());
    for (const auto& p : ports) {
        const std::string address = fastdapl::verbs::address_text(p.address);
        std::printf("  %s port %u  (IA %s, ia_params \"%s\")\n", p.device.c_str(), p.port,
                    fastdapl::verbs::ia_name(p).c_str(), fastdapl::verbs::ia_params(p).c_str());
        std::printf("    %-12s %s\n", "state", p.active ? "active" : "not active");
        std::printf("    %-12s %s\n", "link layer", p.link_layer.c_str());
        if (p.gid.empty())
            std::printf("    %-12s (none)\n", "GID");
        else
            std::printf("    %-12s %s (index %d)\n", "GID", p.gid.c_str(), p.gid_index);
        std::printf("    %-12s %s\n", "netdev", p.netdev.empty() ? "(unknown)" : p.netdev.c_str());
        std::printf("    %-12s %s\n", "address", address.empty() ? "(none)" : address.c_str());
        if (p.address.ss_family == AF_INET && p.address6.ss_family == AF_INET6)
            std::printf("    %-12s %s (IA \"%s-ipv6\")\n", "IPv6", fastdapl::verbs::address_text(p.address6).c_str(),
                        fastdapl::verbs::ia_name(p).c_str());
        std::printf("    %-12s %s\n", "driver", p.driver.empty() ? "(unknown)" : p.driver.c_str());
        // Whether an IA on it uses the direct path is the IA's FASTDAPL_DATA_PATH (below).
        std::printf("    %-12s %s\n", "data path",
                    p.mlx5 ? "mlx5: direct path with FASTDAPL_MLX5_DIRECT=1, else generic verbs" : "generic verbs");
    }
    std::printf("\n");
}

#endif // FASTDAPL_HAVE_VERBS

void print_named(const char* what, DAT_COUNT n, const DAT_NAMED_ATTR* attrs)
{
    std::printf("    %-40s %d\n", what, n);
    for (DAT_COUNT i = 0; attrs && i < n; ++i)
        std::printf("      %s = %s\n", attrs[i].name ? attrs[i].name : "(null)",
                    attrs[i].value ? attrs[i].value : "(null)");
}

struct BitName {
    DAT_COUNT bit;
    const char* name;
};

// A bit mask as hex and the names of its bits: "0x11 (available, outstanding)".
template <std::size_t N>
void print_bits(const char* what, DAT_COUNT value, const BitName (&names)[N])
{
    std::string text;
    auto rest = static_cast<unsigned>(value);
    for (const auto& b : names) {
        if (rest & static_cast<unsigned>(b.bit)) {
            text += text.empty() ? "" : ", ";
            text += b.name;
            rest &= ~static_cast<unsigned>(b.bit);
        }
    }
    if (rest) {
        char other[32];
        std::snprintf(other, sizeof other, "%sother 0x%x", text.empty() ? "" : ", ", rest);
        text += other;
    }
    std::printf("    %-40s 0x%x (%s)\n", what, static_cast<unsigned>(value), text.empty() ? "none" : text.c_str());
}

constexpr BitName kWatermarkBits[] = {{FASTDAPL_SRQ_WATERMARK_LOW, "low"},
                                      {FASTDAPL_EP_WATERMARK_SOFT_HIGH, "EP soft high"},
                                      {FASTDAPL_EP_WATERMARK_HARD_HIGH, "EP hard high"}};
constexpr BitName kSrqInfoBits[] = {{FASTDAPL_SRQ_INFO_AVAILABLE, "available"},
                                    {FASTDAPL_SRQ_INFO_OUTSTANDING, "outstanding"}};
constexpr BitName kEpRecvInfoBits[] = {{FASTDAPL_EP_RECV_INFO_NBUFS, "nbufs_allocated"},
                                       {FASTDAPL_EP_RECV_INFO_SPAN, "span"}};

#define FIELD_U(s, f) std::printf("    %-40s %llu\n", #f, static_cast<unsigned long long>((s).f))
#define FIELD_I(s, f) std::printf("    %-40s %lld\n", #f, static_cast<long long>((s).f))
#define FIELD_B(s, f) std::printf("    %-40s %s\n", #f, yes_no((s).f))
#define FIELD_X(s, f) std::printf("    %-40s 0x%llx\n", #f, static_cast<unsigned long long>((s).f))

void print_ia_attr(const DAT_IA_ATTR& a)
{
    std::printf("  IA attributes\n");
    std::printf("    %-40s %s\n", "adapter_name", a.adapter_name);
    std::printf("    %-40s %s\n", "vendor_name", a.vendor_name);
    std::printf("    %-40s %u.%u\n", "hardware_version", a.hardware_version_major, a.hardware_version_minor);
    std::printf("    %-40s %u.%u\n", "firmware_version", a.firmware_version_major, a.firmware_version_minor);
    std::printf("    %-40s %s\n", "ia_address_ptr", address_text(a.ia_address_ptr).c_str());
    FIELD_I(a, max_eps);
    FIELD_I(a, max_dto_per_ep);
    FIELD_I(a, max_rdma_read_per_ep_in);
    FIELD_I(a, max_rdma_read_per_ep_out);
    FIELD_I(a, max_evds);
    FIELD_I(a, max_evd_qlen);
    FIELD_I(a, max_iov_segments_per_dto);
    FIELD_I(a, max_lmrs);
    FIELD_U(a, max_lmr_block_size);
    FIELD_X(a, max_lmr_virtual_address);
    FIELD_I(a, max_pzs);
    FIELD_U(a, max_message_size);
    FIELD_U(a, max_rdma_size);
    FIELD_I(a, max_rmrs);
    FIELD_X(a, max_rmr_target_address);
    FIELD_I(a, max_srqs);
    FIELD_I(a, max_ep_per_srq);
    FIELD_I(a, max_recv_per_srq);
    FIELD_I(a, max_iov_segments_per_rdma_read);
    FIELD_I(a, max_iov_segments_per_rdma_write);
    FIELD_I(a, max_rdma_read_in);
    FIELD_I(a, max_rdma_read_out);
    FIELD_B(a, max_rdma_read_per_ep_in_guaranteed);
    FIELD_B(a, max_rdma_read_per_ep_out_guaranteed);
    FIELD_B(a, zb_supported);
    FIELD_I(a, extension_supported);
    FIELD_I(a, extension_version);
    print_named("num_transport_attr", a.num_transport_attr, a.transport_attr);
    print_named("num_vendor_attr", a.num_vendor_attr, a.vendor_attr);
}

void print_provider_attr(const DAT_PROVIDER_ATTR& p)
{
    std::printf("  Provider attributes\n");
    std::printf("    %-40s %s\n", "provider_name", p.provider_name);
    std::printf("    %-40s %u.%u\n", "provider_version", p.provider_version_major, p.provider_version_minor);
    std::printf("    %-40s %u.%u\n", "dapl_version", p.dapl_version_major, p.dapl_version_minor);
    FIELD_X(p, lmr_mem_types_supported);
    FIELD_I(p, iov_ownership_on_return);
    FIELD_X(p, dat_qos_supported);
    FIELD_X(p, completion_flags_supported);
    FIELD_B(p, is_thread_safe);
    FIELD_I(p, max_private_data_size);
    FIELD_B(p, supports_multipath);
    FIELD_I(p, ep_creator);
    FIELD_I(p, pz_support);
    FIELD_U(p, optimal_buffer_alignment);
    std::printf("    %-40s", "evd_stream_merging_supported");
    for (int i = 0; i < 6; ++i) {
        std::printf(" ");
        for (int j = 0; j < 6; ++j)
            std::printf("%c", p.evd_stream_merging_supported[i][j] ? '1' : '0');
    }
    std::printf("\n");
    FIELD_B(p, srq_supported);
    print_bits("srq_watermarks_supported", p.srq_watermarks_supported, kWatermarkBits);
    FIELD_B(p, srq_ep_pz_difference_supported);
    print_bits("srq_info_supported", p.srq_info_supported, kSrqInfoBits);
    print_bits("ep_recv_info_supported", p.ep_recv_info_supported, kEpRecvInfoBits);
    FIELD_B(p, lmr_sync_req);
    FIELD_B(p, dto_async_return_guaranteed);
    FIELD_B(p, rdma_write_for_rdma_read_req);
    FIELD_B(p, rdma_read_lmr_rmr_context_exposure);
    FIELD_I(p, rmr_scope_supported);
    FIELD_B(p, is_signal_safe);
    FIELD_B(p, ha_supported);
    FIELD_I(p, ha_loadbalancing);
    print_named("num_provider_specific_attr", p.num_provider_specific_attr, p.provider_specific_attr);
}

// The value of a provider-specific attribute, or nullptr.
const char* named_value(const DAT_PROVIDER_ATTR& p, const char* name)
{
    for (DAT_COUNT i = 0; p.provider_specific_attr && i < p.num_provider_specific_attr; ++i) {
        const DAT_NAMED_ATTR& a = p.provider_specific_attr[i];
        if (a.name && a.value && std::strcmp(a.name, name) == 0)
            return a.value;
    }
    return nullptr;
}

// Which library and data path the IA runs on, as FASTDAPL_DEBUG=1 says it
// at dat_ia_open (fastdapl's FASTDAPL_LIBRARY and FASTDAPL_DATA_PATH).
void print_in_use(const DAT_PROVIDER_ATTR& p)
{
    const char* library = named_value(p, "FASTDAPL_LIBRARY");
    const char* data_path = named_value(p, "FASTDAPL_DATA_PATH");
    std::printf("  In use\n");
    std::printf("    %-40s %s\n", "library", library ? library : "(not said by this provider)");
    std::printf("    %-40s %s\n", "data path", data_path ? data_path : "(not said by this provider)");
}

// The registry library this program runs on (ours or the reference's: both
// are libdat2.so.2, the library path and ld.so.conf decide).
std::string registry_library()
{
    Dl_info info{};
    if (dladdr(reinterpret_cast<const void*>(&dat_registry_list_providers), &info) == 0 || !info.dli_fname)
        return "(unknown)";
    return info.dli_fname;
}

// What fastdapl adds on the async EVD (<dat2/fastdapl.h>). Fixed text: printed
// in full for the first IA that has it, as a pointer back for the others.
void print_added_events(const DAT_PROVIDER_ATTR& p, const char* ia_name)
{
    static std::string first_ia;
    if (!p.srq_supported || std::strcmp(p.provider_name, "fastdapl") != 0)
        return;
    if (!first_ia.empty()) {
        std::printf("  Events this provider adds: as under IA %s\n", first_ia.c_str());
        return;
    }
    first_ia = ia_name;
    std::printf("  Events this provider adds (on the IA's async EVD; see <dat2/fastdapl.h>)\n");
    std::printf("    %-40s 0x%05x, one per arming of a watermark\n", "FASTDAPL_ASYNC_WATERMARK_EVENT",
                static_cast<unsigned>(FASTDAPL_ASYNC_WATERMARK_EVENT));
    std::printf("    %-40s %s\n", "  dat_handle = the SRQ", "reason DAT_SRQ_LOW_WATERMARK_EVENT (dat_srq_set_lw)");
    std::printf("    %-40s %s\n", "  dat_handle = the EP",
                "reason DAT_SRQ_SOFT_HIGH_WATERMARK_EVENT (dat_ep_set_watermark)");
    std::printf("    %-40s %s\n", "DAT_ASYNC_ERROR_EP_BROKEN",
                "also when an SRQ endpoint's connection ends: it takes no more buffers");
}

// Opens one IA and prints its attributes; returns false if it cannot be opened.
bool show_ia(const DAT_PROVIDER_INFO& info)
{
    DAT_EVD_HANDLE async_evd = DAT_HANDLE_NULL;
    DAT_IA_HANDLE ia = DAT_HANDLE_NULL;
    DAT_RETURN rc = dat_ia_openv(const_cast<char*>(info.ia_name), 8, &async_evd, &ia, info.dapl_version_major,
                                 info.dapl_version_minor, info.is_thread_safe);
    if (rc != DAT_SUCCESS) {
        std::printf("  cannot open: %s\n", error_text(rc).c_str());
        return false;
    }
    DAT_IA_ATTR ia_attr{};
    DAT_PROVIDER_ATTR provider_attr{}; // aggregate: it has a const member
    rc = dat_ia_query(ia, &async_evd, DAT_IA_FIELD_ALL, &ia_attr, DAT_PROVIDER_FIELD_ALL, &provider_attr);
    bool ok = rc == DAT_SUCCESS;
    if (ok) {
        print_in_use(provider_attr);
        print_ia_attr(ia_attr);
        print_provider_attr(provider_attr);
        print_added_events(provider_attr, info.ia_name);
    } else {
        std::printf("  dat_ia_query failed: %s\n", error_text(rc).c_str());
    }
    rc = dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG);
    if (rc != DAT_SUCCESS) {
        std::printf("  dat_ia_close failed: %s\n", error_text(rc).c_str());
        ok = false;
    }
    return ok;
}

} // namespace

int main(int argc, char** argv)
{
    Options opt;
    for (int i = 1; i < argc; ++i) {
        const std::string arg = argv[i];
        if (arg == "-h" || arg == "--help") {
            usage(stdout);
            return 0;
        }
        if (arg == "-n" || arg == "--no-open") {
            opt.open_ias = false;
        } else if (arg == "-q" || arg == "--quiet") {
            opt.show_conf = false;
        } else if (arg == "--conf") {
            opt.conf_lines = true;
        } else if (!arg.empty() && arg[0] == '-') {
            std::fprintf(stderr, "dat_info: unknown option '%s'\n", arg.c_str());
            usage(stderr);
            return 2;
        } else {
            opt.names.push_back(arg);
        }
    }

    if (opt.conf_lines) {
        if (!opt.names.empty()) {
            std::fprintf(stderr, "dat_info: --conf takes no IA names\n");
            return 2;
        }
#ifdef FASTDAPL_HAVE_VERBS
        return print_conf_lines();
#else
        std::fprintf(stderr, "dat_info: built without rdma-core (libibverbs, librdmacm): no RDMA ports to list\n");
        return 1;
#endif
    }

    if (opt.show_conf)
        print_conf();
#ifdef FASTDAPL_HAVE_VERBS
    if (opt.show_conf)
        print_ports();
#endif

    DAT_COUNT total = 0;
    DAT_RETURN rc = dat_registry_list_providers(0, &total, nullptr);
    if (DAT_GET_TYPE(rc) == DAT_INTERNAL_ERROR) {
        std::printf("no static registry: %s\n", error_text(rc).c_str());
        return 1;
    }
    std::vector<DAT_PROVIDER_INFO> infos(static_cast<std::size_t>(total));
    std::vector<DAT_PROVIDER_INFO*> pointers;
    for (auto& info : infos)
        pointers.push_back(&info);
    DAT_COUNT returned = 0;
    rc = dat_registry_list_providers(total, &returned, pointers.data());
    if (rc != DAT_SUCCESS) {
        std::printf("dat_registry_list_providers failed: %s\n", error_text(rc).c_str());
        return 1;
    }
    std::printf("Registry: %d provider%s (registry library %s)\n", returned, returned == 1 ? "" : "s",
                registry_library().c_str());
    int failures = 0, shown = 0;
    for (DAT_COUNT i = 0; i < returned; ++i) {
        const DAT_PROVIDER_INFO& info = infos[static_cast<std::size_t>(i)];
        if (!opt.names.empty()) {
            bool wanted = false;
            for (const auto& n : opt.names)
                wanted = wanted || n == info.ia_name;
            if (!wanted)
                continue;
        }
        ++shown;
        std::printf("\nIA %s  (uDAPL %u.%u, %s)\n", info.ia_name, info.dapl_version_major, info.dapl_version_minor,
                    info.is_thread_safe ? "threadsafe" : "nonthreadsafe");
        if (opt.open_ias && !show_ia(info))
            ++failures;
    }
    if (!opt.names.empty() && shown < static_cast<int>(opt.names.size())) {
        std::printf("\nsome named IAs are not in the registry\n");
        return 1;
    }
    return failures ? 1 : 0;
}
