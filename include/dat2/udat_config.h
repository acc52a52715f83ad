/* udat_config.h: the API version and build options a uDAPL consumer compiles with.
 *
 * SPDX-License-Identifier: BSD-3-Clause
 * Copyright (c) 2026 the fastdapl authors
 */
#ifndef _UDAT_CONFIG_H_
#define _UDAT_CONFIG_H_

/* dat_ia_open asks the registry for this API version. */
#define DAT_VERSION_MAJOR 2
#define DAT_VERSION_MINOR 0

/* Linux consumers ask for non-thread-safe providers unless they define
 * DAT_THREADSAFE to DAT_TRUE before including udat.h; dat.conf entries are
 * matched on it. */
#ifndef DAT_THREADSAFE
#define DAT_THREADSAFE DAT_FALSE
#endif

/* The extension fields of the API's structures are always present in the
 * Linux ABI. */
#ifndef DAT_EXTENSIONS
#define DAT_EXTENSIONS 1
#endif

#endif /* _UDAT_CONFIG_H_ */
