// mlx5 queue formats as the fast path uses them: DAT flags to WQE control
// bits, CQE syndromes to DAT completion statuses, ownership arithmetic.
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#pragma once

#include <dat2/udat.h>

#include <infiniband/mlx5dv.h>

#include <endian.h>

#include <cstddef>
#include <cstdint>

namespace fastdapl::fastpath {

// One scatter/gather element. DAT_LMR_TRIPLET has the same layout
// (address, length, key), so a consumer's IOV is used without copying.
struct Sge {
    std::uint64_t addr;
    std::uint32_t length;
    std::uint32_t lkey;
};
static_assert(sizeof(Sge) == sizeof(DAT_LMR_TRIPLET));
static_assert(offsetof(Sge, addr) == offsetof(DAT_LMR_TRIPLET, virtual_address));
static_assert(offsetof(Sge, length) == offsetof(DAT_LMR_TRIPLET, segment_length));
static_assert(offsetof(Sge, lkey) == offsetof(DAT_LMR_TRIPLET, lmr_context));

inline constexpr std::uint32_t kSendWqeBB = 64;   // basic block of the send queue
inline constexpr std::uint32_t kSegmentSize = 16; // every WQE segment is 16 bytes
inline constexpr std::uint32_t kMaxWqeBBs = 4;    // 256 B, the BlueFlame buffer size

// Error CQE fields the public header does not name (layout of mlx5_err_cqe).
inline constexpr std::size_t kErrCqeVendorSyndromeOffset = 54;
inline constexpr std::size_t kErrCqeSyndromeOffset = 55;

// The control segment's fm_ce_se byte for a DAT completion request.
// SUPPRESS: no CQE on success (the device still reports errors);
// UNSIGNALLED still needs a CQE, only its notification differs;
// SOLICITED_WAIT sets the solicited bit the responder's CQ arm looks at;
// BARRIER_FENCE waits for earlier RDMA reads.
constexpr std::uint8_t control_flags_slow(unsigned flags)
{
    std::uint8_t bits = 0;
    if (!(flags & DAT_COMPLETION_SUPPRESS_FLAG))
        bits |= MLX5_WQE_CTRL_CQ_UPDATE;
    if (flags & DAT_COMPLETION_SOLICITED_WAIT_FLAG)
        bits |= MLX5_WQE_CTRL_SOLICITED;
    if (flags & DAT_COMPLETION_BARRIER_FENCE_FLAG)
        bits |= MLX5_WQE_CTRL_FENCE;
    return bits;
}

// The four flags that matter are the low four bits: a table of 16 answers
// makes the conversion one load.
static_assert((DAT_COMPLETION_SUPPRESS_FLAG | DAT_COMPLETION_SOLICITED_WAIT_FLAG | DAT_COMPLETION_UNSIGNALLED_FLAG |
               DAT_COMPLETION_BARRIER_FENCE_FLAG) == 0xf);
struct ControlFlagsTable {
    std::uint8_t bits[16];
};
constexpr ControlFlagsTable make_control_flags_table()
{
    ControlFlagsTable t{};
    for (unsigned f = 0; f < 16; ++f)
        t.bits[f] = control_flags_slow(f);
    return t;
}
inline constexpr ControlFlagsTable kControlFlags = make_control_flags_table();

// Bits above the four are ignored (the provider refuses them before).
constexpr std::uint8_t control_flags(DAT_COMPLETION_FLAGS flags) { return kControlFlags.bits[flags & 0xfu]; }

// The DAT status of an error CQE's syndrome.
constexpr DAT_DTO_COMPLETION_STATUS status_of_syndrome(std::uint8_t syndrome)
{
    switch (syndrome) {
    case MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR:
        return DAT_DTO_ERR_LOCAL_LENGTH;
    case MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR:
        return DAT_DTO_ERR_LOCAL_EP;
    case MLX5_CQE_SYNDROME_LOCAL_PROT_ERR:
    case MLX5_CQE_SYNDROME_LOCAL_ACCESS_ERR:
        return DAT_DTO_ERR_LOCAL_PROTECTION;
    case MLX5_CQE_SYNDROME_WR_FLUSH_ERR:
        return DAT_DTO_ERR_FLUSHED;
    case MLX5_CQE_SYNDROME_MW_BIND_ERR:
        return DAT_RMR_OPERATION_FAILED;
    case MLX5_CQE_SYNDROME_BAD_RESP_ERR:
        return DAT_DTO_ERR_BAD_RESPONSE;
    case MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR:
        return DAT_DTO_ERR_REMOTE_ACCESS;
    case MLX5_CQE_SYNDROME_REMOTE_INVAL_REQ_ERR:
    case MLX5_CQE_SYNDROME_REMOTE_OP_ERR:
        return DAT_DTO_ERR_REMOTE_RESPONDER;
    case MLX5_CQE_SYNDROME_RNR_RETRY_EXC_ERR:
        return DAT_DTO_ERR_RECEIVER_NOT_READY;
    default: // retry exceeded, remote aborted, anything new: the link failed
        return DAT_DTO_ERR_TRANSPORT;
    }
}

constexpr bool is_power_of_two(std::uint32_t v) { return v != 0 && (v & (v - 1)) == 0; }

constexpr std::uint32_t log2_of(std::uint32_t v)
{
    std::uint32_t l = 0;
    while ((1u << l) < v)
        ++l;
    return l;
}

// A CQE at consumer index `ci` of a CQ with 2^log_size entries belongs to
// software when its owner bit equals the wrap parity of ci.
constexpr bool cqe_owned_by_software(std::uint8_t op_own, std::uint32_t ci, std::uint32_t log_size)
{
    return (op_own & MLX5_CQE_OWNER_MASK) == ((ci >> log_size) & 1u) && (op_own >> 4) != MLX5_CQE_INVALID;
}

// The format field of a CQE's op_own byte (bits 3:2).
enum class CqeFormat : std::uint8_t {
    plain = 0,      // data (if any) is in the receive buffers
    inline_32 = 1,  // MLX5_INLINE_SCATTER_32: up to 32 bytes in the CQE64's first half
    inline_64 = 2,  // MLX5_INLINE_SCATTER_64: up to 64 bytes in the 64 bytes before the CQE64 (128-byte CQEs)
    compressed = 3, // a mini-CQE array (CQE compression, which we never enable)
};
static_assert(MLX5_INLINE_SCATTER_32 == 1 << 2 && MLX5_INLINE_SCATTER_64 == 2 << 2);
constexpr CqeFormat cqe_format(std::uint8_t op_own) { return static_cast<CqeFormat>((op_own >> 2) & 3u); }

// The hand-offs between software and the device (or the software NIC's
// engine thread) are atomic accesses on the word that publishes: the
// doorbell record is stored with release, a CQE's owner byte loaded with
// acquire. On x86 these are plain moves; ThreadSanitizer, which does not
// model fences, sees them pair up.
inline void store_release(volatile __be32* p, __be32 v)
{
    __atomic_store_n(p, v, __ATOMIC_RELEASE);
}
inline std::uint8_t load_acquire(const std::uint8_t* p)
{
    return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}

// A 64-bit store to a device register (UAR doorbell, BlueFlame buffer). An
// atomic store is a plain move; it is atomic so that the test suite's
// software mlx5 device, which reads the register from another thread, does
// not race with it.
inline void mmio_store64(std::uint8_t* p, std::uint64_t v)
{
    __atomic_store_n(reinterpret_cast<volatile std::uint64_t*>(p), v, __ATOMIC_RELAXED);
}

// Compiler barrier plus, on weakly ordered CPUs, the store/load fences the
// device protocol needs, next to the release store / acquire load above
// (rdma-core orders the device's view with barriers of its own). x86 keeps
// stores ordered with each other. ThreadSanitizer supports no fence (g++'s
// -Wtsan): its builds keep the compiler barrier only, the release store or
// acquire load beside each fence carrying the order it checks.
inline void store_fence()
{
#if defined(__x86_64__) || defined(__i386__) || defined(__SANITIZE_THREAD__)
    asm volatile("" ::: "memory");
#else
    __atomic_thread_fence(__ATOMIC_RELEASE);
#endif
}

inline void load_fence()
{
#if defined(__x86_64__) || defined(__i386__) || defined(__SANITIZE_THREAD__)
    asm volatile("" ::: "memory");
#else
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
#endif
}

// Orders write-combining stores (BlueFlame) after the doorbell record: a
// device ordering no thread sees, an instruction (not a C++ fence) on x86.
// (A ThreadSanitizer build for another CPU would have to spell its barrier
// as an instruction too.)
inline void wc_fence()
{
#if defined(__x86_64__) || defined(__i386__)
    asm volatile("sfence" ::: "memory");
#else
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
#endif
}

} // namespace fastdapl::fastpath
