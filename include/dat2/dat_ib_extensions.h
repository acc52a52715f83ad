/* dat_ib_extensions.h: fastdapl's InfiniBand extensions to the uDAPL 2.0 API.
 *
 * SPDX-License-Identifier: BSD-3-Clause
 * Copyright (c) 2026 the fastdapl authors
 *
 * Binary compatible with the Linux reference's extension interface 2.0.9 on
 * x86-64. Every extended operation goes through the varargs
 * dat_extension_op(handle, op, ...); the dat_ib_* macros below fix the
 * argument list of each one.
 *
 * All enumerators fit in int, so the enums are plain enums (4 bytes each,
 * as in the reference); nothing needs a wider representation.
 */
#ifndef _DAT_IB_EXTENSIONS_H_
#define _DAT_IB_EXTENSIONS_H_

/* The reference leaves these to the consumer; we pull them in so that the
 * header compiles on its own (sockaddr_in6 sits in DAT_IB_ADDR_HANDLE). */
#include <dat2/udat.h>
#if !defined(__KERNEL__)
#include <netinet/in.h>
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Interface version, 2.0.9, as a provider reports it in its attributes. */
#define DAT_IB_EXTENSION_VERSION 209

/* Provider attribute names (dat_ia_query, provider-specific attributes)
 * announcing the extended capabilities. */
#define DAT_IB_ATTR_COUNTERS         "DAT_COUNTERS"
#define DAT_IB_ATTR_FETCH_AND_ADD    "DAT_IB_FETCH_AND_ADD"
#define DAT_IB_ATTR_CMP_AND_SWAP     "DAT_IB_CMP_AND_SWAP"
#define DAT_IB_ATTR_IMMED_DATA       "DAT_IB_IMMED_DATA"
#define DAT_IB_ATTR_UD               "DAT_IB_UD"

#define DAT_IB_COLL_SET_CLOCK        "DAT_COLL_SET_CLOCK"
#define DAT_IB_COLL_READ_CLOCK       "DAT_COLL_READ_CLOCK"
#define DAT_IB_COLL_BROADCAST        "DAT_COLL_BROADCAST"
#define DAT_IB_COLL_BARRIER          "DAT_COLL_BARRIER"
#define DAT_IB_COLL_SCATTER          "DAT_COLL_SCATTER"
#define DAT_IB_COLL_SCATTERV         "DAT_COLL_SCATTERV"
#define DAT_IB_COLL_GATHER           "DAT_COLL_GATHER"
#define DAT_IB_COLL_GATHERV          "DAT_COLL_GATHERV"
#define DAT_IB_COLL_ALLGATHER        "DAT_COLL_ALLGATHER"
#define DAT_IB_COLL_ALLGATHERV       "DAT_COLL_ALLGATHERV"
#define DAT_IB_COLL_ALLTOALL         "DAT_COLL_ALLTOALL"
#define DAT_IB_COLL_ALLTOALLV        "DAT_COLL_ALLTOALLV"
#define DAT_IB_COLL_REDUCE           "DAT_COLL_REDUCE"
#define DAT_IB_COLL_ALLREDUCE        "DAT_COLL_ALLREDUCE"
#define DAT_IB_COLL_REDUCE_SCATTER   "DAT_COLL_REDUCE_SCATTER"
#define DAT_IB_COLL_SCAN             "DAT_COLL_SCAN"

/* A collective group, as returned in its creation event. */
typedef DAT_HANDLE DAT_IB_COLLECTIVE_HANDLE;

/* ------------------------------------------------------------------ */
/* Codes                                                              */
/* ------------------------------------------------------------------ */

/* DAT_EVENT.event_number of extended events. Completions of extended
 * operations all arrive as DAT_IB_DTO_EVENT; the others are UD connection
 * management and collective events. */
typedef enum dat_ib_event_number {
    DAT_IB_DTO_EVENT = DAT_IB_EXTENSION_RANGE_BASE,
    DAT_IB_UD_CONNECTION_REQUEST_EVENT,
    DAT_IB_UD_CONNECTION_EVENT_ESTABLISHED,
    DAT_IB_UD_CONNECTION_REJECT_EVENT,
    DAT_IB_UD_CONNECTION_ERROR_EVENT,
    DAT_IB_COLLECTIVE_EVENT
} DAT_IB_EVENT_NUMBER;

/* The op argument of dat_extension_op. The open/close query pair lives at
 * the bases the core API reserves for handle-less extension calls. */
typedef enum dat_ib_op {
    DAT_IB_FETCH_AND_ADD_OP,
    DAT_IB_CMP_AND_SWAP_OP,
    DAT_IB_RDMA_WRITE_IMMED_OP,
    DAT_IB_UD_SEND_OP,
    DAT_IB_QUERY_COUNTERS_OP,
    DAT_IB_PRINT_COUNTERS_OP,
    DAT_IB_COLLECTIVE_CREATE_MEMBER_OP,
    DAT_IB_COLLECTIVE_FREE_MEMBER_OP,
    DAT_IB_COLLECTIVE_CREATE_GROUP_OP,
    DAT_IB_COLLECTIVE_FREE_GROUP_OP,
    DAT_IB_COLLECTIVE_SET_CLOCK_OP,
    DAT_IB_COLLECTIVE_READ_CLOCK_OP,
    DAT_IB_COLLECTIVE_SCATTER_OP,
    DAT_IB_COLLECTIVE_SCATTERV_OP,
    DAT_IB_COLLECTIVE_GATHER_OP,
    DAT_IB_COLLECTIVE_GATHERV_OP,
    DAT_IB_COLLECTIVE_ALLGATHER_OP,
    DAT_IB_COLLECTIVE_ALLGATHERV_OP,
    DAT_IB_COLLECTIVE_ALLTOALL_OP,
    DAT_IB_COLLECTIVE_ALLTOALLV_OP,
    DAT_IB_COLLECTIVE_REDUCE_OP,
    DAT_IB_COLLECTIVE_ALLREDUCE_OP,
    DAT_IB_COLLECTIVE_REDUCE_SCATTER_OP,
    DAT_IB_COLLECTIVE_SCAN_OP,
    DAT_IB_COLLECTIVE_BROADCAST_OP,
    DAT_IB_COLLECTIVE_BARRIER_OP,
    DAT_IB_START_COUNTERS_OP,
    DAT_IB_STOP_COUNTERS_OP,
    DAT_IB_UD_CM_FREE_OP,
    DAT_IB_UD_AH_FREE_OP,
    DAT_IB_OPEN_QUERY_OP = DAT_OPEN_EXTENSION_BASE,
    DAT_IB_CLOSE_QUERY_OP = DAT_CLOSE_EXTENSION_BASE
} DAT_IB_OP;

