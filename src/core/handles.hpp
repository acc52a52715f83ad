// Handles: every DAT handle the provider gives out points into one arena
// whose memory stays mapped for the library's lifetime, so a stale, freed or
// foreign handle is recognised instead of dereferenced. The check is a few
// inline instructions: it runs on every call, the data path's included.
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#pragma once

#include <dat2/udat.h>
// after udat.h, which it needs first
#include <dat2/dat_registry.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <mutex>
#include <new>
#include <type_traits>

namespace fastdapl::core {

inline constexpr std::uint32_t kObjectMagic = 0xFA57DA91u;

class Ia;

// The common head of every object. `provider` must stay the first member:
// the registry routes calls through it.
struct Object {
    const DAT_PROVIDER* provider = nullptr;
    std::uint32_t magic = 0;
    DAT_HANDLE_TYPE type = DAT_HANDLE_TYPE_EXTENSION_BASE;
    Ia* ia = nullptr;
    DAT_CONTEXT context{};
};

// Fixed-size slots in a reserved address range. Freed slots are reused in
// FIFO order, so a just-freed handle stays dead for as long as possible.
class Arena {
public:
    static constexpr std::size_t kSlotSize = 2048;

    void* allocate();
    void release(void* slot);

    // True when `p` is the start of a slot handed out at some point: only
    // then may its header be read. The reservation is page aligned, so slot
    // starts are exactly the kSlotSize-aligned addresses in it.
    bool contains(const void* p) const
    {
        const auto v = reinterpret_cast<std::uintptr_t>(p);
        const std::uintptr_t end = end_.load(std::memory_order_acquire);
        return v < end && v >= base_.load(std::memory_order_relaxed) && (v & (kSlotSize - 1)) == 0;
    }

private:
    bool reserve(); // the mutex held
    std::atomic<std::uintptr_t> base_{0};
    std::atomic<std::uintptr_t> end_{0}; // one past the last slot handed out
    std::size_t reserved_slots_ = 0;
    std::size_t committed_slots_ = 0;
    std::size_t used_slots_ = 0;
    std::deque<std::size_t> free_;
    std::mutex mutex_;
};

// The one arena (its memory is never unmapped: a stale handle stays
// readable for as long as the process lives).
extern Arena g_arena;

// Creates a T (derived from Object) in the arena.
template <typename T, typename... Args>
T* make_object(Args&&... args)
{
    static_assert(sizeof(T) <= Arena::kSlotSize, "object too large for an arena slot");
    void* slot = g_arena.allocate();
    if (!slot)
        return nullptr;
    T* obj = new (slot) T(std::forward<Args>(args)...);
    obj->magic = kObjectMagic;
    obj->type = T::kHandleType;
    return obj;
}

template <typename T>
void destroy_object(T* obj)
{
    obj->magic = 0;
    obj->type = DAT_HANDLE_TYPE_EXTENSION_BASE;
    obj->~T();
    // The slot's head stays readable and no longer carries the magic.
    static_cast<Object*>(static_cast<void*>(obj))->magic = 0;
    g_arena.release(obj);
}

// The magic and the type are adjacent: a live object of type T is one
// 8-byte compare.
static_assert(offsetof(Object, type) == offsetof(Object, magic) + 4 && sizeof(DAT_HANDLE_TYPE) == 4);
constexpr std::uint64_t object_tag(DAT_HANDLE_TYPE type)
{
    return kObjectMagic | static_cast<std::uint64_t>(static_cast<std::uint32_t>(type)) << 32;
}

// The live object of type T a handle names, or nullptr.
template <typename T>
inline T* from_handle(DAT_HANDLE h)
{
    if (!g_arena.contains(h)) [[unlikely]]
        return nullptr;
    auto* o = static_cast<Object*>(h);
    std::uint64_t tag;
    std::memcpy(&tag, &o->magic, sizeof tag);
    if (tag != object_tag(T::kHandleType)) [[unlikely]]
        return nullptr;
    return static_cast<T*>(o);
}

// Any live object, whatever its type.
inline Object* any_object(DAT_HANDLE h)
{
    if (!g_arena.contains(h))
        return nullptr;
    auto* o = static_cast<Object*>(h);
    return o->magic == kObjectMagic ? o : nullptr;
}

constexpr DAT_RETURN error(DAT_RETURN type, DAT_RETURN subtype = 0)
{
    return static_cast<DAT_RETURN>(DAT_CLASS_ERROR) | type | subtype;
}

inline DAT_RETURN not_supported()
{
    return error(DAT_MODEL_NOT_SUPPORTED);
}

// An enum field as the integer the consumer stored: it may hold any value,
// and reading it as the enum type would be undefined for unknown ones.
template <typename E>
std::underlying_type_t<E> raw(const E& field)
{
    std::underlying_type_t<E> v;
    std::memcpy(&v, &field, sizeof v);
    return v;
}

// FASTDAPL_DEBUG set: reasons for failures go to stderr.
extern const bool g_debug;

} // namespace fastdapl::core
