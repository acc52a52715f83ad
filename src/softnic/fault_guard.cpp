// Guarded copies: a fault inside one jumps back instead of killing the process.
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#include "fault_guard.hpp"

#include <dlfcn.h>
#include <setjmp.h>
#include <signal.h>
#include <ucontext.h>

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

// Not under ThreadSanitizer: it does not see the routine's stores, so the
// last byte's store would not be the release a poller's acquire pairs with.
#if defined(__x86_64__) && !defined(__SANITIZE_THREAD__)
#define FASTDAPL_SMALL_PLACE 1
#endif

#if defined(FASTDAPL_SMALL_PLACE)
// Small placements (1 to kSmallPlaceMax bytes) copy with a routine of our own
// instead of sigsetjmp and memcpy (about 60 instructions of guard for a copy
// of a few): a fault inside it is recognised by where it happened, and the
// handler resumes at its fixup, which returns 0. It uses no stack and only
// caller-saved registers, so resuming there needs nothing restored.
// place_small(dst, src, n): bytes [0, n-1) in overlapping 16-, 8-, 4-byte
// or single moves, loads before stores in each step, then byte n-1 last (x86
// keeps plain stores in order: a poller of the last byte sees the rest).
// Returns 1, or 0 when it faulted (part of dst may be written). It starts
// with endbr64 (a no-op where indirect branch tracking is off), as the
// compiler's own functions do under -fcf-protection.
constexpr std::size_t kSmallPlaceMax = 64;
extern "C" int fastdapl_softnic_place_small(void* dst, const void* src, std::size_t n);
extern "C" const char fastdapl_softnic_place_small_fixup[];
asm(R"(
    .text
    .p2align 4
    .globl fastdapl_softnic_place_small
    .hidden fastdapl_softnic_place_small
    .type fastdapl_softnic_place_small, @function
fastdapl_softnic_place_small:
    endbr64
    lea -1(%rdx), %rcx
    movzbl -1(%rsi,%rdx), %eax
    cmp $16, %rcx
    jae 3f
    cmp $8, %rcx
    jae 2f
    cmp $4, %rcx
    jae 1f
    test %rcx, %rcx
    jz 9f
    movzbl (%rsi), %r8d
    movb %r8b, (%rdi)
    cmp $1, %rcx
    je 9f
    movzwl -2(%rsi,%rcx), %r8d
    movw %r8w, -2(%rdi,%rcx)
    jmp 9f
1:  movl (%rsi), %r8d
    movl -4(%rsi,%rcx), %r9d
    movl %r8d, (%rdi)
    movl %r9d, -4(%rdi,%rcx)
    jmp 9f
2:  movq (%rsi), %r8
    movq -8(%rsi,%rcx), %r9
    movq %r8, (%rdi)
    movq %r9, -8(%rdi,%rcx)
    jmp 9f
3:  movdqu (%rsi), %xmm0
    movdqu -16(%rsi,%rcx), %xmm1
    cmp $32, %rcx
    jbe 4f
    movdqu 16(%rsi), %xmm2
    movdqu -32(%rsi,%rcx), %xmm3
    movdqu %xmm2, 16(%rdi)
    movdqu %xmm3, -32(%rdi,%rcx)
4:  movdqu %xmm0, (%rdi)
    movdqu %xmm1, -16(%rdi,%rcx)
9:  movb %al, (%rdi,%rcx)
    movl $1, %eax
    ret
    .globl fastdapl_softnic_place_small_fixup
    .hidden fastdapl_softnic_place_small_fixup
fastdapl_softnic_place_small_fixup:
    xorl %eax, %eax
    ret
    .size fastdapl_softnic_place_small, . - fastdapl_softnic_place_small
)");

// A kernel-raised fault at an instruction of place_small: resume at its fixup.
bool resume_small_place(void* context)
{
    auto* uc = static_cast<ucontext_t*>(context);
    greg_t& rip = uc->uc_mcontext.gregs[REG_RIP];
    const auto at = static_cast<std::uintptr_t>(rip);
    if (at < reinterpret_cast<std::uintptr_t>(&fastdapl_softnic_place_small) ||
        at >= reinterpret_cast<std::uintptr_t>(fastdapl_softnic_place_small_fixup))
        return false;
    rip = static_cast<greg_t>(reinterpret_cast<std::uintptr_t>(fastdapl_softnic_place_small_fixup));
    return true;
}
#endif

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
#if defined(FASTDAPL_SMALL_PLACE)
    if (info && info->si_code > 0 && context && resume_small_place(context))
        return;
#endif
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
#if defined(FASTDAPL_SMALL_PLACE)
    if (n <= kSmallPlaceMax)
        return fastdapl_softnic_place_small(dst, src, n) != 0;
#endif
    const Piece piece{dst, src, n};
    return guarded(&piece, 1, [=] { std::memcpy(dst, src, n); });
}

bool guarded_place(const Piece* pieces, std::size_t count)
{
    while (count && pieces[count - 1].n == 0)
        --count;
    if (count == 0)
        return true;
#if defined(FASTDAPL_SMALL_PLACE)
    if (count == 1 && pieces[0].n <= kSmallPlaceMax) // the common small message
        return fastdapl_softnic_place_small(pieces[0].dst, pieces[0].src, pieces[0].n) != 0;
#endif
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