/* DAT_IB_EXTENSION_EVENT_DATA.type: which extended operation or
 * notification an event carries. */
typedef enum dat_ib_ext_type {
    DAT_IB_FETCH_AND_ADD,                       /*  0 */
    DAT_IB_CMP_AND_SWAP,
    DAT_IB_RDMA_WRITE_IMMED,
    DAT_IB_RDMA_WRITE_IMMED_DATA,
    DAT_IB_RECV_IMMED_DATA,
    DAT_IB_UD_CONNECT_REQUEST,                  /*  5 */
    DAT_IB_UD_REMOTE_AH,
    DAT_IB_UD_PASSIVE_REMOTE_AH,
    DAT_IB_UD_SEND,
    DAT_IB_UD_RECV,
    DAT_IB_UD_CONNECT_REJECT,                   /* 10 */
    DAT_IB_UD_CONNECT_ERROR,
    DAT_IB_COLLECTIVE_CREATE_STATUS,
    DAT_IB_COLLECTIVE_CREATE_DATA,
    DAT_IB_COLLECTIVE_CLOCK_SET_STATUS,
    DAT_IB_COLLECTIVE_SCATTER_STATUS,           /* 15 */
    DAT_IB_COLLECTIVE_SCATTERV_STATUS,
    DAT_IB_COLLECTIVE_GATHER_STATUS,
    DAT_IB_COLLECTIVE_GATHERV_STATUS,
    DAT_IB_COLLECTIVE_ALLGATHER_STATUS,
    DAT_IB_COLLECTIVE_ALLGATHERV_STATUS,        /* 20 */
    DAT_IB_COLLECTIVE_ALLTOALL_STATUS,
    DAT_IB_COLLECTIVE_ALLTOALLV_STATUS,
    DAT_IB_COLLECTIVE_REDUCE_STATUS,
    DAT_IB_COLLECTIVE_ALLREDUCE_STATUS,
    DAT_IB_COLLECTIVE_REDUCE_SCATTER_STATUS,    /* 25 */
    DAT_IB_COLLECTIVE_SCAN_STATUS,
    DAT_IB_COLLECTIVE_BROADCAST_STATUS,
    DAT_IB_COLLECTIVE_BARRIER_STATUS            /* 28 */
} DAT_IB_EXT_TYPE;

/* DAT_IB_EXTENSION_EVENT_DATA.status. */
typedef enum dat_ib_status {
    DAT_OP_SUCCESS = DAT_SUCCESS,
    DAT_IB_OP_ERR,
    DAT_IB_COLL_COMP_ERR
} DAT_IB_STATUS;

/* Return types beyond the core ones, in the type bits of a DAT_RETURN. */
typedef enum dat_ib_return {
    DAT_IB_ERR = DAT_EXTENSION_BASE,
    DAT_IB_COLLECTIVE_ERR
} DAT_IB_RETURN;

/* DAT_DTO_COMPLETION_EVENT_DATA.operation values of extended transfers. */
typedef enum dat_ib_dtos {
    DAT_IB_DTO_RDMA_WRITE_IMMED = DAT_DTO_EXTENSION_BASE,
    DAT_IB_DTO_RECV_IMMED,
    DAT_IB_DTO_FETCH_ADD,
    DAT_IB_DTO_CMP_SWAP,
    DAT_IB_DTO_RECV_MSG_IMMED,
    DAT_IB_DTO_SEND_UD,
    DAT_IB_DTO_RECV_UD,
    DAT_IB_DTO_RECV_UD_IMMED,
    DAT_IB_DTO_COLLECTIVES
} DAT_IB_DTOS;

/* Handle types reported by dat_get_handle_type for extension objects. */
typedef enum dat_ib_handle_type {
    DAT_IB_HANDLE_TYPE_EXT = DAT_HANDLE_TYPE_EXTENSION_BASE,
    DAT_IB_HANDLE_TYPE_COLLECTIVE
} DAT_IB_HANDLE_TYPE;

/* EVD flag for an EVD that takes extended (e.g. collective) events. */
typedef enum dat_ib_evd_extension_flags {
    DAT_IB_EVD_EXTENSION_FLAG = DAT_EVD_EXTENSION_BASE
} DAT_IB_EVD_EXTENSION_FLAGS;

/* Memory privilege a region needs to be the target of atomics. */
typedef enum dat_ib_mem_priv_flags {
    DAT_IB_MEM_PRIV_REMOTE_ATOMIC = DAT_MEM_PRIV_EXTENSION_BASE
} DAT_IB_MEM_PRIV_FLAGS;

/* EP service type of unreliable datagram endpoints. */
typedef enum dat_ib_service_type {
    DAT_IB_SERVICE_TYPE_UD = DAT_SERVICE_TYPE_EXTENSION_BASE
} DAT_IB_SERVICE_TYPE;

/* ------------------------------------------------------------------ */
/* Event data                                                         */
/* ------------------------------------------------------------------ */

/* A UD destination: the verbs address handle, the remote QP number and
 * the peer's IP address. Handed out by UD connection events and passed
 * back to dat_ib_post_send_ud. */
