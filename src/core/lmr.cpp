// Local memory regions.
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#include "lmr.hpp"

#include <cstring>

#include "api.hpp"
#include "ia.hpp"
#include "pz.hpp"

namespace fastdapl::core {

DAT_RETURN lmr_create(DAT_IA_HANDLE handle, DAT_MEM_TYPE type, DAT_REGION_DESCRIPTION region, DAT_VLEN length,
                      DAT_PZ_HANDLE pz_handle, DAT_MEM_PRIV_FLAGS privileges, DAT_VA_TYPE va_type,
                      DAT_LMR_HANDLE* lmr_out, DAT_LMR_CONTEXT* lmr_context, DAT_RMR_CONTEXT* rmr_context,
                      DAT_VLEN* registered_length, DAT_VADDR* registered_address)
{
    Ia* ia = from_handle<Ia>(handle);
    if (!ia)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA);
    Pz* pz = from_handle<Pz>(pz_handle);
    if (!pz || pz->ia != ia)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_PZ);
    if (!lmr_out)
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG8);
    // DAT_IB_MEM_PRIV_REMOTE_ATOMIC where the IB extensions run. On the
    // softnic atomics need remote read and write (the flag alone grants
    // nothing); on verbs IAs the flag, or remote read and write, grant them
    // where the device has atomics (verbs::access_flags).
    const std::uint32_t allowed =
        DAT_MEM_PRIV_ALL_FLAG | (ia->device->ib_extensions() ? DAT_IB_MEM_PRIV_REMOTE_ATOMIC : 0);
    if (privileges & ~allowed)
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG6);
    // Zero-based (DAT_VA_TYPE_ZB): the peer names its bytes by their offset
    // (every kind: zb_supported); local triplets by their address (lmr.hpp).
    if (va_type != DAT_VA_TYPE_VA && va_type != DAT_VA_TYPE_ZB)
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG7);
    std::uint64_t addr = 0;
    Lmr* base = nullptr;
    switch (type) {
    case DAT_MEM_TYPE_VIRTUAL:
        // Nothing to register: a length error (the reference's dapltest -T F
        // expects it, with or without an address).
        if (length == 0)
            return error(DAT_LENGTH_ERROR);
        if (!region.for_va)
            return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
        addr = reinterpret_cast<std::uintptr_t>(region.for_va);
        if (addr + length < addr)
            return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG4);
        break;
    case DAT_MEM_TYPE_LMR:
        // Re-registration of an existing LMR's memory, possibly in another PZ.
        base = from_handle<Lmr>(region.for_lmr_handle);
        if (!base || base->ia != ia)
            return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
        addr = base->address;
        length = base->length;
        break;
    case DAT_MEM_TYPE_SHARED_VIRTUAL: {
        // Memory the platform made shared (MAP_SHARED), named by a 40-byte
        // cookie every consumer sharing it passes; registered like virtual
        // memory, the cookie kept for dat_lmr_query.
        const DAT_SHARED_MEMORY& shared = region.for_shared_memory;
        if (length == 0)
            return error(DAT_LENGTH_ERROR);
        if (!shared.virtual_address || !shared.shared_memory_id)
            return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
        addr = reinterpret_cast<std::uintptr_t>(shared.virtual_address);
        if (addr + length < addr)
            return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG4);
        if (!memory_is_shared(addr, length))
            return error(DAT_INVALID_STATE, DAT_NO_SUBTYPE); // not created shared by the platform
        break;
    }
    default:
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    }
    Lmr* lmr = make_object<Lmr>();
    if (!lmr)
        return error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
    lmr->provider = ia->provider;
    lmr->ia = ia;
    lmr->pz = pz;
    lmr->mem_type = type;
    lmr->region = base ? region : DAT_REGION_DESCRIPTION{};
    if (type == DAT_MEM_TYPE_SHARED_VIRTUAL) { // the cookie is copied: the consumer's may not live on
        std::memcpy(lmr->shared_id, *region.for_shared_memory.shared_memory_id, sizeof lmr->shared_id);
        lmr->region.for_shared_memory = {reinterpret_cast<DAT_PVOID>(addr), &lmr->shared_id};
    } else if (!base) {
        lmr->region.for_va = reinterpret_cast<DAT_PVOID>(addr);
    }
    lmr->address = addr;
    lmr->registered_address = va_type == DAT_VA_TYPE_ZB ? 0 : addr;
    lmr->length = length;
    lmr->privileges = privileges;
    lmr->va_type = va_type;
    if (DAT_RETURN rc = ia->device->register_memory(*lmr, addr, length); rc != DAT_SUCCESS) {
        destroy_object(lmr);
        return rc;
    }
    if (base)
        ++base->users;
    ++pz->users;
    ia->adopt(lmr);
    *lmr_out = lmr;
    if (lmr_context)
        *lmr_context = lmr->lmr_context;
    if (rmr_context)
        *rmr_context = lmr->rmr_context; // no remote rights, no remote key
    if (registered_length)
        *registered_length = length;
    if (registered_address)
        *registered_address = lmr->registered_address;
    return DAT_SUCCESS;
}

DAT_RETURN lmr_query(DAT_LMR_HANDLE handle, DAT_LMR_PARAM_MASK mask, DAT_LMR_PARAM* param)
{
    Lmr* lmr = from_handle<Lmr>(handle);
    if (!lmr)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_LMR);
    if (mask & ~DAT_LMR_FIELD_ALL)
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    if (mask && !param)
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    if (!mask)
        return DAT_SUCCESS;
    param->ia_handle = consumer_handle(lmr->ia);
    param->mem_type = lmr->mem_type;
    param->region_desc = lmr->region;
    param->length = lmr->length;
    param->pz_handle = lmr->pz;
    param->mem_priv = lmr->privileges;
    param->va_type = lmr->va_type;
    param->lmr_context = lmr->lmr_context;
    param->rmr_context = lmr->rmr_context;
    param->registered_size = lmr->length;
    param->registered_address = lmr->registered_address;
    return DAT_SUCCESS;
}

void destroy_lmr(Lmr* lmr)
{
    lmr->ia->device->deregister_memory(*lmr);
    destroy_object(lmr);
}

DAT_RETURN lmr_free(DAT_LMR_HANDLE handle)
{
    Lmr* lmr = from_handle<Lmr>(handle);
    if (!lmr)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_LMR);
    if (lmr->users.load() > 0)
        return error(DAT_INVALID_STATE, DAT_INVALID_STATE_LMR_IN_USE);
    if (lmr->mem_type == DAT_MEM_TYPE_LMR)
        --static_cast<Lmr*>(lmr->region.for_lmr_handle)->users;
    --lmr->pz->users;
    lmr->ia->forget(lmr);
    destroy_lmr(lmr);
    return DAT_SUCCESS;
}

DAT_RETURN lmr_sync(DAT_IA_HANDLE handle, const DAT_LMR_TRIPLET* segments, DAT_VLEN count)
{
    // Memory is coherent for every device kind here: nothing to do once the
    // arguments check out.
    if (!from_handle<Ia>(handle))
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA);
    if (!segments || count == 0)
        return error(DAT_INVALID_PARAMETER, segments ? DAT_INVALID_ARG3 : DAT_INVALID_ARG2);
    return DAT_SUCCESS;
}

} // namespace fastdapl::core
