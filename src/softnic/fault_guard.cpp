// Guarded copies: a fault inside one jumps back instead of killing the process.
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#include "fault_guard.hpp"

#include <dlfcn.h>
#include <setjmp.h>
#include <signal.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace fastdapl::softnic {

namespace {

// A guarded copy in progress: where to jump back to, and the memory it
// touches (a fault elsewhere, in a signal handler that interrupted it say,
// is not its own).
struct Guard {
    sigjmp_buf jump;
    const Piece* pieces;
    std::size_t count;
};

// The guarded copy this thread is in, or null. Initial exec: the handler
// reads it without __tls_get_addr (which is not async-signal-safe).
[[gnu::tls_model("initial-exec")]] thread_local Guard* t_guard = nullptr;

struct sigaction g_previous[2]; // before ours: SIGSEGV, SIGBUS
std::atomic<bool> g_enabled{false};
std::once_flag g_once;

bool touches(const Guard& g, const void* address)
{
    const auto a = reinterpret_cast<std::uintptr_t>(address);
    auto within = [a](const void* p, std::size_t n) {
        const auto start = reinterpret_cast<std::uintptr_t>(p);
        return a >= start && a - start < n;
    };
    for (std::size_t i = 0; i < g.count; ++i)
        if (within(g.pieces[i].dst, g.pieces[i].n) || within(g.pieces[i].src, g.pieces[i].n))
            return true;
    return false;
}

void on_fault(int sig, siginfo_t* info, void* context)
{
    // A fault the kernel raised (not a signal someone sent) on the memory
    // of the copy in progress.
    if (Guard* g = t_guard; g && info && info->si_code > 0 && touches(*g, info->si_addr)) {
        t_guard = nullptr;
        siglongjmp(g->jump, 1); // SA_NODEFER: the mask needs no restoring
    }
    const struct sigaction& before = g_previous[sig == SIGBUS ? 1 : 0];
    const bool sent = !info || info->si_code <= 0;
    if (before.sa_handler == SIG_IGN && sent)
        return; // the consumer ignores it
    if (before.sa_handler == SIG_DFL || before.sa_handler == SIG_IGN) {
        // The default action: a fault repeats on return and kills the
        // process with the usual status; a sent signal is sent again.
        struct sigaction dfl {};
        dfl.sa_handler = SIG_DFL;
        sigemptyset(&dfl.sa_mask);
        sigaction(sig, &dfl, nullptr);
        if (sent)
            raise(sig);
        return;
    }
    if (before.sa_flags & SA_SIGINFO)
        before.sa_sigaction(sig, info, context);
    else
        before.sa_handler(sig);
}

void install()
{
    const char* off = std::getenv("FASTDAPL_SOFTNIC_FAULT_GUARD");
    if (off && std::strcmp(off, "0") == 0)
        return;
    // Our handler may outlive an unload of the library that holds it (the
    // registry closes a provider with its last IA): keep the code mapped.
    Dl_info self{};
    if (dladdr(reinterpret_cast<void*>(&on_fault), &self) && self.dli_fname)
        dlopen(self.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);
    if (sigaction(SIGSEGV, nullptr, &g_previous[0]) != 0 || sigaction(SIGBUS, nullptr, &g_previous[1]) != 0)
        return;
    struct sigaction ours {};
    ours.sa_sigaction = on_fault;
    sigemptyset(&ours.sa_mask);
    ours.sa_flags = SA_SIGINFO | SA_NODEFER | SA_ONSTACK;
    if (sigaction(SIGSEGV, &ours, nullptr) != 0)
        return;
    if (sigaction(SIGBUS, &ours, nullptr) != 0) {
        sigaction(SIGSEGV, &g_previous[0], nullptr);
        return;
    }
    g_enabled.store(true, std::memory_order_release);
}

// Runs `copy`, which touches only the memory of `pieces`, with this thread
// marked; false if it faulted. `copy` must do nothing a jump out of it would
// leave half done (plain copies and stores).
template <typename Copy>
bool guarded(const Piece* pieces, std::size_t count, Copy&& copy)
{
    if (!g_enabled.load(std::memory_order_relaxed)) {
        copy();
        return true;
    }
    Guard g;
    g.pieces = pieces;
    g.count = count;
    if (sigsetjmp(g.jump, 0) != 0)
        return false; // the handler cleared the mark
    t_guard = &g;
    std::atomic_signal_fence(std::memory_order_seq_cst); // the mark before the copy
    copy();
    std::atomic_signal_fence(std::memory_order_seq_cst);
    t_guard = nullptr;
    return true;
}

} // namespace

bool install_fault_guard()
{
    std::call_once(g_once, install);
    return g_enabled.load(std::memory_order_acquire);
}

bool guarded_copy(void* dst, const void* src, std::size_t n)
{
    if (n == 0) // an empty segment may have no address at all: nothing to copy
        return true;
    const Piece piece{dst, src, n};
    return guarded(&piece, 1, [=] { std::memcpy(dst, src, n); });
}

bool guarded_place(const Piece* pieces, std::size_t count)
{
    while (count && pieces[count - 1].n == 0)
        --count;
    if (count == 0)
        return true;
    return guarded(pieces, count, [=] {
        const Piece& last = pieces[count - 1];
        for (std::size_t i = 0; i + 1 < count; ++i)
            if (pieces[i].n != 0) // an empty one may have no address
                std::memcpy(pieces[i].dst, pieces[i].src, pieces[i].n);
        auto* dst = static_cast<unsigned char*>(last.dst);
        const auto* src = static_cast<const unsigned char*>(last.src);
        std::memcpy(dst, src, last.n - 1);
        // Everything before the last byte is visible before it: the release
        // store orders every earlier store (memcpy fences its non-temporal
        // stores itself). No stand-alone fence: TSan does not model one.
        __atomic_store_n(dst + last.n - 1, src[last.n - 1], __ATOMIC_RELEASE);
    });
}

} // namespace fastdapl::softnic
