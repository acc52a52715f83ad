// Provider objects and their handles: every DAT handle the provider gives out
// points into one arena whose memory stays mapped for the library's lifetime,
// so a stale, freed or foreign handle is recognised instead of dereferenced.
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#pragma once

#include <dat2/udat.h>
#include <dat2/dat_registry.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <new>

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

    static Arena& instance();

    void* allocate();
    void release(void* slot);

    // True when `p` is the start of a slot handed out at some point: only
    // then may its header be read.
    bool contains(const void* p) const
    {
        const auto v = reinterpret_cast<std::uintptr_t>(p);
        const auto b = reinterpret_cast<std::uintptr_t>(base_);
        return v >= b && v < b + used_.load(std::memory_order_acquire) * kSlotSize && (v - b) % kSlotSize == 0;
    }

private:
    Arena();
    std::uint8_t* base_ = nullptr;
    std::size_t reserved_slots_ = 0;
    std::size_t committed_slots_ = 0;
    std::atomic<std::size_t> used_{0};
    std::deque<std::size_t> free_;
    std::mutex mutex_;
};

// Creates a T (derived from Object) in the arena.
template <typename T, typename... Args>
T* make_object(Args&&... args)
{
    static_assert(sizeof(T) <= Arena::kSlotSize, "object too large for an arena slot");
    void* slot = Arena::instance().allocate();
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
    Arena::instance().release(obj);
}

// The live object of type T a handle names, or nullptr.
template <typename T>
T* from_handle(DAT_HANDLE h)
{
    if (!Arena::instance().contains(h))
        return nullptr;
    auto* o = static_cast<Object*>(h);
    if (o->magic != kObjectMagic || o->type != T::kHandleType)
        return nullptr;
    return static_cast<T*>(o);
}

// Any live object, whatever its type.
inline Object* any_object(DAT_HANDLE h)
{
    if (!Arena::instance().contains(h))
        return nullptr;
    auto* o = static_cast<Object*>(h);
    return o->magic == kObjectMagic ? o : nullptr;
}

constexpr DAT_RETURN error(DAT_RETURN type, DAT_RETURN subtype = 0)
{
    return static_cast<DAT_RETURN>(DAT_CLASS_ERROR) | type | subtype;
}

} // namespace fastdapl::core
