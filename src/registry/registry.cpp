// libdat2's control plane: static registry (dat.conf), dynamic registry
// (providers that registered), loading on demand, and the IA handle table.
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#include "registry.hpp"

#include "conf_parser.hpp"

#include <dat2/dat_registry.h>

#include <dlfcn.h>
#include <sys/stat.h>

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#ifndef FASTDAPL_SYSCONF_DAT_CONF
#define FASTDAPL_SYSCONF_DAT_CONF "/etc/dat.conf"
#endif

// The reference registry exports this for providers; so do we, with the
// same signature, so that its providers run on our registry unchanged.
extern "C" FASTDAPL_EXPORT DAT_RETURN dats_get_ia_handle(DAT_IA_HANDLE handle, DAT_IA_HANDLE* ia_handle_p);

namespace fastdapl::registry {

std::atomic<const DAT_PROVIDER*> g_known_providers[kMaxProviders];
std::atomic<int> g_known_provider_count{0};
// Its own cache line: written when calls alternate between providers, read
// on every call.
alignas(64) std::atomic<const std::atomic<const DAT_PROVIDER*>*> g_provider_hint{&g_known_providers[0]};

__attribute__((noinline)) const DAT_PROVIDER* provider_of_scan(const DAT_PROVIDER* p)
{
    const std::atomic<const DAT_PROVIDER*>* slot = slot_of(p);
    if (!slot)
        return nullptr;
    g_provider_hint.store(slot, std::memory_order_relaxed);
    return p;
}

namespace {

// One IA name/version/thread-safety a consumer can open: a dat.conf line,
// or a provider that registered itself without one (linked in directly).
struct Entry {
    DAT_PROVIDER_INFO info{};
    bool from_conf = false;
    std::string library;
    std::string ia_params;
    unsigned conf_line = 0;
    void* dl_handle = nullptr;
    bool initialised = false;
    const DAT_PROVIDER* provider = nullptr; // set by dat_registry_add_provider
    int open_count = 0;
    // The entry whose library was being initialised when this provider
    // registered: its registration goes when that library is unloaded.
    const Entry* registered_during = nullptr;
};

struct IaSlot {
    DAT_IA_HANDLE real = nullptr;
    Entry* entry = nullptr;
    std::uint16_t generation = 0;
    bool closing = false;
};

struct State {
    std::recursive_mutex mutex; // dictionary; recursive: init calls add_provider
    bool conf_loaded = false;
    bool conf_found = false;
    std::string conf_path;
    std::vector<std::unique_ptr<Entry>> entries;
    const Entry* initialising = nullptr; // whose dat_provider_init is running

    std::mutex table_mutex; // IA handle table; never held across provider calls
    std::vector<IaSlot> slots{1}; // slot 0 unused: its handles would look NULL-ish
};

State& state()
{
    static State* s = new State; // leaked on purpose: usable from atexit/destructors
    return *s;
}

bool same_key(const DAT_PROVIDER_INFO& a, const DAT_PROVIDER_INFO& b)
{
    return a.dapl_version_major == b.dapl_version_major && a.dapl_version_minor == b.dapl_version_minor &&
           a.is_thread_safe == b.is_thread_safe && std::strncmp(a.ia_name, b.ia_name, DAT_NAME_MAX_LENGTH) == 0;
}

bool read_file(const std::string& path, std::string& text)
{
    struct stat st;
    if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode))
        return false; // a directory reads as an empty stream: not a dat.conf
    std::ifstream in(path, std::ios::binary);
    if (!in)
        return false;
    std::ostringstream ss;
    ss << in.rdbuf();
    text = ss.str();
    return !in.bad();
}

