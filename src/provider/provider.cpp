// libfastdapl.so.2: dat_provider_init/fini and the DAT_PROVIDER table, one
// per IA name registered. Every entry point is src/core's (api.hpp).
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#include "api.hpp"
#include "extensions.hpp"
#include "handles.hpp"

#include <dlfcn.h>

#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#define FASTDAPL_EXPORT __attribute__((visibility("default")))

using namespace fastdapl::core;

namespace {

// One table per registered IA name; objects point at their IA's table.
struct Registration {
    DAT_PROVIDER table{};
    DAT_PROVIDER_INFO info{};
    std::string name;
    std::string ia_params;
};
std::mutex g_registrations_mutex;
std::map<std::string, std::unique_ptr<Registration>> g_registrations;

// dat_ia_open: the IA's dat.conf entry decides its device kind.
DAT_RETURN ia_open(const DAT_NAME_PTR name, DAT_COUNT async_qlen, DAT_EVD_HANDLE* async_evd, DAT_IA_HANDLE* ia_out)
{
    if (!name)
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG1);
    Registration* reg = nullptr;
    {
        std::lock_guard lock(g_registrations_mutex);
        auto it = g_registrations.find(name);
        if (it == g_registrations.end())
            return error(DAT_PROVIDER_NOT_FOUND, DAT_NAME_NOT_REGISTERED);
        reg = it->second.get();
    }
    return fastdapl::core::ia_open(reg->ia_params, &reg->table, name, async_qlen, async_evd, ia_out);
}

// dat_ib_open_query: the registry (ours or the reference's) passes the IA's
// name as the handle, the arguments after it in `args`. The IA opens with
// an async EVD of its own and no consumer objects; dat_ib_close_query
// closes it (abruptly: nothing was made on it).
DAT_RETURN open_query(const char* name, va_list args)
{
    DAT_HANDLE* ia_out = va_arg(args, DAT_HANDLE*);
    const auto ia_mask = va_arg(args, DAT_IA_ATTR_MASK);
    DAT_IA_ATTR* ia_attr = va_arg(args, DAT_IA_ATTR*);
    const auto provider_mask = va_arg(args, DAT_PROVIDER_ATTR_MASK);
    DAT_PROVIDER_ATTR* provider_attr = va_arg(args, DAT_PROVIDER_ATTR*);
    if (!name)
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    if (!ia_out)
        return error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG4);
    if ((ia_mask && !ia_attr) || (provider_mask && !provider_attr))
        return error(DAT_INVALID_PARAMETER, ia_mask && !ia_attr ? DAT_INVALID_ARG6 : DAT_INVALID_ARG8);
    DAT_EVD_HANDLE async_evd = DAT_HANDLE_NULL;
    DAT_IA_HANDLE ia = nullptr;
    if (DAT_RETURN rc = ia_open(const_cast<char*>(name), 8, &async_evd, &ia); rc != DAT_SUCCESS)
        return rc;
    if (DAT_RETURN rc = ia_query(ia, nullptr, ia_mask, ia_attr, provider_mask, provider_attr); rc != DAT_SUCCESS) {
        ia_close(ia, DAT_CLOSE_ABRUPT_FLAG);
        return rc;
    }
    *ia_out = ia;
    return DAT_SUCCESS;
}

// dat_extension_op's entry: the open/close query pair here (it knows the
// registered names), every other operation in src/core.
DAT_RETURN extended_op(DAT_HANDLE handle, DAT_EXTENDED_OP op, va_list args)
{
    if (op == DAT_IB_OPEN_QUERY_OP)
        return open_query(static_cast<const char*>(handle), args);
    if (op == DAT_IB_CLOSE_QUERY_OP)
        return ia_close(handle, DAT_CLOSE_ABRUPT_FLAG);
    return handle_extendedop(handle, op, args);
}

