/* dat_platform_specific.h: the basic DAT types for Linux (x86-64 and other LP64/ILP32 targets).
 *
 * SPDX-License-Identifier: BSD-3-Clause
 * Copyright (c) 2026 the fastdapl authors
 */
#ifndef _DAT_PLATFORM_SPECIFIC_H_
#define _DAT_PLATFORM_SPECIFIC_H_

/* Buffers aligned to this many bytes transfer fastest. */
#ifndef DAT_OPTIMAL_ALIGNMENT
#define DAT_OPTIMAL_ALIGNMENT 256
#endif

#if !defined(__linux__)
#error "fastdapl's DAT headers support Linux only"
#endif

#if defined(__KERNEL__)
#include <linux/types.h>
#include <linux/socket.h>
#include <linux/in.h>
#include <linux/in6.h>
#else
/* The reference headers include these too; consumers rely on them.
 * <stdint.h> is left out on purpose: UINT64_C below must be the ULL form
 * the Linux headers define, not glibc's UL one. */
#include <sys/types.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/socket.h>
#endif

typedef u_int32_t DAT_UINT32;
typedef u_int64_t DAT_UINT64;
typedef unsigned long long DAT_UVERYLONG;

typedef void *DAT_PVOID;
typedef int DAT_COUNT;
typedef DAT_UINT64 DAT_PADDR;

#ifndef UINT64_C
#define UINT64_C(c) c##ULL
#endif

/* IA handles given to consumers may be table indices rather than
 * pointers; registries convert with these. */
#define DAT_IA_HANDLE_TO_UL(a) (unsigned long)(a)
#define DAT_UL_TO_IA_HANDLE(a) (DAT_IA_HANDLE)(a)

/* The socket triple of a DAT_COMM (see dat_csp_create). */
typedef struct dat_comm {
    int domain;
    int type;
    int protocol;
} DAT_COMM;

typedef int DAT_FD;

/* IA addresses are socket addresses; DAT_SOCK_ADDR6 is complete only where
 * <netinet/in.h> has been included. */
typedef struct sockaddr DAT_SOCK_ADDR;
typedef struct sockaddr_in6 DAT_SOCK_ADDR6;
#define DAT_AF_INET AF_INET
#define DAT_AF_INET6 AF_INET6

/* No calling-convention decoration on Linux. */
#define DAT_API
#define DAT_EXPORT extern

/* Parameter direction markers used in declarations; they expand to nothing. */
#ifndef IN
#define IN
#endif
#ifndef OUT
#define OUT
#endif
#ifndef INOUT
#define INOUT
#endif

#endif /* _DAT_PLATFORM_SPECIFIC_H_ */