void load_conf_locked(State& s)
{
    if (s.conf_loaded)
        return;
    s.conf_loaded = true;
    std::string text;
    if (const char* override_path = std::getenv("DAT_OVERRIDE"); override_path && *override_path) {
        // As in the reference: an override that cannot be read loads nothing.
        s.conf_path = override_path;
        s.conf_found = read_file(s.conf_path, text);
    } else {
        s.conf_path = "/etc/dat.conf";
        s.conf_found = read_file(s.conf_path, text);
        if (!s.conf_found && std::strcmp(FASTDAPL_SYSCONF_DAT_CONF, "/etc/dat.conf") != 0) {
            s.conf_path = FASTDAPL_SYSCONF_DAT_CONF;
            s.conf_found = read_file(s.conf_path, text);
        }
    }
    if (!s.conf_found) {
        debug_print("cannot read %s: no static registry\n", s.conf_path.c_str());
        return;
    }
    debug_print("reading %s\n", s.conf_path.c_str());
    ConfParseResult parsed = parse_conf(text);
    for (const auto& d : parsed.diagnostics)
        debug_print("%s:%u: %s\n", s.conf_path.c_str(), d.line, d.message.c_str());
    for (auto& e : parsed.entries) {
        if (e.api_kind != 'u' || !e.is_default) {
            debug_print("%s:%u: %s is %s, not loaded\n", s.conf_path.c_str(), e.line, e.ia_name.c_str(),
                        e.api_kind != 'u' ? "a kDAPL entry" : "nondefault");
            continue;
        }
        auto entry = std::make_unique<Entry>();
        std::memcpy(entry->info.ia_name, e.ia_name.c_str(), e.ia_name.size() + 1);
        entry->info.dapl_version_major = e.api_major;
        entry->info.dapl_version_minor = e.api_minor;
        entry->info.is_thread_safe = e.thread_safe ? DAT_TRUE : DAT_FALSE;
        entry->from_conf = true;
        entry->library = e.library;
        entry->ia_params = e.ia_params;
        entry->conf_line = e.line;
        bool duplicate = false;
        for (const auto& existing : s.entries)
            duplicate = duplicate || same_key(existing->info, entry->info);
        if (duplicate) {
            debug_print("%s:%u: a second default entry for %s u%u.%u, skipped\n", s.conf_path.c_str(), e.line,
                        e.ia_name.c_str(), e.api_major, e.api_minor);
            continue;
        }
        s.entries.push_back(std::move(entry));
    }
}

State& loaded_state()
{
    State& s = state();
    std::lock_guard lock(s.mutex);
    load_conf_locked(s);
    return s;
}

// The spec's matching rule: exact name, major and thread safety; the exact
// minor if present, else the smallest newer minor. The subtype says which
// part failed.
Entry* find_entry_locked(State& s, const char* name, DAT_UINT32 major, DAT_UINT32 minor, DAT_BOOLEAN thread_safe,
                         DAT_RETURN& why)
{
    bool name_seen = false, major_seen = false, ts_seen = false;
    Entry* best = nullptr;
    for (auto& e : s.entries) {
        if (std::strncmp(e->info.ia_name, name, DAT_NAME_MAX_LENGTH) != 0)
            continue;
        name_seen = true;
        if (e->info.dapl_version_major != major)
            continue;
        major_seen = true;
        if ((e->info.is_thread_safe != DAT_FALSE) != (thread_safe != DAT_FALSE))
            continue;
        ts_seen = true;
        if (e->info.dapl_version_minor < minor)
            continue;
        if (!best || e->info.dapl_version_minor < best->info.dapl_version_minor)
            best = e.get();
    }
    if (!best)
        why = dat_error(DAT_PROVIDER_NOT_FOUND, !name_seen    ? DAT_NAME_NOT_REGISTERED
                                                : !major_seen ? DAT_MAJOR_NOT_FOUND
                                                : !ts_seen    ? DAT_THREAD_SAFETY_NOT_FOUND
                                                              : DAT_MINOR_NOT_FOUND);
    return best;
}

void add_known_provider(const DAT_PROVIDER* p)
{
    const int n = g_known_provider_count.load(std::memory_order_acquire);
    for (int i = 0; i < n; ++i) {
        const DAT_PROVIDER* cur = g_known_providers[i].load(std::memory_order_relaxed);
        if (cur == p)
            return;
    }
    for (int i = 0; i < n; ++i) {
        const DAT_PROVIDER* expected = nullptr;
        if (g_known_providers[i].compare_exchange_strong(expected, p))
            return;
    }
    if (n < kMaxProviders) {
        g_known_providers[n].store(p, std::memory_order_relaxed);
        g_known_provider_count.store(n + 1, std::memory_order_release);
    }
}

