/* udat_vendor_specific.h: a place for vendor additions to uDAPL.
 *
 * SPDX-License-Identifier: BSD-3-Clause
 * Copyright (c) 2026 the fastdapl authors
 */
#ifndef _UDAT_VENDOR_SPECIFIC_H_
#define _UDAT_VENDOR_SPECIFIC_H_

#include <dat2/dat_vendor_specific.h>

/* Empty, like its shared counterpart: kept for the include chain. */

#endif /* _UDAT_VENDOR_SPECIFIC_H_ */
