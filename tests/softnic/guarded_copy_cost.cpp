// What a guarded copy costs against a plain memcpy and against
// process_vm_writev on this process (the EFAULT-reporting alternative), at
// 8 bytes and 64 KiB. A benchmark (meson benchmark), not a test: prints
// nanoseconds per copy, best of several rounds. With an argument, that many
// copies of each kind, once (to count instructions under callgrind).
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#include "fault_guard.hpp"

#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

using fastdapl::softnic::guarded_copy;
using fastdapl::softnic::guarded_place;
using fastdapl::softnic::Piece;

template <typename Copy>
double ns_per_copy(int rounds, std::size_t iterations, Copy&& copy)
{
    double best = 1e18;
    for (int round = 0; round < rounds; ++round) {
        const auto start = std::chrono::steady_clock::now();
        for (std::size_t i = 0; i < iterations; ++i)
            copy();
        const std::chrono::duration<double, std::nano> took = std::chrono::steady_clock::now() - start;
        best = std::min(best, took.count() / static_cast<double>(iterations));
    }
    return best;
}

} // namespace

int main(int argc, char** argv)
{
    const std::size_t fixed = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 0;
    const int rounds = fixed ? 1 : 5;
    const bool guarded = fastdapl::softnic::install_fault_guard();
    std::printf("fault guard %s\n", guarded ? "on" : "off (FASTDAPL_SOFTNIC_FAULT_GUARD=0)");
    for (const std::size_t bytes : {std::size_t{8}, std::size_t{64} << 10}) {
        std::vector<unsigned char> src(bytes, 1), dst(bytes);
        const std::size_t n = fixed ? fixed : bytes <= 64 ? 2'000'000 : 20'000;
        // volatile: the compiler may not fold a fixed-size memcpy away.
        volatile std::size_t size = bytes;
        const double plain = ns_per_copy(rounds, n, [&] {
            std::memcpy(dst.data(), src.data(), size);
            asm volatile("" ::: "memory");
        });
        const double guard = ns_per_copy(rounds, n, [&] { guarded_copy(dst.data(), src.data(), size); });
        const Piece piece{dst.data(), src.data(), size};
        const double place = ns_per_copy(rounds, n, [&] { guarded_place(&piece, 1); });
        const pid_t self = getpid();
        const double vm = ns_per_copy(rounds, fixed ? n : n / 4, [&] {
            iovec local{src.data(), size}, remote{dst.data(), size};
            process_vm_writev(self, &local, 1, &remote, 1, 0);
        });
        std::printf("%6zu B: memcpy %8.1f ns  guarded_copy %8.1f ns  guarded_place %8.1f ns  "
                    "process_vm_writev %8.1f ns\n",
                    bytes, plain, guard, place, vm);
    }
    return 0;
}
