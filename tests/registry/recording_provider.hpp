// A DAT_PROVIDER table whose every function records its call and arguments.
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#pragma once

#include "testprov.hpp"

#include <algorithm>
#include <cstdarg>
#include <cstring>

namespace testprov {

template <std::size_t N>
struct FunctionName {
    char text[N];
    constexpr FunctionName(const char (&s)[N]) { std::copy_n(s, N, text); }
};

// The first 8 bytes of any argument (pointers, integers, enums, unions).
template <typename T>
std::uint64_t raw_bits(const T& value)
{
    std::uint64_t bits = 0;
    std::memcpy(&bits, &value, sizeof(T) < sizeof bits ? sizeof(T) : sizeof bits);
    return bits;
}

template <FunctionName Name, typename F>
struct Recorder;

template <FunctionName Name, typename... A>
struct Recorder<Name, DAT_RETURN (*)(A...)> {
    static DAT_RETURN call(A... args)
    {
        TestprovCall c{};
        c.function = Name.text;
        c.nargs = sizeof...(A);
        int i = 0;
        ((c.args[i++] = raw_bits(args)), ...);
        testprov_record(&c);
        return testprov_return();
    }
};

// Extension operations: the operation and up to three 64-bit varargs (the
// tests pass DAT_UINT64 values).
inline DAT_RETURN record_extension(DAT_HANDLE handle, DAT_EXTENDED_OP op, va_list args)
{
    TestprovCall c{};
    c.function = "handle_extendedop_func";
    c.nargs = 5;
    c.args[0] = raw_bits(handle);
    c.args[1] = static_cast<std::uint64_t>(op);
    for (int i = 2; i < 5; ++i)
        c.args[i] = va_arg(args, DAT_UINT64);
    testprov_record(&c);
    return testprov_return();
}

#define TESTPROV_SET(p, member) (p).member = &Recorder<#member, decltype(DAT_PROVIDER::member)>::call

// Every function pointer except ia_open (which must hand out an IA handle).
inline void fill_recording_table(DAT_PROVIDER& p)
{
    TESTPROV_SET(p, ia_query_func);
    TESTPROV_SET(p, ia_close_func);
    TESTPROV_SET(p, set_consumer_context_func);
    TESTPROV_SET(p, get_consumer_context_func);
    TESTPROV_SET(p, get_handle_type_func);
    TESTPROV_SET(p, cno_create_func);
    TESTPROV_SET(p, cno_modify_agent_func);
    TESTPROV_SET(p, cno_query_func);
    TESTPROV_SET(p, cno_free_func);
    TESTPROV_SET(p, cno_wait_func);
    TESTPROV_SET(p, cr_query_func);
    TESTPROV_SET(p, cr_accept_func);
    TESTPROV_SET(p, cr_reject_func);
    TESTPROV_SET(p, cr_handoff_func);
    TESTPROV_SET(p, evd_create_func);
    TESTPROV_SET(p, evd_query_func);
    TESTPROV_SET(p, evd_modify_cno_func);
    TESTPROV_SET(p, evd_enable_func);
    TESTPROV_SET(p, evd_disable_func);
    TESTPROV_SET(p, evd_wait_func);
    TESTPROV_SET(p, evd_resize_func);
    TESTPROV_SET(p, evd_post_se_func);
    TESTPROV_SET(p, evd_dequeue_func);
    TESTPROV_SET(p, evd_free_func);
    TESTPROV_SET(p, ep_create_func);
    TESTPROV_SET(p, ep_query_func);
    TESTPROV_SET(p, ep_modify_func);
    TESTPROV_SET(p, ep_connect_func);
    TESTPROV_SET(p, ep_dup_connect_func);
    TESTPROV_SET(p, ep_disconnect_func);
    TESTPROV_SET(p, ep_post_send_func);
    TESTPROV_SET(p, ep_post_recv_func);
    TESTPROV_SET(p, ep_post_rdma_read_func);
    TESTPROV_SET(p, ep_post_rdma_write_func);
    TESTPROV_SET(p, ep_get_status_func);
    TESTPROV_SET(p, ep_free_func);
    TESTPROV_SET(p, lmr_create_func);
    TESTPROV_SET(p, lmr_query_func);
    TESTPROV_SET(p, lmr_free_func);
    TESTPROV_SET(p, rmr_create_func);
    TESTPROV_SET(p, rmr_query_func);
    TESTPROV_SET(p, rmr_bind_func);
    TESTPROV_SET(p, rmr_free_func);
    TESTPROV_SET(p, psp_create_func);
    TESTPROV_SET(p, psp_query_func);
    TESTPROV_SET(p, psp_free_func);
    TESTPROV_SET(p, rsp_create_func);
    TESTPROV_SET(p, rsp_query_func);
    TESTPROV_SET(p, rsp_free_func);
    TESTPROV_SET(p, pz_create_func);
    TESTPROV_SET(p, pz_query_func);
    TESTPROV_SET(p, pz_free_func);
    TESTPROV_SET(p, psp_create_any_func);
    TESTPROV_SET(p, ep_reset_func);
    TESTPROV_SET(p, evd_set_unwaitable_func);
    TESTPROV_SET(p, evd_clear_unwaitable_func);
    TESTPROV_SET(p, lmr_sync_rdma_read_func);
    TESTPROV_SET(p, lmr_sync_rdma_write_func);
    TESTPROV_SET(p, ep_create_with_srq_func);
    TESTPROV_SET(p, ep_recv_query_func);
    TESTPROV_SET(p, ep_set_watermark_func);
    TESTPROV_SET(p, srq_create_func);
    TESTPROV_SET(p, srq_free_func);
    TESTPROV_SET(p, srq_post_recv_func);
    TESTPROV_SET(p, srq_query_func);
    TESTPROV_SET(p, srq_resize_func);
    TESTPROV_SET(p, srq_set_lw_func);
    TESTPROV_SET(p, csp_create_func);
    TESTPROV_SET(p, csp_query_func);
    TESTPROV_SET(p, csp_free_func);
    TESTPROV_SET(p, ep_common_connect_func);
    TESTPROV_SET(p, rmr_create_for_ep_func);
    TESTPROV_SET(p, ep_post_send_with_invalidate_func);
    TESTPROV_SET(p, ep_post_rdma_read_to_rmr_func);
    TESTPROV_SET(p, cno_fd_create_func);
    TESTPROV_SET(p, cno_trigger_func);
    TESTPROV_SET(p, ia_ha_related_func);
    p.handle_extendedop_func = &record_extension;
}

#undef TESTPROV_SET

} // namespace testprov
