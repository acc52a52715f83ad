/* fastdapl.h: what the fastdapl provider adds where uDAPL 2.0 names no value.
 *
 * Include it after <dat2/udat.h>. Nothing here changes the uDAPL ABI.
 *
 * SPDX-License-Identifier: BSD-3-Clause
 * Copyright (c) 2026 the fastdapl authors
 */
#ifndef _FASTDAPL_H_
#define _FASTDAPL_H_

/* The asynchronous event of a receive watermark, on the IA's async EVD.
 * uDAPL 2.0 defines the reasons but no event number for them:
 *   event_data.asynch_error_event_data.dat_handle = the SRQ or the EP,
 *   event_data.asynch_error_event_data.reason =
 *     DAT_SRQ_LOW_WATERMARK_EVENT        (dat_handle is an SRQ: dat_srq_set_lw)
 *     DAT_SRQ_SOFT_HIGH_WATERMARK_EVENT  (dat_handle is an EP: dat_ep_set_watermark)
 * The two reasons come from different enums and share the value 2: tell
 * them apart by the handle's type (dat_get_handle_type). It lies in the
 * asynchronous-error range (0x08xxx), above the numbers uDAPL uses. */
#define FASTDAPL_ASYNC_WATERMARK_EVENT 0x08100

/* DAT_PROVIDER_ATTR.srq_watermarks_supported bits (uDAPL 2.0 6.2.1.2 gives
 * the values but no names). */
#define FASTDAPL_SRQ_WATERMARK_LOW 0x001
#define FASTDAPL_EP_WATERMARK_SOFT_HIGH 0x010
#define FASTDAPL_EP_WATERMARK_HARD_HIGH 0x0100

/* DAT_PROVIDER_ATTR.srq_info_supported bits. */
#define FASTDAPL_SRQ_INFO_AVAILABLE 0x01
#define FASTDAPL_SRQ_INFO_OUTSTANDING 0x10

/* DAT_PROVIDER_ATTR.ep_recv_info_supported bits. */
#define FASTDAPL_EP_RECV_INFO_NBUFS 0x01
#define FASTDAPL_EP_RECV_INFO_SPAN 0x10

#endif /* _FASTDAPL_H_ */