void drop_known_provider_locked(State& s, const DAT_PROVIDER* p)
{
    for (const auto& e : s.entries)
        if (e->provider == p)
            return; // still registered under another name
    const int n = g_known_provider_count.load(std::memory_order_acquire);
    for (int i = 0; i < n; ++i) {
        const DAT_PROVIDER* expected = p;
        g_known_providers[i].compare_exchange_strong(expected, nullptr);
    }
}

// Forgets what `loader`'s library registered under other names during its
// init: that code is about to be unloaded.
void drop_registrations_of_locked(State& s, const Entry& loader)
{
    for (auto it = s.entries.begin(); it != s.entries.end();) {
        Entry& e = **it;
        if (&e == &loader || e.registered_during != &loader) {
            ++it;
            continue;
        }
        const DAT_PROVIDER* p = e.provider;
        e.provider = nullptr;
        e.registered_during = nullptr;
        if (p)
            drop_known_provider_locked(s, p);
        if (!e.from_conf && e.open_count == 0)
            it = s.entries.erase(it);
        else
            ++it;
    }
}

// Loads the library of a dat.conf entry and runs its dat_provider_init,
// which must register the provider. On failure nothing stays loaded.
DAT_RETURN load_provider_locked(State& s, Entry& e)
{
    if (e.provider)
        return DAT_SUCCESS;
    if (!e.from_conf)
        return dat_error(DAT_PROVIDER_NOT_FOUND, DAT_NAME_NOT_REGISTERED);
    if (!e.dl_handle) {
        e.dl_handle = dlopen(e.library.c_str(), RTLD_NOW | RTLD_GLOBAL);
        if (!e.dl_handle) {
            const char* why = dlerror();
            debug_print("%s:%u: cannot load %s: %s\n", s.conf_path.c_str(), e.conf_line, e.library.c_str(),
                        why ? why : "unknown error");
            return dat_error(DAT_PROVIDER_NOT_FOUND, DAT_NAME_NOT_REGISTERED);
        }
    }
    auto init = reinterpret_cast<DAT_PROVIDER_INIT_FUNC>(dlsym(e.dl_handle, DAT_PROVIDER_INIT_FUNC_STR));
    if (!init) {
        debug_print("%s: no %s symbol, not a DAT provider\n", e.library.c_str(), DAT_PROVIDER_INIT_FUNC_STR);
        dlclose(e.dl_handle);
        e.dl_handle = nullptr;
        return dat_error(DAT_PROVIDER_NOT_FOUND, DAT_NAME_NOT_REGISTERED);
    }
    debug_print("initialising %s from %s\n", e.info.ia_name, e.library.c_str());
    s.initialising = &e;
    init(&e.info, e.ia_params.c_str());
    s.initialising = nullptr;
    e.initialised = true;
    if (!e.provider) {
        debug_print("%s: dat_provider_init did not register %s\n", e.library.c_str(), e.info.ia_name);
        e.initialised = false;
        drop_registrations_of_locked(s, e);
        dlclose(e.dl_handle);
        e.dl_handle = nullptr;
        return dat_error(DAT_PROVIDER_NOT_FOUND, DAT_NAME_NOT_REGISTERED);
    }
    return DAT_SUCCESS;
}

// Runs dat_provider_fini and unloads, once the last IA of an entry closed.
void unload_provider_locked(State& s, Entry& e)
{
    if (!e.from_conf || !e.dl_handle)
        return; // linked-in providers stay registered
    if (e.initialised) {
        auto fini = reinterpret_cast<DAT_PROVIDER_FINI_FUNC>(dlsym(e.dl_handle, DAT_PROVIDER_FINI_FUNC_STR));
        if (fini)
            fini(&e.info);
        e.initialised = false;
    }
    if (e.provider) { // the provider did not remove itself: the registry does
        const DAT_PROVIDER* p = e.provider;
        e.provider = nullptr;
        drop_known_provider_locked(s, p);
    }
    drop_registrations_of_locked(s, e);
    dlclose(e.dl_handle);
    e.dl_handle = nullptr;
}

