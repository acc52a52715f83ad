/* dat_vendor_specific.h: a place for vendor additions shared by uDAPL and kDAPL.
 *
 * SPDX-License-Identifier: BSD-3-Clause
 * Copyright (c) 2026 the fastdapl authors
 */
#ifndef _DAT_VENDOR_SPECIFIC_H_
#define _DAT_VENDOR_SPECIFIC_H_

/* No vendor defines anything here today; the file exists because consumers
 * and the include chain of the Linux headers expect it. */

#endif /* _DAT_VENDOR_SPECIFIC_H_ */