typedef struct dat_ib_addr_handle {
    struct ibv_ah *ah;
    DAT_UINT32 qpn;
    DAT_SOCK_ADDR6 ia_addr;
} DAT_IB_ADDR_HANDLE;

typedef struct dat_ib_immed_data {
    DAT_UINT32 data;
} DAT_IB_IMMED_DATA;

typedef struct dat_ib_collective_event_data {
    DAT_HANDLE handle;
    DAT_CONTEXT context;
} DAT_IB_COLLECTIVE_EVENT_DATA;

/* What DAT_EVENT.event_extension_data holds for extended events; it must
 * stay within that 64-byte area. For UD connection events, remote_ah is
 * the peer and context the CM object to give to dat_ib_ud_cm_free. */
typedef struct dat_ib_extension_event_data {
    DAT_IB_EXT_TYPE type;
    DAT_IB_STATUS status;
    union {
        DAT_IB_IMMED_DATA immed;
    } val;
    /* Unnamed in the reference too (consumers write ext->remote_ah).
     * C99 has no anonymous members; __extension__ marks this one as the
     * GNU/C11 feature so that -pedantic C99 builds stay quiet. */
    __extension__ union {
        DAT_IB_ADDR_HANDLE remote_ah;
        DAT_IB_COLLECTIVE_EVENT_DATA coll;
    };
    DAT_CONTEXT context;
} DAT_IB_EXTENSION_EVENT_DATA;

/* ------------------------------------------------------------------ */
/* Counters                                                           */
/* ------------------------------------------------------------------ */

/* Per-IA counters; DCNT_IA_ALL_COUNTERS (the count) selects all of them. */
typedef enum dat_ia_counters {
    /* object lifetimes */
    DCNT_IA_PZ_CREATE,
    DCNT_IA_PZ_FREE,
    DCNT_IA_LMR_CREATE,
    DCNT_IA_LMR_FREE,
    DCNT_IA_RMR_CREATE,
    DCNT_IA_RMR_FREE,
    DCNT_IA_PSP_CREATE,
    DCNT_IA_PSP_CREATE_ANY,
    DCNT_IA_PSP_FREE,
    DCNT_IA_RSP_CREATE,
    DCNT_IA_RSP_FREE,
    DCNT_IA_EVD_CREATE,
    DCNT_IA_EVD_FREE,
    DCNT_IA_EP_CREATE,
    DCNT_IA_EP_FREE,
    DCNT_IA_SRQ_CREATE,
    DCNT_IA_SRQ_FREE,
    DCNT_IA_SP_CR,
    DCNT_IA_SP_CR_ACCEPTED,
    DCNT_IA_SP_CR_REJECTED,
    DCNT_IA_MEM_ALLOC,
    DCNT_IA_MEM_ALLOC_DATA,
    DCNT_IA_MEM_FREE,
    DCNT_IA_ASYNC_ERROR,
    DCNT_IA_ASYNC_QP_ERROR,
    DCNT_IA_ASYNC_CQ_ERROR,
    /* connection manager */
    DCNT_IA_CM_LISTEN,
    DCNT_IA_CM_REQ_TX,
    DCNT_IA_CM_REQ_RX,
    DCNT_IA_CM_REP_TX,
    DCNT_IA_CM_REP_RX,
    DCNT_IA_CM_RTU_TX,
    DCNT_IA_CM_RTU_RX,
    DCNT_IA_CM_USER_REJ_TX,
    DCNT_IA_CM_USER_REJ_RX,
    DCNT_IA_CM_ACTIVE_EST,
    DCNT_IA_CM_PASSIVE_EST,
    DCNT_IA_CM_AH_REQ_TX,
    DCNT_IA_CM_AH_REQ_RX,
    DCNT_IA_CM_AH_RESOLVED,
    DCNT_IA_CM_DREQ_TX,
    DCNT_IA_CM_DREQ_RX,
    DCNT_IA_CM_DREP_TX,
    DCNT_IA_CM_DREP_RX,
    DCNT_IA_CM_MRA_TX,
    DCNT_IA_CM_MRA_RX,
    DCNT_IA_CM_REQ_FULLQ_POLL,
    DCNT_IA_CM_ERR,
    DCNT_IA_CM_ERR_REQ_FULLQ,
    DCNT_IA_CM_ERR_REQ_DUP,
    DCNT_IA_CM_ERR_REQ_RETRY,
    DCNT_IA_CM_ERR_REP_DUP,
    DCNT_IA_CM_ERR_REP_RETRY,
    DCNT_IA_CM_ERR_RTU_DUP,
    DCNT_IA_CM_ERR_RTU_RETRY,
    DCNT_IA_CM_ERR_REFUSED,
    DCNT_IA_CM_ERR_RESET,
    DCNT_IA_CM_ERR_TIMEOUT,
    DCNT_IA_CM_ERR_REJ_TX,
    DCNT_IA_CM_ERR_REJ_RX,
    DCNT_IA_CM_ERR_DREQ_DUP,
    DCNT_IA_CM_ERR_DREQ_RETRY,
    DCNT_IA_CM_ERR_DREP_DUP,
    DCNT_IA_CM_ERR_DREP_RETRY,
    DCNT_IA_CM_ERR_MRA_DUP,
    DCNT_IA_CM_ERR_MRA_RETRY,
    DCNT_IA_CM_ERR_UNEXPECTED,
    /* port link errors (sampled, see dat_ib_start_counter) */
    DCNT_IA_LNK_ERR_RCV,
    DCNT_IA_LNK_ERR_RCV_REM_PHYS,
    DCNT_IA_LNK_ERR_RCV_CONSTRAINT,
    DCNT_IA_LNK_ERR_XMT_DISCARDS,
    DCNT_IA_LNK_ERR_XMT_CONTRAINT,      /* sic: the reference's spelling */
    DCNT_IA_LNK_ERR_INTEGRITY,
    DCNT_IA_LNK_ERR_EXC_BUF_OVERRUN,
    DCNT_IA_LNK_WARN_RCV_SW_RELAY,
    DCNT_IA_LNK_WARN_XMT_WAIT,
    /* device diagnostics (sampled) */
    DCNT_IA_DIAG_ERR_RQ_RAE,
    DCNT_IA_DIAG_ERR_RQ_OOS,
    DCNT_IA_DIAG_ERR_RQ_RIRE,
    DCNT_IA_DIAG_ERR_RQ_UDSDPRD,
    DCNT_IA_DIAG_ERR_SQ_RAE,
    DCNT_IA_DIAG_ERR_SQ_OOS,
    DCNT_IA_DIAG_ERR_SQ_RIRE,
    DCNT_IA_DIAG_ERR_SQ_RREE,
    DCNT_IA_DIAG_ERR_SQ_TREE,
    DCNT_IA_ALL_COUNTERS
} DAT_IA_COUNTERS;

