// What the provider's fuzz targets share: a reader over the input bytes, the
// guarded memory they register (canaries on every byte no region ever
// covered with write rights), and the ports they must never touch.
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#pragma once

#include <dat2/udat.h>

#include <sanitizer/lsan_interface.h>
#include <sys/mman.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace fastdapl_fuzz {

// A broken invariant: say which, and abort (libFuzzer keeps the input).
[[noreturn]] inline void fail(const char* what, unsigned long long detail = 0)
{
    std::fprintf(stderr, "fuzz invariant broken: %s (%llu)\n", what, detail);
    std::abort();
}

// The provider keeps its objects in a reserved mapping of its own (the
// handle arena), which LeakSanitizer does not scan: what they point to
// would look leaked. Registers the run of adjacent mappings around
// `handle` (reserved and committed parts alike) as a root region.
inline void register_handle_arena(DAT_HANDLE handle)
{
    const auto at = reinterpret_cast<std::uintptr_t>(handle);
    std::FILE* maps = std::fopen("/proc/self/maps", "r");
    if (!maps)
        fail("/proc/self/maps");
    unsigned long lo = 0, hi = 0, run_lo = 0, run_hi = 0;
    char line[512];
    bool found = false;
    while (std::fgets(line, sizeof line, maps)) {
        if (std::sscanf(line, "%lx-%lx", &lo, &hi) != 2)
            continue;
        if (lo != run_hi) { // a gap: a new run starts
            if (found)
                break;
            run_lo = lo;
        }
        run_hi = hi;
        found = found || (at >= lo && at < hi);
    }
    std::fclose(maps);
    if (!found)
        fail("no mapping holds a handle", at);
    __lsan_register_root_region(reinterpret_cast<void*>(run_lo), run_hi - run_lo);
}

// The input as a stream of choices; zeros once it is used up.
class Reader {
public:
    Reader(const std::uint8_t* data, std::size_t size) : p_(data), n_(size) {}
    bool empty() const { return n_ == 0; }
    std::uint8_t u8()
    {
        if (n_ == 0)
            return 0;
        --n_;
        return *p_++;
    }
    std::uint16_t u16() { return static_cast<std::uint16_t>(u8() | u8() << 8); }
    std::uint32_t u32() { return u16() | static_cast<std::uint32_t>(u16()) << 16; }
    std::uint64_t u64() { return u32() | static_cast<std::uint64_t>(u32()) << 32; }
    // Up to `max` bytes copied out (fewer when the input ends).
    std::size_t bytes(void* out, std::size_t max)
    {
        const std::size_t k = max < n_ ? max : n_;
        if (k == 0)
            return 0;
        std::memcpy(out, p_, k);
        p_ += k;
        n_ -= k;
        return k;
    }

private:
    const std::uint8_t* p_;
    std::size_t n_;
};

// Ports other programs on this host use for their own tests (Debian's dtest
// and dapltest): never listen on them, never connect to them.
inline bool forbidden_port(std::uint64_t qual)
{
    const std::uint64_t port = qual & 0xffff;
    return port == 15828 || port == 45248;
}

// Memory for registrations: an inaccessible page, kPages read-write pages
// (the pool), a read-only page, an inaccessible page. Every pool byte starts
// as a canary; only bytes some region covered with a write right may change.
class GuardedPool {
public:
    static constexpr std::size_t kPage = 4096;
    static constexpr std::size_t kPages = 16;
    static constexpr std::size_t kBytes = kPages * kPage;

    GuardedPool()
    {
        void* m = mmap(nullptr, (kPages + 3) * kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED)
            fail("mmap");
        map_ = static_cast<std::uint8_t*>(m);
        mprotect(map_, kPage, PROT_NONE);
        mprotect(map_ + (kPages + 1) * kPage, kPage, PROT_READ);
        mprotect(map_ + (kPages + 2) * kPage, kPage, PROT_NONE);
        writable_.assign(kBytes / 8, 0);
        image_.resize(kBytes);
        for (std::size_t i = 0; i < kBytes; ++i)
            image_[i] = canary(i);
        reset();
    }
    std::uint8_t* base() const { return map_ + kPage; }                     // the pool
    std::uint8_t* read_only() const { return map_ + (kPages + 1) * kPage; } // one page
    std::uint8_t* before() const { return map_; }                           // inaccessible
    std::uint8_t* after() const { return map_ + (kPages + 2) * kPage; }     // inaccessible
    std::uintptr_t lo() const { return reinterpret_cast<std::uintptr_t>(map_); }
    std::uintptr_t hi() const { return reinterpret_cast<std::uintptr_t>(map_ + (kPages + 3) * kPage); }

    static std::uint8_t canary(std::size_t i) { return static_cast<std::uint8_t>(0xa5 ^ (i * 31) ^ (i >> 8)); }

    void reset()
    {
        std::memcpy(base(), image_.data(), kBytes);
        std::fill(writable_.begin(), writable_.end(), 0);
    }

    // A registration of [addr, addr + len) succeeded with `privileges`:
    // checks that it only covers memory mapped for that access, and marks
    // pool bytes writable when it allows writes.
    void registered(std::uintptr_t addr, std::uint64_t len, DAT_MEM_PRIV_FLAGS privileges)
    {
        if (len == 0)
            return;
        const std::uintptr_t pool = reinterpret_cast<std::uintptr_t>(base());
        const std::uintptr_t ro = reinterpret_cast<std::uintptr_t>(read_only());
        const bool writes = (privileges & (DAT_MEM_PRIV_LOCAL_WRITE_FLAG | DAT_MEM_PRIV_REMOTE_WRITE_FLAG)) != 0;
        const std::uint64_t end = addr + len;
        if (end < addr)
            fail("registration wraps around", addr);
        if (addr < lo() || addr >= hi())
            fail("registration of memory that is not the pool accepted", addr);
        const std::uintptr_t limit = writes ? pool + kBytes : ro + kPage;
        if (addr < pool || end > limit)
            fail("registration of memory not mapped for its rights accepted", addr);
        if (writes)
            for (std::uint64_t i = addr - pool; i < end - pool; ++i)
                writable_[i / 8] |= std::uint64_t{0xff} << (i % 8 * 8);
    }

    // Every byte no write-enabled region ever covered still holds its
    // canary (eight bytes at a time: it runs after every call).
    void check() const
    {
        const std::uint8_t* b = base();
        for (std::size_t w = 0; w < kBytes / 8; ++w) {
            std::uint64_t now, was;
            std::memcpy(&now, b + w * 8, 8);
            std::memcpy(&was, image_.data() + w * 8, 8);
            if ((now ^ was) & ~writable_[w])
                fail("write outside every registered region, at pool offset", w * 8);
        }
    }

private:
    std::uint8_t* map_ = nullptr;
    std::vector<std::uint64_t> writable_; // a byte 0xff where some region allowed writes
    std::vector<std::uint8_t> image_;     // the canaries
};

} // namespace fastdapl_fuzz