DAT_IA_HANDLE encode_ia(std::size_t slot, std::uint16_t generation)
{
    return reinterpret_cast<DAT_IA_HANDLE>((static_cast<std::uintptr_t>(slot) << 16) |
                                           (static_cast<std::uintptr_t>(generation) << 1) | 1u);
}

// Index of the slot an IA handle names, or 0.
std::size_t find_slot_locked(State& s, DAT_IA_HANDLE h)
{
    const auto v = reinterpret_cast<std::uintptr_t>(h);
    if (h == nullptr)
        return 0;
    if (is_tagged_ia(h)) {
        const std::size_t slot = v >> 16;
        const auto generation = static_cast<std::uint16_t>((v >> 1) & 0x7fffu);
        if (slot > 0 && slot < s.slots.size() && s.slots[slot].real && s.slots[slot].generation == generation)
            return slot;
        return 0;
    }
    for (std::size_t i = 1; i < s.slots.size(); ++i)
        if (s.slots[i].real == h)
            return i;
    return 0;
}

DAT_IA_HANDLE allocate_ia_slot(State& s, DAT_IA_HANDLE real, Entry* entry)
{
    std::lock_guard lock(s.table_mutex);
    std::size_t slot = 0;
    for (std::size_t i = 1; i < s.slots.size() && slot == 0; ++i)
        if (!s.slots[i].real)
            slot = i;
    if (slot == 0) {
        s.slots.emplace_back();
        slot = s.slots.size() - 1;
    }
    IaSlot& sl = s.slots[slot];
    sl.generation = static_cast<std::uint16_t>(sl.generation % 0x7fffu + 1); // 1..32767, never 0
    sl.real = real;
    sl.entry = entry;
    sl.closing = false;
    return encode_ia(slot, sl.generation);
}

// Closes the registry IA handle `ia` through `close(provider, real
// handle)`: the slot is marked closing (a concurrent close sees an invalid
// handle), and freed, with the provider unloaded at its last IA, only if
// the provider's close succeeded.
template <class Close>
DAT_RETURN close_ia_slot(DAT_HANDLE ia, Close close)
{
    State& s = state();
    DAT_IA_HANDLE real = nullptr;
    Entry* e = nullptr;
    std::size_t slot = 0;
    {
        std::lock_guard lock(s.table_mutex);
        slot = find_slot_locked(s, ia);
        if (slot == 0 || s.slots[slot].closing)
            return dat_error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA);
        s.slots[slot].closing = true;
        real = s.slots[slot].real;
        e = s.slots[slot].entry;
    }
    const DAT_PROVIDER* p = e->provider;
    const DAT_RETURN rc = p ? close(*p, real) : dat_error(DAT_INTERNAL_ERROR);
    if (rc != DAT_SUCCESS) {
        std::lock_guard lock(s.table_mutex);
        s.slots[slot].closing = false;
        return rc;
    }
    std::lock_guard lock(s.mutex);
    {
        std::lock_guard table_lock(s.table_mutex);
        s.slots[slot].real = nullptr;
        s.slots[slot].entry = nullptr;
        s.slots[slot].closing = false;
    }
    if (--e->open_count == 0)
        unload_provider_locked(s, *e);
    return DAT_SUCCESS;
}

} // namespace

bool debug_enabled()
{
    static const bool enabled = [] {
        for (const char* var : {"FASTDAPL_DEBUG", "DAT_DBG_TYPE"}) {
            const char* v = std::getenv(var);
            if (v && *v && std::strcmp(v, "0") != 0)
                return true;
        }
        return false;
    }();
    return enabled;
}

void debug_print(const char* fmt, ...)
{
    if (!debug_enabled())
        return;
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    std::fprintf(stderr, "libdat2: %s", buf);
}

DAT_IA_HANDLE lookup_ia(DAT_IA_HANDLE consumer_handle)
{
    State& s = state();
    std::lock_guard lock(s.table_mutex);
    const std::size_t slot = find_slot_locked(s, consumer_handle);
    return slot ? s.slots[slot].real : nullptr;
}

} // namespace fastdapl::registry

