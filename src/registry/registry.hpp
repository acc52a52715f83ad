// Internal interface of libdat2: the provider dictionary, the IA handle
// table and the checks every exported dat_* function makes before it
// forwards a call to a provider.
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#pragma once

#include <dat2/udat.h>
#include <dat2/dat_registry.h>

#include <atomic>
#include <cstdint>

#define FASTDAPL_EXPORT __attribute__((visibility("default")))

namespace fastdapl::registry {

constexpr DAT_RETURN dat_error(DAT_RETURN type, DAT_RETURN subtype = 0)
{
    return static_cast<DAT_RETURN>(DAT_CLASS_ERROR) | type | subtype;
}

// IA handles given to consumers are small tagged integers, not pointers
// (like the reference registry's table indices): bit 0 set, a 15-bit
// generation in bits 1-15 so that a closed handle stays invalid after its
// slot is reused, the slot index above. An odd value is never a provider
// object (those are at least 8-byte aligned), so the two never collide.
inline bool is_tagged_ia(DAT_HANDLE h) { return (reinterpret_cast<std::uintptr_t>(h) & 1u) != 0; }

// Maps a consumer's IA handle to the provider's. Accepts the tagged value
// and also the provider's own IA pointer (providers report that one in
// query results). Returns nullptr when it names no open IA.
DAT_IA_HANDLE lookup_ia(DAT_IA_HANDLE consumer_handle);

// Registered DAT_PROVIDER tables. Checked before any handle is dereferenced
// for forwarding, so a foreign pointer or a handle of an unloaded provider
// is answered with DAT_INVALID_HANDLE. Lock-free: this sits on the data path.
inline constexpr int kMaxProviders = 64;
extern std::atomic<const DAT_PROVIDER*> g_known_providers[kMaxProviders];
extern std::atomic<int> g_known_provider_count;

inline bool is_known_provider(const DAT_PROVIDER* p)
{
    const int n = g_known_provider_count.load(std::memory_order_acquire);
    for (int i = 0; i < n; ++i)
        if (g_known_providers[i].load(std::memory_order_relaxed) == p)
            return p != nullptr;
    return false;
}

// The provider of a non-IA handle, or nullptr if it cannot be a live
// provider object (NULL, misaligned, or its first word is no registered
// provider table).
inline const DAT_PROVIDER* provider_of(DAT_HANDLE h)
{
    const auto v = reinterpret_cast<std::uintptr_t>(h);
    if (v < 4096 || (v & 7u) != 0)
        return nullptr;
    const DAT_PROVIDER* p = *reinterpret_cast<DAT_PROVIDER* const*>(h);
    return is_known_provider(p) ? p : nullptr;
}

// Debug output on stderr, enabled by FASTDAPL_DEBUG or DAT_DBG_TYPE set to
// a non-zero value.
bool debug_enabled();
void debug_print(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

} // namespace fastdapl::registry
