/* dat_registry.h: the interface between the DAT registry (libdat2) and provider libraries.
 *
 * SPDX-License-Identifier: BSD-3-Clause
 * Copyright (c) 2026 the fastdapl authors
 */
#ifndef _DAT_REGISTRY_H_
#define _DAT_REGISTRY_H_

/* Providers include this; consumers need only <dat2/udat.h>. The table's
 * shape depends on the flavour (user or kernel), so the flavour header
 * must already have been included. */
#if defined(_UDAT_H_)
#include <dat2/udat_redirection.h>
#elif defined(_KDAT_H_)
#include <dat2/kdat_redirection.h>
#else
#error "dat_registry.h needs <dat2/udat.h> or <dat2/kdat.h> included first"
#endif

#ifdef __cplusplus
extern "C" {
#endif

/*
 * A provider announces each IA name it serves with add_provider, normally
 * from dat_provider_init, and withdraws it with remove_provider before the
 * library goes away. The info is what consumers' opens are matched
 * against (IA name, API version, thread safety); a library loaded from
 * dat.conf normally passes on the info its init received. The registry
 * keeps the table pointer, so the table must outlive the registration.
 */
extern DAT_RETURN DAT_API dat_registry_add_provider(
    const DAT_PROVIDER *provider,
    const DAT_PROVIDER_INFO *provider_info);

extern DAT_RETURN DAT_API dat_registry_remove_provider(
    const DAT_PROVIDER *provider,
    const DAT_PROVIDER_INFO *provider_info);

/*
 * Entry points of a provider library loaded on demand from dat.conf. The
 * registry looks them up by the *_STR names: init runs before the first
 * open of an IA name the library serves and gets the entry's identity and
 * its instance data string (dat.conf field 7); fini runs after the last
 * close, before the library is unloaded.
 */
#define DAT_PROVIDER_INIT_FUNC_NAME dat_provider_init
#define DAT_PROVIDER_FINI_FUNC_NAME dat_provider_fini

#define DAT_PROVIDER_INIT_FUNC_STR "dat_provider_init"
#define DAT_PROVIDER_FINI_FUNC_STR "dat_provider_fini"

typedef void (DAT_API *DAT_PROVIDER_INIT_FUNC)(
    const DAT_PROVIDER_INFO *provider_info,
    const char *instance_data);

typedef void (DAT_API *DAT_PROVIDER_FINI_FUNC)(
    const DAT_PROVIDER_INFO *provider_info);

/* Whether two IAs fail together (share an adapter, port or path); consumers
 * use it to pick independent IAs for failover. CONFLICTING means the two
 * providers gave different answers. */
typedef enum dat_ha_relationship {
    DAT_HA_FALSE = 0,
    DAT_HA_TRUE = 1,
    DAT_HA_UNKNOWN = 2,
    DAT_HA_CONFLICTING = 3,
    DAT_HA_EXTENSION_BASE = 4
} DAT_HA_RELATIONSHIP;

extern DAT_RETURN DAT_API dat_registry_providers_related(
    const DAT_NAME_PTR ia_name,
    const DAT_NAME_PTR other_ia_name,
    DAT_HA_RELATIONSHIP *relationship);

#ifdef __cplusplus
}
#endif

#endif /* _DAT_REGISTRY_H_ */