using namespace fastdapl::registry;

extern "C" {

FASTDAPL_EXPORT DAT_RETURN dats_get_ia_handle(DAT_IA_HANDLE handle, DAT_IA_HANDLE* ia_handle_p)
{
    DAT_IA_HANDLE real = lookup_ia(handle);
    if (!real)
        return dat_error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA);
    if (ia_handle_p)
        *ia_handle_p = real;
    return DAT_SUCCESS;
}

FASTDAPL_EXPORT DAT_RETURN dat_registry_add_provider(const DAT_PROVIDER* provider, const DAT_PROVIDER_INFO* info)
{
    if (!provider || !info || !provider->ia_open_func ||
        std::memchr(info->ia_name, '\0', DAT_NAME_MAX_LENGTH) == nullptr || info->ia_name[0] == '\0')
        return dat_error(DAT_INVALID_PARAMETER, !provider ? DAT_INVALID_ARG1 : DAT_INVALID_ARG2);
    State& s = state();
    std::lock_guard lock(s.mutex);
    load_conf_locked(s);
    Entry* target = nullptr;
    for (auto& e : s.entries) {
        if (!same_key(e->info, *info))
            continue;
        if (e->provider)
            return dat_error(DAT_PROVIDER_ALREADY_REGISTERED);
        target = e.get();
    }
    if (!target) {
        if (s.entries.size() >= 4096)
            return dat_error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
        auto e = std::make_unique<Entry>();
        e->info = *info;
        target = e.get();
        s.entries.push_back(std::move(e));
    }
    if (g_known_provider_count.load() >= kMaxProviders && !is_known_provider(provider)) {
        bool free_slot = false;
        for (auto& kp : g_known_providers)
            free_slot = free_slot || kp.load() == nullptr;
        if (!free_slot)
            return dat_error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
    }
    target->provider = provider;
    target->registered_during = s.initialising;
    add_known_provider(provider);
    debug_print("provider registered: %s u%u.%u %s\n", info->ia_name, info->dapl_version_major,
                info->dapl_version_minor, info->is_thread_safe ? "threadsafe" : "nonthreadsafe");
    return DAT_SUCCESS;
}

FASTDAPL_EXPORT DAT_RETURN dat_registry_remove_provider(const DAT_PROVIDER* provider, const DAT_PROVIDER_INFO* info)
{
    if (!provider || !info || std::memchr(info->ia_name, '\0', DAT_NAME_MAX_LENGTH) == nullptr)
        return dat_error(DAT_INVALID_PARAMETER, !provider ? DAT_INVALID_ARG1 : DAT_INVALID_ARG2);
    State& s = state();
    std::lock_guard lock(s.mutex);
    for (auto it = s.entries.begin(); it != s.entries.end(); ++it) {
        Entry& e = **it;
        if (!same_key(e.info, *info) || e.provider != provider)
            continue;
        if (e.open_count > 0)
            return dat_error(DAT_PROVIDER_IN_USE);
        e.provider = nullptr;
        drop_known_provider_locked(s, provider);
        if (!e.from_conf)
            s.entries.erase(it);
        debug_print("provider removed: %s\n", info->ia_name);
        return DAT_SUCCESS;
    }
    return dat_error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG1);
}

FASTDAPL_EXPORT DAT_RETURN dat_registry_list_providers(DAT_COUNT max_to_return, DAT_COUNT* entries_returned,
                                                       DAT_PROVIDER_INFO* (dat_provider_list[]))
{
    if (!entries_returned)
        return dat_error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    State& s = loaded_state();
    std::lock_guard lock(s.mutex);
    const auto total = static_cast<DAT_COUNT>(s.entries.size());
    *entries_returned = total;
    if (!s.conf_found && total == 0)
        return dat_error(DAT_INTERNAL_ERROR);
    if (max_to_return < 0)
        return dat_error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG1);
    if (!dat_provider_list || max_to_return < total)
        return dat_error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    for (DAT_COUNT i = 0; i < total; ++i)
        if (!dat_provider_list[i])
            return dat_error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    for (DAT_COUNT i = 0; i < total; ++i)
        *dat_provider_list[i] = s.entries[static_cast<std::size_t>(i)]->info;
    return DAT_SUCCESS;
}

