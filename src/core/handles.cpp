// The handle arena, and the calls that take a handle of any type.
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#include "handles.hpp"
#include "api.hpp"

#include <sys/mman.h>

#include <cstdlib>
#include <cstring>
#include <thread>

namespace fastdapl::core {

namespace {
constexpr std::size_t kReserveBytes = std::size_t{1} << 32; // address space only
constexpr std::size_t kCommitSlots = 512;                   // 1 MiB at a time
// Freed slots wait in the queue until this many are free before reuse.
constexpr std::size_t kQuarantine = 4096;
} // namespace

Arena g_arena;
// As the registry reads it: set, not empty and not "0".
const bool g_debug = [] {
    const char* v = std::getenv("FASTDAPL_DEBUG");
    return v && *v && std::strcmp(v, "0") != 0;
}();

bool Arena::reserve()
{
    if (base_.load(std::memory_order_relaxed))
        return true;
    void* p = mmap(nullptr, kReserveBytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
        return false;
    reserved_slots_ = kReserveBytes / kSlotSize;
    base_.store(reinterpret_cast<std::uintptr_t>(p), std::memory_order_relaxed);
    end_.store(reinterpret_cast<std::uintptr_t>(p), std::memory_order_release);
    return true;
}

void* Arena::allocate()
{
    std::lock_guard lock(mutex_);
    if (!reserve())
        return nullptr;
    auto* base = reinterpret_cast<std::uint8_t*>(base_.load(std::memory_order_relaxed));
    if (free_.size() > kQuarantine) {
        const std::size_t slot = free_.front();
        free_.pop_front();
        return base + slot * kSlotSize;
    }
    if (used_slots_ == committed_slots_) {
        if (committed_slots_ + kCommitSlots > reserved_slots_)
            return nullptr;
        if (mprotect(base + committed_slots_ * kSlotSize, kCommitSlots * kSlotSize, PROT_READ | PROT_WRITE) != 0)
            return nullptr;
        committed_slots_ += kCommitSlots;
    }
    void* slot = base + used_slots_ * kSlotSize;
    ++used_slots_;
    end_.store(reinterpret_cast<std::uintptr_t>(base + used_slots_ * kSlotSize), std::memory_order_release);
    return slot;
}

void Arena::release(void* slot)
{
    std::lock_guard lock(mutex_);
    const auto base = base_.load(std::memory_order_relaxed);
    free_.push_back((reinterpret_cast<std::uintptr_t>(slot) - base) / kSlotSize);
}

DAT_RETURN set_consumer_context(DAT_HANDLE h, DAT_CONTEXT context)
{
    Object* o = any_object(h);
    if (!o)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE1);
    o->context = context;
    return DAT_SUCCESS;
}

DAT_RETURN get_consumer_context(DAT_HANDLE h, DAT_CONTEXT* context)
{
    Object* o = any_object(h);
    if (!o)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE1);
    if (!context)
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    *context = o->context;
    return DAT_SUCCESS;
}

DAT_RETURN get_handle_type(DAT_HANDLE h, DAT_HANDLE_TYPE* type)
{
    Object* o = any_object(h);
    if (!o)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE1);
    if (!type)
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    *type = o->type;
    return DAT_SUCCESS;
}

} // namespace fastdapl::core
