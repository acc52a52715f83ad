// The IB extensions (dat_ib_extensions.h) that the CQE reader needs: the
// DTO operation values of extended requests and the extended events, and
// the counters kept for dat_ib_query_counters. The operations themselves are
// in extensions.cpp, reached through dat_extension_op.
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#pragma once

#include <dat2/udat.h>

#include <dat2/dat_ib_extensions.h>

#include <atomic>
#include <cstdint>

namespace fastdapl::core {

class Ep;
struct UdExchange;

// DTO operations at or above this value are not the core API's: extended
// requests (DAT_IB_DTO_*), and the memory-window bind the reader handles
// itself (kWindowBindOperation: its NOP), with the mlx5 direct path's
// unsignalled UMR WQEs (kWindowStepOperation: the bind or free itself,
// whose fenced NOP reports it; seen only in error).
// Plain integers: the bind's value lies outside DAT_DTOS's range, and an
// enum object may not hold it.
inline constexpr std::uint32_t kExtendedOperationBase = DAT_DTO_EXTENSION_BASE;
inline constexpr std::uint32_t kWindowBindOperation = DAT_DTO_EXTENSION_BASE + 0x100;
inline constexpr std::uint32_t kWindowStepOperation = DAT_DTO_EXTENSION_BASE + 0x101;

// Counters of dat_ib_query_counters: relaxed increments, kept off the
// posting and polling hot paths (the extended operations, receives with
// immediate data, object creation, connections, waits).
template <int N>
struct Counters {
    std::atomic<std::uint64_t> value[N] = {};
    void add(int which, std::uint64_t n = 1) { value[which].fetch_add(n, std::memory_order_relaxed); }
};
using IaCounters = Counters<DCNT_IA_ALL_COUNTERS>;
using EpCounters = Counters<DCNT_EP_ALL_COUNTERS>;
using EvdCounters = Counters<DCNT_EVD_ALL_COUNTERS>;

// The completion of an extended request (write with immediate data,
// compare and swap, fetch and add), already filled in as a DTO completion
// of operation `op`: it becomes a DAT_IB_DTO_EVENT.
void mark_extended_request(DAT_EVENT& e, DAT_DTOS op);

// A receive that carried immediate data `imm` (mlx5 CQE opcode RESP_WR_IMM
// or RESP_SEND_IMM; the CQE's or work completion's field as it is: the
// sender stored the value unconverted, as the reference dapl does), already
// filled in as a receive completion.
void mark_immediate_receive(DAT_EVENT& e, Ep* ep, std::uint8_t cqe_opcode, std::uint32_t imm);

// A UD endpoint's receive (the datagram's sender: its queue pair number and
// IPv4 address and port, network byte order), already filled in as a
// receive completion.
void mark_datagram_receive(DAT_EVENT& e, Ep* ep, std::uint32_t src_qpn, std::uint32_t src_addr);

// A UD endpoint's exchange `x` ended well (connection EVD):
// DAT_IB_UD_CONNECTION_EVENT_ESTABLISHED with the peer's address handle
// `ah`, `context` the id dat_ib_ud_cm_free takes, the other side's private
// data (x keeps it).
void post_ud_established(Ep* ep, const UdExchange& x, std::uint64_t context, void* ah);
// ... or did not: the peer's consumer rejected it, or it failed.
void post_ud_connection_failed(Ep* ep, bool rejected, const std::uint8_t* pdata, std::uint32_t size);

// The extension entry point of the DAT_PROVIDER table (every op but the
// open/close query pair, which the provider handles: it knows the IA names).
DAT_RETURN handle_extendedop(DAT_HANDLE handle, DAT_EXTENDED_OP op, va_list args);

// Whether the IA of `ia_handle` offers the IB extensions (dat_ib_open_query).
bool ia_offers_ib_extensions(DAT_IA_HANDLE ia_handle);

} // namespace fastdapl::core