/* Per-EP counters; DCNT_EP_ALL_COUNTERS is the count. */
typedef enum dat_ep_counters {
    DCNT_EP_CONNECT,
    DCNT_EP_DISCONNECT,
    DCNT_EP_POST_SEND,
    DCNT_EP_POST_SEND_DATA,
    DCNT_EP_POST_SEND_UD,
    DCNT_EP_POST_SEND_UD_DATA,
    DCNT_EP_POST_RECV,
    DCNT_EP_POST_RECV_DATA,
    DCNT_EP_POST_WRITE,
    DCNT_EP_POST_WRITE_DATA,
    DCNT_EP_POST_WRITE_IMM,
    DCNT_EP_POST_WRITE_IMM_DATA,
    DCNT_EP_POST_READ,
    DCNT_EP_POST_READ_DATA,
    DCNT_EP_POST_CMP_SWAP,
    DCNT_EP_POST_FETCH_ADD,
    DCNT_EP_RECV,
    DCNT_EP_RECV_DATA,
    DCNT_EP_RECV_UD,
    DCNT_EP_RECV_UD_DATA,
    DCNT_EP_RECV_IMM,
    DCNT_EP_RECV_IMM_DATA,
    DCNT_EP_RECV_RDMA_IMM,
    DCNT_EP_RECV_RDMA_IMM_DATA,
    DCNT_EP_ALL_COUNTERS
} DAT_EP_COUNTERS;

/* Per-EVD counters; DCNT_EVD_ALL_COUNTERS is the count. */
typedef enum dat_evd_counters {
    DCNT_EVD_WAIT,
    DCNT_EVD_WAIT_BLOCKED,
    DCNT_EVD_WAIT_NOTIFY,
    DCNT_EVD_DEQUEUE,
    DCNT_EVD_DEQUEUE_FOUND,
    DCNT_EVD_DEQUEUE_NOT_FOUND,
    DCNT_EVD_DEQUEUE_POLL,
    DCNT_EVD_DEQUEUE_POLL_FOUND,
    DCNT_EVD_CONN_CALLBACK,
    DCNT_EVD_DTO_CALLBACK,
    DCNT_EVD_ALL_COUNTERS
} DAT_EVD_COUNTERS;

/* Groups of IA counters that dat_ib_start_counter / dat_ib_stop_counter
 * sample. */
typedef enum dat_ia_counter_type {
    DCNT_IA_CM,
    DCNT_IA_LNK,
    DCNT_IA_DIAG
} DAT_IA_COUNTER_TYPE;

/* ------------------------------------------------------------------ */
/* Collectives                                                        */
/* ------------------------------------------------------------------ */

/* Element type of reduce, allreduce, reduce_scatter and scan buffers. */
typedef enum dat_ib_collective_data_type {
    DAT_IB_COLLECTIVE_TYPE_INT8,
    DAT_IB_COLLECTIVE_TYPE_UINT8,
    DAT_IB_COLLECTIVE_TYPE_INT16,
    DAT_IB_COLLECTIVE_TYPE_UINT16,
    DAT_IB_COLLECTIVE_TYPE_INT32,
    DAT_IB_COLLECTIVE_TYPE_UINT32,
    DAT_IB_COLLECTIVE_TYPE_INT64,
    DAT_IB_COLLECTIVE_TYPE_UINT64,
    DAT_IB_COLLECTIVE_TYPE_FLOAT,
    DAT_IB_COLLECTIVE_TYPE_DOUBLE,
    DAT_IB_COLLECTIVE_TYPE_LONG_DOUBLE,
    DAT_IB_COLLECTIVE_TYPE_SHORT_INT,
    DAT_IB_COLLECTIVE_TYPE_2INT,
    DAT_IB_COLLECTIVE_TYPE_FLOAT_INT,
    DAT_IB_COLLECTIVE_TYPE_LONG_INT,
    DAT_IB_COLLECTIVE_TYPE_DOUBLE_INT
} DAT_IB_COLLECTIVE_DATA_TYPE;

/* Reduction operator (MPI's set; the *LOC ones work on value/rank pairs). */
typedef enum dat_ib_collective_reduce_data_op {
    DAT_IB_COLLECTIVE_REDUCE_OP_MAX,
    DAT_IB_COLLECTIVE_REDUCE_OP_MIN,
    DAT_IB_COLLECTIVE_REDUCE_OP_SUM,
    DAT_IB_COLLECTIVE_REDUCE_OP_PROD,
    DAT_IB_COLLECTIVE_REDUCE_OP_LAND,
    DAT_IB_COLLECTIVE_REDUCE_OP_BAND,
    DAT_IB_COLLECTIVE_REDUCE_OP_LOR,
    DAT_IB_COLLECTIVE_REDUCE_OP_BOR,
    DAT_IB_COLLECTIVE_REDUCE_OP_LXOR,
    DAT_IB_COLLECTIVE_REDUCE_OP_BXOR,
    DAT_IB_COLLECTIVE_REDUCE_OP_MAXLOC,
    DAT_IB_COLLECTIVE_REDUCE_OP_MINLOC
} DAT_IB_COLLECTIVE_REDUCE_DATA_OP;

