// Test-only DAT provider library: registers the IA name it is loaded for and records every call.
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
//
// ia_params (from dat.conf) select behaviour, space separated:
//   fail_open      ia_open returns DAT_INVALID_ADDRESS | DAT_INVALID_ADDRESS_UNREACHABLE
//   no_register    dat_provider_init does not register (a broken provider)
//   null_funcs     every function but ia_open/ia_query/ia_close is NULL
//   related=0|1    the answer of ia_ha_related (absent: it fails)
//   register_as=N  registers under the IA name N instead of its own (a broken provider)
//   no_close       ia_close is NULL
#include "recording_provider.hpp"

#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>

namespace {

struct HandleObject {
    DAT_PROVIDER* provider; // first word, as every DAT handle
    int kind;
};

struct Slot {
    bool used = false;
    DAT_PROVIDER table{};
    DAT_PROVIDER_INFO info{};
    char name[DAT_NAME_MAX_LENGTH] = {};
    HandleObject ia{};
    HandleObject object{};
    bool fail_open = false;
    int related = -1;
};

Slot g_slots[16];
std::mutex g_mutex;

Slot* slot_of(const DAT_PROVIDER* p)
{
    for (auto& s : g_slots)
        if (s.used && &s.table == p)
            return &s;
    return nullptr;
}

DAT_RETURN ia_open(const DAT_NAME_PTR name, DAT_COUNT qlen, DAT_EVD_HANDLE* async_evd, DAT_IA_HANDLE* ia)
{
    TestprovCall c{};
    c.function = "ia_open_func";
    c.nargs = 4;
    c.args[0] = testprov::raw_bits(name);
    c.args[1] = static_cast<std::uint64_t>(qlen);
    c.args[2] = testprov::raw_bits(async_evd);
    c.args[3] = testprov::raw_bits(ia);
    testprov_record(&c);
    std::lock_guard lock(g_mutex);
    for (auto& s : g_slots) {
        if (!s.used || std::strcmp(s.name, name) != 0)
            continue;
        if (s.fail_open)
            return DAT_CLASS_ERROR | DAT_INVALID_ADDRESS | DAT_INVALID_ADDRESS_UNREACHABLE;
        *ia = &s.ia;
        return DAT_SUCCESS;
    }
    return DAT_CLASS_ERROR | DAT_INTERNAL_ERROR;
}

DAT_RETURN ia_ha_related(DAT_IA_HANDLE ia, const DAT_NAME_PTR other, DAT_BOOLEAN* answer)
{
    TestprovCall c{};
    c.function = "ia_ha_related_func";
    c.nargs = 2;
    c.args[0] = testprov::raw_bits(ia);
    c.args[1] = testprov::raw_bits(other);
    testprov_record(&c);
    const auto* obj = static_cast<const HandleObject*>(ia);
    Slot* s = slot_of(obj->provider);
    if (!s || s->related < 0)
        return DAT_CLASS_ERROR | DAT_MODEL_NOT_SUPPORTED;
    *answer = s->related ? DAT_TRUE : DAT_FALSE;
    return DAT_SUCCESS;
}

} // namespace

extern "C" __attribute__((visibility("default"))) void dat_provider_init(const DAT_PROVIDER_INFO* info,
                                                                         const char* instance_data)
{
    testprov_count_init(info->ia_name, 0);
    testprov_set_instance_data(info->ia_name, instance_data);
    const std::string params = instance_data ? instance_data : "";
    if (params.find("no_register") != std::string::npos)
        return;
    Slot* slot = nullptr;
    {
        std::lock_guard lock(g_mutex);
        for (auto& s : g_slots)
            if (!s.used && !slot)
                slot = &s;
        if (!slot)
            return;
        *slot = Slot{};
        slot->used = true;
        std::memcpy(slot->name, info->ia_name, sizeof slot->name); // both DAT_NAME_MAX_LENGTH
        slot->name[sizeof slot->name - 1] = '\0';
        slot->info = *info;
        slot->fail_open = params.find("fail_open") != std::string::npos;
        if (params.find("related=1") != std::string::npos)
            slot->related = 1;
        else if (params.find("related=0") != std::string::npos)
            slot->related = 0;
        testprov::fill_recording_table(slot->table);
        if (params.find("null_funcs") != std::string::npos) {
            DAT_PROVIDER bare{};
            bare.ia_query_func = slot->table.ia_query_func;
            bare.ia_close_func = slot->table.ia_close_func;
            slot->table = bare;
        } else {
            slot->table.ia_ha_related_func = &ia_ha_related;
        }
        if (const auto at = params.find("register_as="); at != std::string::npos) {
            const std::string alias = params.substr(at + 12, params.find(' ', at) - at - 12);
            std::snprintf(slot->name, sizeof slot->name, "%s", alias.c_str());
            std::memcpy(slot->info.ia_name, slot->name, sizeof slot->name);
        }
        if (params.find("no_close") != std::string::npos)
            slot->table.ia_close_func = nullptr;
        slot->table.device_name = slot->name;
        slot->table.ia_open_func = &ia_open;
        slot->ia = {&slot->table, 1};
        slot->object = {&slot->table, 2};
    }
    if (dat_registry_add_provider(&slot->table, &slot->info) != DAT_SUCCESS) {
        std::lock_guard lock(g_mutex);
        slot->used = false;
        return;
    }
    testprov_set_handle(info->ia_name, &slot->object);
}

extern "C" __attribute__((visibility("default"))) void dat_provider_fini(const DAT_PROVIDER_INFO* info)
{
    testprov_count_init(info->ia_name, 1);
    testprov_set_handle(info->ia_name, nullptr);
    std::lock_guard lock(g_mutex);
    for (auto& s : g_slots) {
        if (s.used && std::strcmp(s.name, info->ia_name) == 0 &&
            s.info.dapl_version_minor == info->dapl_version_minor) {
            dat_registry_remove_provider(&s.table, &s.info);
            s.used = false;
        }
    }
}
