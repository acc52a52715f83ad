// Protection zones.
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#include "pz.hpp"

#include "api.hpp"
#include "ia.hpp"

namespace fastdapl::core {

DAT_RETURN pz_create(DAT_IA_HANDLE handle, DAT_PZ_HANDLE* out)
{
    Ia* ia = from_handle<Ia>(handle);
    if (!ia)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA);
    if (!out)
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    Pz* pz = make_object<Pz>();
    if (!pz)
        return error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
    pz->provider = ia->provider;
    pz->ia = ia;
    if (DAT_RETURN rc = ia->device->create_pd(*pz); rc != DAT_SUCCESS) {
        destroy_object(pz);
        return rc;
    }
    ia->adopt(pz);
    *out = pz;
    return DAT_SUCCESS;
}

DAT_RETURN pz_query(DAT_PZ_HANDLE handle, DAT_PZ_PARAM_MASK mask, DAT_PZ_PARAM* param)
{
    Pz* pz = from_handle<Pz>(handle);
    if (!pz)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_PZ);
    if (mask & ~DAT_PZ_FIELD_ALL)
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    if (mask && !param)
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    if (mask & DAT_PZ_FIELD_IA_HANDLE)
        param->ia_handle = consumer_handle(pz->ia);
    return DAT_SUCCESS;
}

void destroy_pz(Pz* pz)
{
    pz->ia->device->destroy_pd(*pz);
    destroy_object(pz);
}

DAT_RETURN pz_free(DAT_PZ_HANDLE handle)
{
    Pz* pz = from_handle<Pz>(handle);
    if (!pz)
        return error(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_PZ);
    if (pz->users.load() > 0)
        return error(DAT_INVALID_STATE, DAT_INVALID_STATE_PZ_IN_USE);
    pz->ia->forget(pz);
    destroy_pz(pz);
    return DAT_SUCCESS;
}

} // namespace fastdapl::core