typedef unsigned int DAT_IB_COLLECTIVE_RANK;
typedef unsigned int DAT_IB_COLLECTIVE_ID;
/* Opaque per-rank address blob from dat_ib_collective_create_member. */
typedef void *DAT_IB_COLLECTIVE_MEMBER;

/* How the ranks of a group are spread over nodes. Tables are indexed by
 * global rank; -1 marks "not on this node" / "not an external rank". */
typedef struct dat_ib_collective_group {
    int local_size;         /* ranks on this node */
    int local_rank;         /* our rank among them */
    int *local_ranks;       /* their global ranks */
    int external_size;      /* nodes, one external (root) rank each */
    int external_rank;      /* our rank among the roots, or -1 */
    int *external_ranks;    /* the roots' global ranks */
    int *intranode_table;   /* global rank -> local rank */
    int *internode_table;   /* global rank -> external rank */
    int is_comm_world;
} DAT_IB_COLLECTIVE_GROUP;

/* ------------------------------------------------------------------ */
/* Message helpers                                                    */
/* ------------------------------------------------------------------ */

/* Name of an extension return code; any other code goes to dat_strerror.
 * Only the type bits are looked at, so every DAT_IB_RETURN reads as
 * "DAT_IB_ERR". */
static __inline__ DAT_RETURN DAT_API
dat_strerror_extension(DAT_IB_RETURN value, const char **message)
{
    if (DAT_GET_TYPE(value) == (DAT_UINT32)DAT_IB_ERR) {
        *message = "DAT_IB_ERR";
        return DAT_SUCCESS;
    }
    return dat_strerror((DAT_RETURN)value, message, NULL);
}

/* Name of an extended event status. */
static __inline__ DAT_RETURN DAT_API
dat_strerror_ext_status(DAT_IB_STATUS value, const char **message)
{
    if (value == DAT_OP_SUCCESS) {
        *message = " ";
        return DAT_SUCCESS;
    }
    if (value == DAT_IB_OP_ERR) {
        *message = "DAT_IB_OP_ERR";
        return DAT_SUCCESS;
    }
    *message = "unknown extension status";
    return DAT_INVALID_PARAMETER;
}

/* ------------------------------------------------------------------ */
/* Operations                                                         */
/* ------------------------------------------------------------------ */

/* Each macro calls dat_extension_op(handle, op, ...) with its arguments
 * cast to the types the provider reads them back as, in a fixed order.
 * All return DAT_RETURN. Cookies are passed uncast (DAT_DTO_COOKIE).
 *
 * Contexts are cast to the union DAT_CONTEXT as in the reference, which
 * ISO C does not allow (GNU C does, and also takes a member's type there);
 * __extension__ keeps that out of -pedantic diagnostics without changing
 * what is passed. The reference's (const DAT_NAME_PTR) cast is written
 * without the const, which a cast result cannot carry anyway (C++ warns
 * about it under -Wextra). */

/* 64-bit remote fetch-and-add: the remote word gets += add_val, and its
 * old value lands in lbuf. */
#define dat_ib_post_fetch_and_add(ep, add_val, lbuf, cookie, rbuf, flgs) \
    dat_extension_op((DAT_EP_HANDLE)(ep), \
        (DAT_IB_OP)DAT_IB_FETCH_AND_ADD_OP, \
        (DAT_UINT64)(add_val), \
        (DAT_LMR_TRIPLET *)(lbuf), \
        (cookie), \
        (DAT_RMR_TRIPLET *)(rbuf), \
        (DAT_COMPLETION_FLAGS)(flgs))

/* 64-bit remote compare-and-swap: swap_val is stored if the remote word
 * equals cmp_val; the old value lands in lbuf either way. */
#define dat_ib_post_cmp_and_swap(ep, cmp_val, swap_val, lbuf, cookie, rbuf, flgs) \
    dat_extension_op((DAT_EP_HANDLE)(ep), \
        (DAT_IB_OP)DAT_IB_CMP_AND_SWAP_OP, \
        (DAT_UINT64)(cmp_val), \
        (DAT_UINT64)(swap_val), \
        (DAT_LMR_TRIPLET *)(lbuf), \
        (cookie), \
        (DAT_RMR_TRIPLET *)(rbuf), \
        (DAT_COMPLETION_FLAGS)(flgs))

/* RDMA write of size segments from lbuf, followed by 32-bit immediate
 * data that consumes a posted receive at the peer. */
#define dat_ib_post_rdma_write_immed(ep, size, lbuf, cookie, rbuf, idata, flgs) \
    dat_extension_op((DAT_EP_HANDLE)(ep), \
        (DAT_IB_OP)DAT_IB_RDMA_WRITE_IMMED_OP, \
        (DAT_COUNT)(size), \
        (DAT_LMR_TRIPLET *)(lbuf), \
        (cookie), \
        (DAT_RMR_TRIPLET *)(rbuf), \
        (DAT_UINT32)(idata), \
        (DAT_COMPLETION_FLAGS)(flgs))

/* Datagram send on a UD endpoint to the peer ah_ptr names. */
#define dat_ib_post_send_ud(ep, segments, lbuf, ah_ptr, cookie, flgs) \
    dat_extension_op((DAT_EP_HANDLE)(ep), \
        (DAT_IB_OP)DAT_IB_UD_SEND_OP, \
        (DAT_COUNT)(segments), \
        (DAT_LMR_TRIPLET *)(lbuf), \
        (DAT_IB_ADDR_HANDLE *)(ah_ptr), \
        (cookie), \
        (DAT_COMPLETION_FLAGS)(flgs))

/* UD receives are ordinary receives. */
#define dat_ib_post_recv_ud dat_ep_post_recv

/* Release the CM object of an established UD connection (the event's
 * context) once its address handle has been saved. */
