// libFuzzer target: the CM decoder never crashes, never reads past its input,
// and what it accepts re-encodes to the same bytes.
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#include "cm_wire.hpp"

#include <cstdlib>
#include <cstring>

using namespace fastdapl::cm;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    Message m;
    std::size_t used = 0;
    const DecodeResult r = decode(data, size, m, used);
    if (r != DecodeResult::complete) {
        if (used != 0)
            std::abort();
        return 0;
    }
    if (used == 0 || used > size || m.private_data.size() > kMaxPrivateData)
        std::abort();
    std::vector<std::uint8_t> again;
    if (!encode(m, again) || again.size() != used || std::memcmp(again.data(), data, used) != 0)
        std::abort();
    return 0;
}
