// The IA the provider gtest programs open: "fastdapl-tcp" (the software
// NIC), or the one FASTDAPL_TEST_IA names, e.g. fastdapl-rxe0-1 inside the
// Soft-RoCE VM (tests/vm). Where a verbs IA differs by design (documented
// in README "On verbs IAs"), tests ask ia_is_verbs() and say why.
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#pragma once

#include <dat2/udat.h>

#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>

inline char* test_ia_name()
{
    const char* name = std::getenv("FASTDAPL_TEST_IA");
    return const_cast<char*>(name && *name ? name : "fastdapl-tcp");
}

// The value of one of `ia`'s provider-specific attributes; nullopt when it
// has none of that name.
inline std::optional<std::string> provider_specific(DAT_IA_HANDLE ia, const char* name)
{
    DAT_PROVIDER_ATTR attr{};
    if (dat_ia_query(ia, nullptr, 0, nullptr, DAT_PROVIDER_FIELD_ALL, &attr) != DAT_SUCCESS)
        return std::nullopt;
    for (DAT_COUNT i = 0; i < attr.num_provider_specific_attr; ++i)
        if (std::strcmp(attr.provider_specific_attr[i].name, name) == 0)
            return std::string(attr.provider_specific_attr[i].value);
    return std::nullopt;
}

// Whether `ia` runs on an rdma-core device (its provider-specific
// attributes name one).
inline bool ia_is_verbs(DAT_IA_HANDLE ia) { return provider_specific(ia, "FASTDAPL_DEVICE").has_value(); }

// Whether `ia` takes the mlx5 direct path (FASTDAPL_DATA_PATH), e.g. on
// tests/fake_mlx5's software mlx5 device.
inline bool ia_is_mlx5_direct(DAT_IA_HANDLE ia)
{
    return provider_specific(ia, "FASTDAPL_DATA_PATH").value_or("").starts_with("mlx5 direct");
}

inline DAT_COUNT max_private_data(DAT_IA_HANDLE ia)
{
    DAT_PROVIDER_ATTR attr{};
    return dat_ia_query(ia, nullptr, 0, nullptr, DAT_PROVIDER_FIELD_ALL, &attr) == DAT_SUCCESS
               ? attr.max_private_data_size
               : 0;
}