#define dat_ib_ud_cm_free(ep, cm) \
    dat_extension_op((DAT_EP_HANDLE)(ep), \
        (DAT_IB_OP)DAT_IB_UD_CM_FREE_OP, \
        (__extension__ (DAT_CONTEXT)(cm)))

/* Release a UD address handle; all sends to it must have completed. */
#define dat_ib_ud_ah_free(ep, ah) \
    dat_extension_op((DAT_EP_HANDLE)(ep), \
        (DAT_IB_OP)DAT_IB_UD_AH_FREE_OP, \
        (DAT_IB_ADDR_HANDLE *)(ah))

/* Read one counter of an IA, EP or EVD handle into p_cntrs_out (or all of
 * them, with the *_ALL_COUNTERS value); reset != 0 zeroes them after. */
#define dat_ib_query_counters(dat_handle, cntr, p_cntrs_out, reset) \
    dat_extension_op((DAT_HANDLE)(dat_handle), \
        (DAT_IB_OP)DAT_IB_QUERY_COUNTERS_OP, \
        (int)(cntr), \
        (DAT_UINT64 *)(p_cntrs_out), \
        (int)(reset))

/* Same selection, printed by the provider instead of returned. */
#define dat_ib_print_counters(dat_handle, cntr, reset) \
    dat_extension_op((DAT_HANDLE)(dat_handle), \
        (DAT_IB_OP)DAT_IB_PRINT_COUNTERS_OP, \
        (int)(cntr), \
        (int)(reset))

/* Start / stop sampling one DAT_IA_COUNTER_TYPE group on an IA. The
 * reference casts to DAT_COUNTER_TYPE, a type no header defines, so its
 * macros cannot be used as written; DAT_IA_COUNTER_TYPE is the type meant
 * and is passed the same way (an int-sized enum). */
#define dat_ib_start_counter(dat_handle, type) \
    dat_extension_op((DAT_HANDLE)(dat_handle), \
        (DAT_IB_OP)DAT_IB_START_COUNTERS_OP, \
        (DAT_IA_COUNTER_TYPE)(type))

#define dat_ib_stop_counter(dat_handle, type) \
    dat_extension_op((DAT_HANDLE)(dat_handle), \
        (DAT_IB_OP)DAT_IB_STOP_COUNTERS_OP, \
        (DAT_IA_COUNTER_TYPE)(type))

/* Open the named IA only to query its attributes (no async EVD), and
 * close such a handle again. */
#define dat_ib_open_query(name, ia_handle, ia_mask, ia_attr, prov_mask, prov_attr) \
    dat_extension_op((DAT_HANDLE)(NULL), \
        (DAT_IB_OP)DAT_IB_OPEN_QUERY_OP, \
        (DAT_NAME_PTR)(name), \
        (DAT_HANDLE *)(ia_handle), \
        (DAT_IA_ATTR_MASK)(ia_mask), \
        (DAT_IA_ATTR *)(ia_attr), \
        (DAT_PROVIDER_ATTR_MASK)(prov_mask), \
        (DAT_PROVIDER_ATTR *)(prov_attr))

#define dat_ib_close_query(ia_handle) \
    dat_extension_op((DAT_HANDLE)(ia_handle), \
        (DAT_IB_OP)DAT_IB_CLOSE_QUERY_OP)

/* Collective groups. Every rank creates its member blob, the blobs are
 * exchanged out of band, then every rank creates the group; its handle
 * arrives in a DAT_IB_COLLECTIVE_EVENT on evd. */
#define dat_ib_collective_create_member(ia_handle, progress_func, member, member_size) \
    dat_extension_op((DAT_IA_HANDLE)(ia_handle), \
        (DAT_IB_OP)DAT_IB_COLLECTIVE_CREATE_MEMBER_OP, \
        (void *)(progress_func), \
        (DAT_IB_COLLECTIVE_MEMBER *)(member), \
        (DAT_UINT32 *)(member_size))

#define dat_ib_collective_free_member(ia_handle, member) \
    dat_extension_op((DAT_IA_HANDLE)(ia_handle), \
        (DAT_IB_OP)DAT_IB_COLLECTIVE_FREE_MEMBER_OP, \
        (DAT_IB_COLLECTIVE_MEMBER)(member))

#define dat_ib_collective_create_group(members, group_size, self, group_id, \
        group_info, evd, pd, user_context) \
    dat_extension_op((DAT_EVD_HANDLE)(evd), \
        (DAT_IB_OP)DAT_IB_COLLECTIVE_CREATE_GROUP_OP, \
        (DAT_IB_COLLECTIVE_MEMBER *)(members), \
        (DAT_COUNT)(group_size), \
        (DAT_IB_COLLECTIVE_RANK)(self), \
        (DAT_IB_COLLECTIVE_ID)(group_id), \
        (DAT_IB_COLLECTIVE_GROUP *)(group_info), \
        (DAT_PZ_HANDLE)(pd), \
        (__extension__ (DAT_CONTEXT)(user_context)))

#define dat_ib_collective_free_group(coll_handle) \
    dat_extension_op((DAT_IB_COLLECTIVE_HANDLE)(coll_handle), \
        (DAT_IB_OP)DAT_IB_COLLECTIVE_FREE_GROUP_OP)

/* Group network clock. The reference's set_clock sends READ_CLOCK_OP and
 * passes an undeclared "user_contex" instead of its parameter, and its
 * read_clock has an unbalanced parenthesis, so neither can be used as
 * written there; here they send what their names and parameters say. */
#define dat_ib_collective_set_clock(coll_handle, clock_value, user_context) \
    dat_extension_op((DAT_IB_COLLECTIVE_HANDLE)(coll_handle), \
        (DAT_IB_OP)DAT_IB_COLLECTIVE_SET_CLOCK_OP, \
        (DAT_UINT64)(clock_value), \
        (__extension__ (DAT_CONTEXT)(user_context)))