void fill_table(DAT_PROVIDER& t, const char* device_name)
{
    t.device_name = device_name;
    t.extension = nullptr;
    t.ia_open_func = &ia_open;
    t.ia_query_func = &ia_query;
    t.ia_close_func = &ia_close;
    t.set_consumer_context_func = &set_consumer_context;
    t.get_consumer_context_func = &get_consumer_context;
    t.get_handle_type_func = &get_handle_type;
    t.pz_create_func = &pz_create;
    t.pz_query_func = &pz_query;
    t.pz_free_func = &pz_free;
    t.lmr_create_func = &lmr_create;
    t.lmr_query_func = &lmr_query;
    t.lmr_free_func = &lmr_free;
    t.lmr_sync_rdma_read_func = &lmr_sync;
    t.lmr_sync_rdma_write_func = &lmr_sync;
    t.evd_create_func = &evd_create;
    t.evd_query_func = &evd_query;
    t.evd_free_func = &evd_free;
    t.evd_post_se_func = &evd_post_se;
    t.evd_dequeue_func = &evd_dequeue;
    t.evd_wait_func = &evd_wait;
    t.evd_enable_func = &evd_enable;
    t.evd_disable_func = &evd_disable;
    t.evd_set_unwaitable_func = &evd_set_unwaitable;
    t.evd_clear_unwaitable_func = &evd_clear_unwaitable;
    t.evd_resize_func = &evd_resize;
    t.cr_reject_func = &cr_reject;
    t.cr_accept_func = &cr_accept;
    t.cr_query_func = &cr_query;
    t.psp_create_any_func = &psp_create_any;
    t.psp_free_func = &psp_free;
    t.psp_query_func = &psp_query;
    t.psp_create_func = &psp_create;
    t.ep_reset_func = &ep_reset;
    t.ep_free_func = &ep_free;
    t.ep_get_status_func = &ep_get_status;
    t.ep_post_rdma_write_func = &ep_post_rdma_write;
    t.ep_post_rdma_read_func = &ep_post_rdma_read;
    t.ep_post_recv_func = &ep_post_recv;
    t.ep_post_send_func = &ep_post_send;
    t.ep_disconnect_func = &ep_disconnect;
    t.ep_connect_func = &ep_connect;
    t.ep_query_func = &ep_query;
    t.ep_create_func = &ep_create;
    t.cno_create_func = &cno_create;
    t.cno_modify_agent_func = &cno_modify_agent;
    t.cno_query_func = &cno_query;
    t.cno_free_func = &cno_free;
    t.cno_wait_func = &cno_wait;
    t.cr_handoff_func = &cr_handoff;
    t.evd_modify_cno_func = &evd_modify_cno;
    t.ep_modify_func = &ep_modify;
    t.ep_dup_connect_func = &ep_dup_connect;
    t.rmr_create_func = &rmr_create;
    t.rmr_query_func = &rmr_query;
    t.rmr_bind_func = &rmr_bind;
    t.rmr_free_func = &rmr_free;
    t.rsp_create_func = &rsp_create;
    t.rsp_query_func = &rsp_query;
    t.rsp_free_func = &rsp_free;
    t.ep_create_with_srq_func = &ep_create_with_srq;
    t.ep_recv_query_func = &ep_recv_query;
    t.ep_set_watermark_func = &ep_set_watermark;
    t.srq_create_func = &srq_create;
    t.srq_free_func = &srq_free;
    t.srq_post_recv_func = &srq_post_recv;
    t.srq_query_func = &srq_query;
    t.srq_resize_func = &srq_resize;
    t.srq_set_lw_func = &srq_set_lw;
    t.csp_create_func = &csp_create;
    t.csp_query_func = &csp_query;
    t.csp_free_func = &csp_free;
    t.ep_common_connect_func = &ep_common_connect;
    t.rmr_create_for_ep_func = &rmr_create_for_ep;
    t.ep_post_send_with_invalidate_func = &ep_post_send_with_invalidate;
    t.ep_post_rdma_read_to_rmr_func = &ep_post_rdma_read_to_rmr;
    t.cno_fd_create_func = &cno_fd_create;
    t.cno_trigger_func = &cno_trigger;
    t.ia_ha_related_func = &ia_ha_related;
    t.handle_extendedop_func = &extended_op;
}


} // namespace

extern "C" FASTDAPL_EXPORT void dat_provider_init(const DAT_PROVIDER_INFO* info, const char* instance_data)
{
    if (!info)
        return;
    // rdma-core's libraries keep process-wide state (device and driver
    // lists, librdmacm's contexts) and are not made to be unloaded and
    // loaded again: they stay when the registry closes this provider.
    for (const char* lib : {"libibverbs.so.1", "librdmacm.so.1"})
        dlopen(lib, RTLD_NOW | RTLD_NODELETE | RTLD_NOLOAD);
    auto reg = std::make_unique<Registration>();
    reg->info = *info;
    reg->name.assign(info->ia_name, strnlen(info->ia_name, DAT_NAME_MAX_LENGTH));
    reg->ia_params = instance_data ? instance_data : "";
    fill_table(reg->table, reg->name.c_str());
    Registration* raw = reg.get();
    {
        std::lock_guard lock(g_registrations_mutex);
        if (g_registrations.count(reg->name))
            return;
        g_registrations[reg->name] = std::move(reg);
    }
    if (dat_registry_add_provider(&raw->table, &raw->info) != DAT_SUCCESS) {
        std::lock_guard lock(g_registrations_mutex);
        g_registrations.erase(raw->name); // leave no entry behind on failure
    }
}

extern "C" FASTDAPL_EXPORT void dat_provider_fini(const DAT_PROVIDER_INFO* info)
{
    if (!info)
        return;
    std::lock_guard lock(g_registrations_mutex);
    auto it = g_registrations.find(std::string(info->ia_name, strnlen(info->ia_name, DAT_NAME_MAX_LENGTH)));
    if (it == g_registrations.end())
        return;
    // Our registry stops routing to a table once it is removed (it checks
    // every handle's table against the registered ones), so it can go.
    dat_registry_remove_provider(&it->second->table, &it->second->info);
    g_registrations.erase(it);
}
