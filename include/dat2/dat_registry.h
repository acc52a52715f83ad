/* dat_registry.h: the interface between the DAT registry and providers.
 *
 * SPDX-License-Identifier: BSD-3-Clause
 * Copyright (c) 2026 the fastdapl authors
 */
#ifndef _DAT_REGISTRY_H_
#define _DAT_REGISTRY_H_

#ifdef __cplusplus
extern "C" {
#endif

/* The provider table differs between user and kernel DAPL, so the consumer
 * flavour must be known before this header. */
#if defined(_UDAT_H_)
#include <dat2/udat_redirection.h>
#elif defined(_KDAT_H_)
#include <dat2/kdat_redirection.h>
#else
#error "include <dat2/udat.h> (or kdat.h) before <dat2/dat_registry.h>"
#endif

/* Called by a provider (usually from dat_provider_init) to offer an IA
 * name, and to withdraw it (usually from dat_provider_fini). */
extern DAT_RETURN DAT_API dat_registry_add_provider(const DAT_PROVIDER *provider,
                                                    const DAT_PROVIDER_INFO *provider_info);

extern DAT_RETURN DAT_API dat_registry_remove_provider(const DAT_PROVIDER *provider,
                                                       const DAT_PROVIDER_INFO *provider_info);

/* The two symbols a loadable provider library exports; the registry finds
 * them with dlsym. */
#define DAT_PROVIDER_INIT_FUNC_NAME dat_provider_init
#define DAT_PROVIDER_FINI_FUNC_NAME dat_provider_fini
#define DAT_PROVIDER_INIT_FUNC_STR "dat_provider_init"
#define DAT_PROVIDER_FINI_FUNC_STR "dat_provider_fini"

/* init receives the dat.conf entry's identity and its instance data string. */
typedef void(DAT_API *DAT_PROVIDER_INIT_FUNC)(const DAT_PROVIDER_INFO *provider_info,
                                              const char *instance_data);

typedef void(DAT_API *DAT_PROVIDER_FINI_FUNC)(const DAT_PROVIDER_INFO *provider_info);

/* Whether two IAs share hardware (for consumers building their own
 * failover): see dat_registry_providers_related. */
typedef enum dat_ha_relationship {
    DAT_HA_FALSE,
    DAT_HA_TRUE,
    DAT_HA_UNKNOWN,
    DAT_HA_CONFLICTING,
    DAT_HA_EXTENSION_BASE
} DAT_HA_RELATIONSHIP;

extern DAT_RETURN DAT_API dat_registry_providers_related(const DAT_NAME_PTR ia1_name,
                                                         const DAT_NAME_PTR ia2_name,
                                                         DAT_HA_RELATIONSHIP *relationship);

#ifdef __cplusplus
}
#endif

#endif /* _DAT_REGISTRY_H_ */