#define dat_ib_collective_read_clock(coll_handle, clock_value) \
    dat_extension_op((DAT_IB_COLLECTIVE_HANDLE)(coll_handle), \
        (DAT_IB_OP)DAT_IB_COLLECTIVE_READ_CLOCK_OP, \
        (DAT_UINT64 *)(clock_value))

/* Data movement. Sizes are byte counts; the *v forms take per-rank count
 * and displacement arrays; root is a rank in the group. Completions go to
 * the group's EVD unless flags suppress them. */
#define dat_ib_collective_scatter(coll_handle, sendbuf, sendsize, recvbuf, \
        recvsize, root, user_context, flags) \
    dat_extension_op((DAT_IB_COLLECTIVE_HANDLE)(coll_handle), \
        (DAT_IB_OP)DAT_IB_COLLECTIVE_SCATTER_OP, \
        (DAT_PVOID)(sendbuf), \
        (DAT_COUNT)(sendsize), \
        (DAT_PVOID)(recvbuf), \
        (DAT_COUNT)(recvsize), \
        (DAT_IB_COLLECTIVE_RANK)(root), \
        (__extension__ (DAT_CONTEXT)(user_context)), \
        (DAT_COMPLETION_FLAGS)(flags))

#define dat_ib_collective_scatterv(coll_handle, sendbuf, sendsizes, displs, \
        recvbuf, recvsize, root, user_context, flags) \
    dat_extension_op((DAT_IB_COLLECTIVE_HANDLE)(coll_handle), \
        (DAT_IB_OP)DAT_IB_COLLECTIVE_SCATTERV_OP, \
        (DAT_PVOID)(sendbuf), \
        (DAT_COUNT *)(sendsizes), \
        (DAT_COUNT *)(displs), \
        (DAT_PVOID)(recvbuf), \
        (DAT_COUNT)(recvsize), \
        (DAT_IB_COLLECTIVE_RANK)(root), \
        (__extension__ (DAT_CONTEXT)(user_context)), \
        (DAT_COMPLETION_FLAGS)(flags))

#define dat_ib_collective_gather(coll_handle, sendbuf, sendsize, recvbuf, \
        recvsize, root, user_context, flags) \
    dat_extension_op((DAT_IB_COLLECTIVE_HANDLE)(coll_handle), \
        (DAT_IB_OP)DAT_IB_COLLECTIVE_GATHER_OP, \
        (DAT_PVOID)(sendbuf), \
        (DAT_COUNT)(sendsize), \
        (DAT_PVOID)(recvbuf), \
        (DAT_COUNT)(recvsize), \
        (DAT_IB_COLLECTIVE_RANK)(root), \
        (__extension__ (DAT_CONTEXT)(user_context)), \
        (DAT_COMPLETION_FLAGS)(flags))

/* The reference passes an undeclared "recvbuf" here in place of its
 * recvbufs parameter; we pass the parameter. */
#define dat_ib_collective_gatherv(coll_handle, sendbuf, sendsize, recvbufs, \
        recvsizes, displs, root, user_context, flags) \
    dat_extension_op((DAT_IB_COLLECTIVE_HANDLE)(coll_handle), \
        (DAT_IB_OP)DAT_IB_COLLECTIVE_GATHERV_OP, \
        (DAT_PVOID)(sendbuf), \
        (DAT_COUNT)(sendsize), \
        (DAT_PVOID)(recvbufs), \
        (DAT_COUNT *)(recvsizes), \
        (DAT_COUNT *)(displs), \
        (DAT_IB_COLLECTIVE_RANK)(root), \
        (__extension__ (DAT_CONTEXT)(user_context)), \
        (DAT_COMPLETION_FLAGS)(flags))

#define dat_ib_collective_allgather(coll_handle, sendbuf, sendsize, recvbuf, \
        recvsize, user_context, flags) \
    dat_extension_op((DAT_IB_COLLECTIVE_HANDLE)(coll_handle), \
        (DAT_IB_OP)DAT_IB_COLLECTIVE_ALLGATHER_OP, \
        (DAT_PVOID)(sendbuf), \
        (DAT_COUNT)(sendsize), \
        (DAT_PVOID)(recvbuf), \
        (DAT_COUNT)(recvsize), \
        (__extension__ (DAT_CONTEXT)(user_context)), \
        (DAT_COMPLETION_FLAGS)(flags))

#define dat_ib_collective_allgatherv(coll_handle, sendbuf, sendsize, recvbuf, \
        recvsizes, displs, user_context, flags) \
    dat_extension_op((DAT_IB_COLLECTIVE_HANDLE)(coll_handle), \
        (DAT_IB_OP)DAT_IB_COLLECTIVE_ALLGATHERV_OP, \
        (DAT_PVOID)(sendbuf), \
        (DAT_COUNT)(sendsize), \
        (DAT_PVOID)(recvbuf), \
        (DAT_COUNT *)(recvsizes), \
        (DAT_COUNT *)(displs), \
        (__extension__ (DAT_CONTEXT)(user_context)), \
        (DAT_COMPLETION_FLAGS)(flags))

#define dat_ib_collective_alltoall(coll_handle, sendbuf, sendsize, recvbuf, \
        recvsize, user_context, flags) \
    dat_extension_op((DAT_IB_COLLECTIVE_HANDLE)(coll_handle), \
        (DAT_IB_OP)DAT_IB_COLLECTIVE_ALLTOALL_OP, \
        (DAT_PVOID)(sendbuf), \
        (DAT_COUNT)(sendsize), \
        (DAT_PVOID)(recvbuf), \
        (DAT_COUNT)(recvsize), \
        (__extension__ (DAT_CONTEXT)(user_context)), \
        (DAT_COMPLETION_FLAGS)(flags))

/* The reference names the send displacement parameter senddspls but
 * passes an undeclared "senddispls"; we pass the parameter. */