FASTDAPL_EXPORT DAT_RETURN dat_registry_providers_related(const DAT_NAME_PTR ia1_name, const DAT_NAME_PTR ia2_name,
                                                          DAT_HA_RELATIONSHIP* relationship)
{
    if (!ia1_name || !ia2_name || !relationship)
        return dat_error(DAT_INVALID_PARAMETER, !ia1_name ? DAT_INVALID_ARG1 : !ia2_name ? DAT_INVALID_ARG2
                                                                                           : DAT_INVALID_ARG3);
    State& s = loaded_state();
    bool known1 = false, known2 = false;
    {
        std::lock_guard lock(s.mutex);
        for (const auto& e : s.entries) {
            known1 = known1 || std::strncmp(e->info.ia_name, ia1_name, DAT_NAME_MAX_LENGTH) == 0;
            known2 = known2 || std::strncmp(e->info.ia_name, ia2_name, DAT_NAME_MAX_LENGTH) == 0;
        }
        if (!s.conf_found && s.entries.empty())
            return dat_error(DAT_INTERNAL_ERROR);
    }
    if (!known1 || !known2)
        return dat_error(DAT_INVALID_PARAMETER, !known1 ? DAT_INVALID_ARG1 : DAT_INVALID_ARG2);
    if (std::strncmp(ia1_name, ia2_name, DAT_NAME_MAX_LENGTH) == 0) {
        *relationship = DAT_HA_TRUE; // one IA shares everything with itself
        return DAT_SUCCESS;
    }
    // Ask each side's provider through one of its open IAs. Without an open
    // IA (or the provider's ia_ha_related) the registry cannot know.
    auto ask = [&](const char* name, const char* other, int& answer) {
        DAT_IA_HANDLE real = nullptr;
        const DAT_PROVIDER* p = nullptr;
        {
            std::lock_guard lock(s.table_mutex);
            for (std::size_t i = 1; i < s.slots.size() && !real; ++i) {
                const IaSlot& sl = s.slots[i];
                if (sl.real && !sl.closing && std::strncmp(sl.entry->info.ia_name, name, DAT_NAME_MAX_LENGTH) == 0) {
                    real = sl.real;
                    p = sl.entry->provider;
                }
            }
        }
        answer = -1;
        DAT_BOOLEAN b = DAT_FALSE;
        if (real && p && p->ia_ha_related_func && p->ia_ha_related_func(real, const_cast<char*>(other), &b) == 0)
            answer = b ? 1 : 0;
    };
    int a1 = -1, a2 = -1;
    ask(ia1_name, ia2_name, a1);
    ask(ia2_name, ia1_name, a2);
    if (a1 < 0 || a2 < 0)
        *relationship = DAT_HA_UNKNOWN;
    else if (a1 != a2)
        *relationship = DAT_HA_CONFLICTING;
    else
        *relationship = a1 ? DAT_HA_TRUE : DAT_HA_FALSE;
    return DAT_SUCCESS;
}

FASTDAPL_EXPORT DAT_RETURN dat_ia_openv(const DAT_NAME_PTR name, DAT_COUNT async_event_qlen,
                                        DAT_EVD_HANDLE* async_event_handle, DAT_IA_HANDLE* ia_handle,
                                        DAT_UINT32 dapl_major, DAT_UINT32 dapl_minor, DAT_BOOLEAN thread_safety)
{
    if (!name)
        return dat_error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG1);
    if (!async_event_handle)
        return dat_error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    if (!ia_handle)
        return dat_error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG4);
    if (std::memchr(name, '\0', DAT_NAME_MAX_LENGTH) == nullptr)
        return dat_error(DAT_PROVIDER_NOT_FOUND, DAT_NAME_NOT_REGISTERED);

    State& s = state();
    std::lock_guard lock(s.mutex);
    load_conf_locked(s);
    DAT_RETURN why = DAT_SUCCESS;
    Entry* e = find_entry_locked(s, name, dapl_major, dapl_minor, thread_safety, why);
    if (!e) {
        debug_print("dat_ia_openv(%s, u%u.%u, %s): no matching provider\n", name, dapl_major, dapl_minor,
                    thread_safety ? "threadsafe" : "nonthreadsafe");
        return why;
    }
    if (DAT_RETURN rc = load_provider_locked(s, *e); rc != DAT_SUCCESS)
        return rc;
    DAT_IA_HANDLE real = nullptr;
    const DAT_RETURN rc = e->provider->ia_open_func(name, async_event_qlen, async_event_handle, &real);
    if (rc != DAT_SUCCESS) {
        debug_print("%s: the provider's ia_open returned 0x%x\n", name, static_cast<unsigned>(rc));
        if (e->open_count == 0)
            unload_provider_locked(s, *e);
        return rc;
    }
    ++e->open_count;
    *ia_handle = allocate_ia_slot(s, real, e);
    return DAT_SUCCESS;
}

