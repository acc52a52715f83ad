// Internal interface of libdat2: the provider dictionary, the IA handle
// table and the checks every exported dat_* function makes before it
// forwards a call to a provider.
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#pragma once

#include <dat2/udat.h>
#include <dat2/dat_registry.h>

#include <atomic>
#include <cstdarg>
#include <cstdint>

#define FASTDAPL_EXPORT __attribute__((visibility("default")))
// For data the forward reads: a hidden declaration lets the compiler address
// it directly instead of through the GOT.
#define FASTDAPL_HIDDEN __attribute__((visibility("hidden")))

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
// A slot, once used, only ever holds a registered table or nullptr (removal
// clears it), and g_known_provider_count never shrinks.
inline constexpr int kMaxProviders = 64;
extern FASTDAPL_HIDDEN std::atomic<const DAT_PROVIDER*> g_known_providers[kMaxProviders];
extern FASTDAPL_HIDDEN std::atomic<int> g_known_provider_count;

// The slot of g_known_providers where provider_of() last found a handle's
// table: where it looks first. Only a guess of where to look: the slot's
// current value is what a handle's first word is compared with, as in the
// scan, so a provider whose slot removal cleared is refused through the hint
// as well (nothing to clear here on removal). Always points into the array.
extern FASTDAPL_HIDDEN std::atomic<const std::atomic<const DAT_PROVIDER*>*> g_provider_hint;

// The slot that holds table `p`, or nullptr.
inline const std::atomic<const DAT_PROVIDER*>* slot_of(const DAT_PROVIDER* p)
{
    if (!p)
        return nullptr;
    const int n = g_known_provider_count.load(std::memory_order_acquire);
    for (int i = 0; i < n; ++i)
        if (g_known_providers[i].load(std::memory_order_acquire) == p)
            return &g_known_providers[i];
    return nullptr;
}

inline bool is_known_provider(const DAT_PROVIDER* p) { return slot_of(p) != nullptr; }

// Whether `h` can be read as a provider object: not NULL or near it, 8-byte
// aligned. Its first word is then the table to check.
inline bool may_be_object(DAT_HANDLE h)
{
    const auto v = reinterpret_cast<std::uintptr_t>(h);
    return v >= 4096 && (v & 7u) == 0;
}

inline const DAT_PROVIDER* first_word(DAT_HANDLE h)
{
    return *reinterpret_cast<DAT_PROVIDER* const*>(h);
}

// Whether `p` is the table in the hinted slot. True for p == nullptr when
// that slot was cleared: callers refuse nullptr whatever this says.
inline bool is_hinted_provider(const DAT_PROVIDER* p)
{
    return p == g_provider_hint.load(std::memory_order_relaxed)->load(std::memory_order_acquire);
}

// `p` if it is a registered table, else nullptr: the scan of all slots,
// which moves the hint to the slot where it found `p`.
FASTDAPL_HIDDEN const DAT_PROVIDER* provider_of_scan(const DAT_PROVIDER* p);

// The provider of a non-IA handle, or nullptr if it cannot be a live
// provider object (NULL, misaligned, or its first word is no registered
// provider table).
inline const DAT_PROVIDER* provider_of(DAT_HANDLE h)
{
    if (!may_be_object(h))
        return nullptr;
    const DAT_PROVIDER* p = first_word(h);
    if (is_hinted_provider(p)) [[likely]]
        return p; // nullptr if it matched a cleared slot
    return provider_of_scan(p);
}

// DAT_OPEN_EXTENSION_BASE and DAT_CLOSE_EXTENSION_BASE (dat.h, under
// DAT_EXTENSIONS): the bits of an extension's open and close ops.
inline constexpr DAT_EXTENDED_OP kOpenExtensionBase = 0x1000;
inline constexpr DAT_EXTENDED_OP kCloseExtensionBase = 0x2000;

// An extension's open op (dat_ib_open_query): the provider of IA `name`
// (loaded as dat_ia_open would) is called with the name as its handle and
// the arguments after the name, the first of them where it writes the IA
// handle; that IA then counts as open, under a handle of this registry.
DAT_RETURN open_extension(const char* name, DAT_EXTENDED_OP op, va_list args);
// An extension's close op (dat_ib_close_query) on an IA handle that
// open_extension gave: the provider's op, then the IA is closed here.
DAT_RETURN close_extension(DAT_HANDLE ia, DAT_EXTENDED_OP op, va_list args);

// Debug output on stderr, enabled by FASTDAPL_DEBUG or DAT_DBG_TYPE set to
// a non-zero value.
bool debug_enabled();
void debug_print(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

} // namespace fastdapl::registry