#define dat_ib_collective_alltoallv(coll_handle, sendbuf, sendsizes, \
        senddspls, recvbuf, recvsizes, recvdispls, user_context, flags) \
    dat_extension_op((DAT_IB_COLLECTIVE_HANDLE)(coll_handle), \
        (DAT_IB_OP)DAT_IB_COLLECTIVE_ALLTOALLV_OP, \
        (DAT_PVOID)(sendbuf), \
        (DAT_COUNT *)(sendsizes), \
        (DAT_COUNT *)(senddspls), \
        (DAT_PVOID)(recvbuf), \
        (DAT_COUNT *)(recvsizes), \
        (DAT_COUNT *)(recvdispls), \
        (__extension__ (DAT_CONTEXT)(user_context)), \
        (DAT_COMPLETION_FLAGS)(flags))

/* Reductions: op combines elements of the given type across the group. */
#define dat_ib_collective_reduce(coll_handle, sendbuf, sendsize, recvbuf, \
        recvsize, op, type, root, user_context, flags) \
    dat_extension_op((DAT_IB_COLLECTIVE_HANDLE)(coll_handle), \
        (DAT_IB_OP)DAT_IB_COLLECTIVE_REDUCE_OP, \
        (DAT_PVOID)(sendbuf), \
        (DAT_COUNT)(sendsize), \
        (DAT_PVOID)(recvbuf), \
        (DAT_COUNT)(recvsize), \
        (DAT_IB_COLLECTIVE_REDUCE_DATA_OP)(op), \
        (DAT_IB_COLLECTIVE_DATA_TYPE)(type), \
        (DAT_IB_COLLECTIVE_RANK)(root), \
        (__extension__ (DAT_CONTEXT)(user_context)), \
        (DAT_COMPLETION_FLAGS)(flags))

#define dat_ib_collective_allreduce(coll_handle, sendbuf, sendsize, recvbuf, \
        recvsize, op, type, user_context, flags) \
    dat_extension_op((DAT_IB_COLLECTIVE_HANDLE)(coll_handle), \
        (DAT_IB_OP)DAT_IB_COLLECTIVE_ALLREDUCE_OP, \
        (DAT_PVOID)(sendbuf), \
        (DAT_COUNT)(sendsize), \
        (DAT_PVOID)(recvbuf), \
        (DAT_COUNT)(recvsize), \
        (DAT_IB_COLLECTIVE_REDUCE_DATA_OP)(op), \
        (DAT_IB_COLLECTIVE_DATA_TYPE)(type), \
        (__extension__ (DAT_CONTEXT)(user_context)), \
        (DAT_COMPLETION_FLAGS)(flags))

#define dat_ib_collective_reduce_scatter(coll_handle, sendbuf, sendsize, \
        recvbuf, recvsizes, op, type, user_context, flags) \
    dat_extension_op((DAT_IB_COLLECTIVE_HANDLE)(coll_handle), \
        (DAT_IB_OP)DAT_IB_COLLECTIVE_REDUCE_SCATTER_OP, \
        (DAT_PVOID)(sendbuf), \
        (DAT_COUNT)(sendsize), \
        (DAT_PVOID)(recvbuf), \
        (DAT_COUNT *)(recvsizes), \
        (DAT_IB_COLLECTIVE_REDUCE_DATA_OP)(op), \
        (DAT_IB_COLLECTIVE_DATA_TYPE)(type), \
        (__extension__ (DAT_CONTEXT)(user_context)), \
        (DAT_COMPLETION_FLAGS)(flags))

#define dat_ib_collective_scan(coll_handle, sendbuf, sendsize, recvbuf, \
        recvsize, op, type, user_context, flags) \
    dat_extension_op((DAT_IB_COLLECTIVE_HANDLE)(coll_handle), \
        (DAT_IB_OP)DAT_IB_COLLECTIVE_SCAN_OP, \
        (DAT_PVOID)(sendbuf), \
        (DAT_COUNT)(sendsize), \
        (DAT_PVOID)(recvbuf), \
        (DAT_COUNT)(recvsize), \
        (DAT_IB_COLLECTIVE_REDUCE_DATA_OP)(op), \
        (DAT_IB_COLLECTIVE_DATA_TYPE)(type), \
        (__extension__ (DAT_CONTEXT)(user_context)), \
        (DAT_COMPLETION_FLAGS)(flags))

/* In-place broadcast of root's buf to every member. */
#define dat_ib_collective_broadcast(coll_handle, buf, size, root, user_context, flags) \
    dat_extension_op((DAT_IB_COLLECTIVE_HANDLE)(coll_handle), \
        (DAT_IB_OP)DAT_IB_COLLECTIVE_BROADCAST_OP, \
        (DAT_PVOID)(buf), \
        (DAT_COUNT)(size), \
        (DAT_IB_COLLECTIVE_RANK)(root), \
        (__extension__ (DAT_CONTEXT)(user_context)), \
        (DAT_COMPLETION_FLAGS)(flags))

/* Completes once every member has entered the barrier. */
#define dat_ib_collective_barrier(coll_handle, user_context, flags) \
    dat_extension_op((DAT_IB_COLLECTIVE_HANDLE)(coll_handle), \
        (DAT_IB_OP)DAT_IB_COLLECTIVE_BARRIER_OP, \
        (__extension__ (DAT_CONTEXT)(user_context)), \
        (DAT_COMPLETION_FLAGS)(flags))

/* Names from before the DAT_IB_ / dat_ib_ prefixes. */
#define DAT_ATTR_COUNTERS       DAT_IB_ATTR_COUNTERS
#define dat_query_counters      dat_ib_query_counters
#define dat_print_counters      dat_ib_print_counters
#define DAT_QUERY_COUNTERS_OP   DAT_IB_QUERY_COUNTERS_OP
#define DAT_PRINT_COUNTERS_OP   DAT_IB_PRINT_COUNTERS_OP

#ifdef __cplusplus
}
#endif

#endif /* _DAT_IB_EXTENSIONS_H_ */