FASTDAPL_EXPORT DAT_RETURN dat_ia_close(DAT_IA_HANDLE ia_handle, DAT_CLOSE_FLAGS flags)
{
    if (flags != DAT_CLOSE_ABRUPT_FLAG && flags != DAT_CLOSE_GRACEFUL_FLAG)
        return dat_error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    return close_ia_slot(ia_handle, [flags](const DAT_PROVIDER& p, DAT_IA_HANDLE real) {
        return p.ia_close_func ? p.ia_close_func(real, flags) : dat_error(DAT_MODEL_NOT_SUPPORTED);
    });
}

} // extern "C"

namespace fastdapl::registry {

DAT_RETURN open_extension(const char* name, DAT_EXTENDED_OP op, va_list args)
{
    if (!name)
        return dat_error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    if (std::memchr(name, '\0', DAT_NAME_MAX_LENGTH) == nullptr)
        return dat_error(DAT_PROVIDER_NOT_FOUND, DAT_NAME_NOT_REGISTERED);
    va_list peek;
    va_copy(peek, args);
    DAT_HANDLE* ia_out = va_arg(peek, DAT_HANDLE*);
    va_end(peek);
    if (!ia_out)
        return dat_error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG4);
    State& s = state();
    std::lock_guard lock(s.mutex);
    load_conf_locked(s);
    // The entry of that name for uDAPL 2.0, as dat_ia_open would find it,
    // of either thread safety (the op names no level).
    DAT_RETURN why = DAT_SUCCESS;
    Entry* e = find_entry_locked(s, name, DAT_VERSION_MAJOR, DAT_VERSION_MINOR, DAT_FALSE, why);
    if (!e) {
        DAT_RETURN why_safe = DAT_SUCCESS;
        e = find_entry_locked(s, name, DAT_VERSION_MAJOR, DAT_VERSION_MINOR, DAT_TRUE, why_safe);
    }
    if (!e)
        return why;
    if (DAT_RETURN rc = load_provider_locked(s, *e); rc != DAT_SUCCESS)
        return rc;
    const DAT_PROVIDER* p = e->provider;
    DAT_RETURN rc = p->handle_extendedop_func ? p->handle_extendedop_func(const_cast<char*>(name), op, args)
                                              : dat_error(DAT_MODEL_NOT_SUPPORTED);
    if (rc == DAT_SUCCESS && !*ia_out)
        rc = dat_error(DAT_INTERNAL_ERROR);
    if (rc != DAT_SUCCESS) {
        if (e->open_count == 0)
            unload_provider_locked(s, *e);
        return rc;
    }
    ++e->open_count;
    *ia_out = allocate_ia_slot(s, *ia_out, e);
    return DAT_SUCCESS;
}

DAT_RETURN close_extension(DAT_HANDLE ia, DAT_EXTENDED_OP op, va_list args)
{
    return close_ia_slot(ia, [op, &args](const DAT_PROVIDER& p, DAT_IA_HANDLE real) {
        return p.handle_extendedop_func ? p.handle_extendedop_func(real, op, args)
                                        : dat_error(DAT_MODEL_NOT_SUPPORTED);
    });
}

} // namespace fastdapl::registry
