/* dat_ib_extensions.h: InfiniBand extensions to uDAPL 2.0 (atomics, RDMA write
 * with immediate data, UD, counters, collectives), reached through
 * dat_extension_op.
 *
 * SPDX-License-Identifier: BSD-3-Clause
 * Copyright (c) 2026 the fastdapl authors
 */
#ifndef _DAT_IB_EXTENSIONS_H_
#define _DAT_IB_EXTENSIONS_H_

/* Version of this extension interface, as reported in the IA attribute
 * extension_version: 2.0.9. */
#define DAT_IB_EXTENSION_VERSION 209

/* Names of provider attributes that announce each extension. */
#define DAT_IB_ATTR_COUNTERS "DAT_COUNTERS"
#define DAT_IB_ATTR_FETCH_AND_ADD "DAT_IB_FETCH_AND_ADD"
#define DAT_IB_ATTR_CMP_AND_SWAP "DAT_IB_CMP_AND_SWAP"
#define DAT_IB_ATTR_IMMED_DATA "DAT_IB_IMMED_DATA"
#define DAT_IB_ATTR_UD "DAT_IB_UD"
#define DAT_IB_COLL_SET_CLOCK "DAT_COLL_SET_CLOCK"
#define DAT_IB_COLL_READ_CLOCK "DAT_COLL_READ_CLOCK"
#define DAT_IB_COLL_BROADCAST "DAT_COLL_BROADCAST"
#define DAT_IB_COLL_BARRIER "DAT_COLL_BARRIER"
#define DAT_IB_COLL_SCATTER "DAT_COLL_SCATTER"
#define DAT_IB_COLL_SCATTERV "DAT_COLL_SCATTERV"
#define DAT_IB_COLL_GATHER "DAT_COLL_GATHER"
#define DAT_IB_COLL_GATHERV "DAT_COLL_GATHERV"
#define DAT_IB_COLL_ALLGATHER "DAT_COLL_ALLGATHER"
#define DAT_IB_COLL_ALLGATHERV "DAT_COLL_ALLGATHERV"
#define DAT_IB_COLL_ALLTOALL "DAT_COLL_ALLTOALL"
#define DAT_IB_COLL_ALLTOALLV "DAT_COLL_ALLTOALLV"
#define DAT_IB_COLL_REDUCE "DAT_COLL_REDUCE"
#define DAT_IB_COLL_ALLREDUCE "DAT_COLL_ALLREDUCE"
#define DAT_IB_COLL_REDUCE_SCATTER "DAT_COLL_REDUCE_SCATTER"
#define DAT_IB_COLL_SCAN "DAT_COLL_SCAN"

typedef DAT_HANDLE DAT_IB_COLLECTIVE_HANDLE;

/* Event numbers, in the range the core API reserves for extensions. */
typedef enum dat_ib_event_number {
    DAT_IB_DTO_EVENT = DAT_IB_EXTENSION_RANGE_BASE,
    DAT_IB_UD_CONNECTION_REQUEST_EVENT,
    DAT_IB_UD_CONNECTION_EVENT_ESTABLISHED,
    DAT_IB_UD_CONNECTION_REJECT_EVENT,
    DAT_IB_UD_CONNECTION_ERROR_EVENT,
    DAT_IB_COLLECTIVE_EVENT
} DAT_IB_EVENT_NUMBER;

/* Operation codes passed to dat_extension_op. */
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

/* What an extended event reports, in DAT_IB_EXTENSION_EVENT_DATA.type. */
typedef enum dat_ib_ext_type {
    DAT_IB_FETCH_AND_ADD,
    DAT_IB_CMP_AND_SWAP,
    DAT_IB_RDMA_WRITE_IMMED,
    DAT_IB_RDMA_WRITE_IMMED_DATA,
    DAT_IB_RECV_IMMED_DATA,
    DAT_IB_UD_CONNECT_REQUEST,
    DAT_IB_UD_REMOTE_AH,
    DAT_IB_UD_PASSIVE_REMOTE_AH,
    DAT_IB_UD_SEND,
    DAT_IB_UD_RECV,
    DAT_IB_UD_CONNECT_REJECT,
    DAT_IB_UD_CONNECT_ERROR,
    DAT_IB_COLLECTIVE_CREATE_STATUS,
    DAT_IB_COLLECTIVE_CREATE_DATA,
    DAT_IB_COLLECTIVE_CLOCK_SET_STATUS,
    DAT_IB_COLLECTIVE_SCATTER_STATUS,
    DAT_IB_COLLECTIVE_SCATTERV_STATUS,
    DAT_IB_COLLECTIVE_GATHER_STATUS,
    DAT_IB_COLLECTIVE_GATHERV_STATUS,
    DAT_IB_COLLECTIVE_ALLGATHER_STATUS,
    DAT_IB_COLLECTIVE_ALLGATHERV_STATUS,
    DAT_IB_COLLECTIVE_ALLTOALL_STATUS,
    DAT_IB_COLLECTIVE_ALLTOALLV_STATUS,
    DAT_IB_COLLECTIVE_REDUCE_STATUS,
    DAT_IB_COLLECTIVE_ALLREDUCE_STATUS,
    DAT_IB_COLLECTIVE_REDUCE_SCATTER_STATUS,
    DAT_IB_COLLECTIVE_SCAN_STATUS,
    DAT_IB_COLLECTIVE_BROADCAST_STATUS,
    DAT_IB_COLLECTIVE_BARRIER_STATUS
} DAT_IB_EXT_TYPE;

/* Status of an extended operation. */
typedef enum dat_ib_status {
    DAT_OP_SUCCESS = DAT_SUCCESS,
    DAT_IB_OP_ERR,
    DAT_IB_COLL_COMP_ERR
} DAT_IB_STATUS;

/* Return types of the IB extension, in the extension range of DAT_RETURN. */
typedef enum dat_ib_return {
    DAT_IB_ERR = DAT_EXTENSION_BASE,
    DAT_IB_COLLECTIVE_ERR
} DAT_IB_RETURN;

/* Completed operations, as DAT_DTOS values past the core ones. */
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

typedef enum dat_ib_handle_type {
    DAT_IB_HANDLE_TYPE_EXT = DAT_HANDLE_TYPE_EXTENSION_BASE,
    DAT_IB_HANDLE_TYPE_COLLECTIVE
} DAT_IB_HANDLE_TYPE;

/* EVD flag asking for extended events. */
typedef enum dat_ib_evd_extension_flags {
    DAT_IB_EVD_EXTENSION_FLAG = DAT_EVD_EXTENSION_BASE
} DAT_IB_EVD_EXTENSION_FLAGS;

/* Memory privilege needed by the target of atomic operations. */
typedef enum dat_ib_mem_priv_flags {
    DAT_IB_MEM_PRIV_REMOTE_ATOMIC = DAT_MEM_PRIV_EXTENSION_BASE
} DAT_IB_MEM_PRIV_FLAGS;

/* A UD peer: verbs address handle, queue pair number and IP address. The
 * caller includes <netinet/in.h> for struct sockaddr_in6. */
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

/* Carried in DAT_EVENT.event_extension_data of extended events. */
typedef struct dat_ib_extension_event_data {
    DAT_IB_EXT_TYPE type;
    DAT_IB_STATUS status;
    union {
        DAT_IB_IMMED_DATA immed;
    } val;
    /* Anonymous, as in the Linux ABI (members used as ev.remote_ah). C99
     * has no anonymous unions; __extension__ keeps -pedantic quiet. */
    __extension__ union {
        DAT_IB_ADDR_HANDLE remote_ah;
        DAT_IB_COLLECTIVE_EVENT_DATA coll;
    };
    DAT_CONTEXT context;
} DAT_IB_EXTENSION_EVENT_DATA;

/* EP service type for unreliable datagram endpoints. */
typedef enum dat_ib_service_type {
    DAT_IB_SERVICE_TYPE_UD = DAT_SERVICE_TYPE_EXTENSION_BASE
} DAT_IB_SERVICE_TYPE;

/* Counters of dat_ib_query_counters / dat_ib_print_counters, per IA, EP and EVD. */
typedef enum dat_ia_counters {
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
    DCNT_IA_LNK_ERR_RCV,
    DCNT_IA_LNK_ERR_RCV_REM_PHYS,
    DCNT_IA_LNK_ERR_RCV_CONSTRAINT,
    DCNT_IA_LNK_ERR_XMT_DISCARDS,
    DCNT_IA_LNK_ERR_XMT_CONTRAINT,
    DCNT_IA_LNK_ERR_INTEGRITY,
    DCNT_IA_LNK_ERR_EXC_BUF_OVERRUN,
    DCNT_IA_LNK_WARN_RCV_SW_RELAY,
    DCNT_IA_LNK_WARN_XMT_WAIT,
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

/* Counter groups for dat_ib_start_counter / dat_ib_stop_counter. */
typedef enum dat_ia_counter_type {
    DCNT_IA_CM,
    DCNT_IA_LNK,
    DCNT_IA_DIAG
} DAT_IA_COUNTER_TYPE;

/* Element types and reduction operators of the collectives. */
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
typedef void *DAT_IB_COLLECTIVE_MEMBER;

/* Layout of a collective group across and within nodes. */
typedef struct dat_ib_collective_group {
    int local_size;
    int local_rank;
    int *local_ranks;
    int external_size;
    int external_rank;
    int *external_ranks;
    int *intranode_table;
    int *internode_table;
    int is_comm_world;
} DAT_IB_COLLECTIVE_GROUP;

/* Names for the extension's own return and status codes; other codes go to
 * dat_strerror. */
static __inline__ DAT_RETURN DAT_API dat_strerror_extension(DAT_IB_RETURN value, const char **message)
{
    if (DAT_GET_TYPE(value) == (DAT_UINT32)DAT_IB_ERR) {
        *message = "DAT_IB_ERR";
        return DAT_SUCCESS;
    }
    return dat_strerror((DAT_RETURN)value, message, NULL);
}

static __inline__ DAT_RETURN DAT_API dat_strerror_ext_status(DAT_IB_STATUS value, const char **message)
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

/* The operations. Each calls dat_extension_op with the handle, the
 * operation code, then the operation's arguments in a fixed order and type. */
#define dat_ib_post_fetch_and_add(ep, add_val, lbuf, cookie, rbuf, flgs) \
    dat_extension_op((DAT_EP_HANDLE)(ep), (DAT_IB_OP)DAT_IB_FETCH_AND_ADD_OP, (DAT_UINT64)(add_val), (DAT_LMR_TRIPLET *)(lbuf), (cookie), (DAT_RMR_TRIPLET *)(rbuf), (DAT_COMPLETION_FLAGS)(flgs))

#define dat_ib_post_cmp_and_swap(ep, cmp_val, swap_val, lbuf, cookie, rbuf, flgs) \
    dat_extension_op((DAT_EP_HANDLE)(ep), (DAT_IB_OP)DAT_IB_CMP_AND_SWAP_OP, (DAT_UINT64)(cmp_val), (DAT_UINT64)(swap_val), (DAT_LMR_TRIPLET *)(lbuf), (cookie), (DAT_RMR_TRIPLET *)(rbuf), (DAT_COMPLETION_FLAGS)(flgs))

#define dat_ib_post_rdma_write_immed(ep, size, lbuf, cookie, rbuf, idata, flgs) \
    dat_extension_op((DAT_EP_HANDLE)(ep), (DAT_IB_OP)DAT_IB_RDMA_WRITE_IMMED_OP, (DAT_COUNT)(size), (DAT_LMR_TRIPLET *)(lbuf), (cookie), (DAT_RMR_TRIPLET *)(rbuf), (DAT_UINT32)(idata), (DAT_COMPLETION_FLAGS)(flgs))

#define dat_ib_post_send_ud(ep, segments, lbuf, ah_ptr, cookie, flgs) \
    dat_extension_op((DAT_EP_HANDLE)(ep), (DAT_IB_OP)DAT_IB_UD_SEND_OP, (DAT_COUNT)(segments), (DAT_LMR_TRIPLET *)(lbuf), (DAT_IB_ADDR_HANDLE *)(ah_ptr), (cookie), (DAT_COMPLETION_FLAGS)(flgs))

/* UD receives are ordinary receives. */
#define dat_ib_post_recv_ud dat_ep_post_recv

#define dat_ib_ud_cm_free(ep, cm) \
    dat_extension_op((DAT_EP_HANDLE)(ep), (DAT_IB_OP)DAT_IB_UD_CM_FREE_OP, (DAT_CONTEXT)(cm))

#define dat_ib_ud_ah_free(ep, ah) \
    dat_extension_op((DAT_EP_HANDLE)(ep), (DAT_IB_OP)DAT_IB_UD_AH_FREE_OP, (DAT_IB_ADDR_HANDLE *)(ah))

#define dat_ib_query_counters(dat_handle, cntr, p_cntrs_out, reset) \
    dat_extension_op((DAT_HANDLE)(dat_handle), (DAT_IB_OP)DAT_QUERY_COUNTERS_OP, (int)(cntr), (DAT_UINT64 *)(p_cntrs_out), (int)(reset))

#define dat_ib_print_counters(dat_handle, cntr, reset) \
    dat_extension_op((DAT_HANDLE)(dat_handle), (DAT_IB_OP)DAT_PRINT_COUNTERS_OP, (int)(cntr), (int)(reset))

#define dat_ib_start_counter(dat_handle, type) \
    dat_extension_op((DAT_HANDLE)(dat_handle), (DAT_IB_OP)DAT_IB_START_COUNTERS_OP, (DAT_IA_COUNTER_TYPE)(type))

#define dat_ib_stop_counter(dat_handle, type) \
    dat_extension_op((DAT_HANDLE)(dat_handle), (DAT_IB_OP)DAT_IB_STOP_COUNTERS_OP, (DAT_IA_COUNTER_TYPE)(type))

/* Opens an IA for a query without a consumer's async EVD, and closes it. */

#define dat_ib_open_query(name, ia_handle, ia_mask, ia_attr, prov_mask, prov_attr) \
    dat_extension_op((DAT_HANDLE)(NULL), (DAT_IB_OP)DAT_IB_OPEN_QUERY_OP, (const DAT_NAME_PTR)(name), (DAT_HANDLE *)(ia_handle), (DAT_IA_ATTR_MASK)(ia_mask), (DAT_IA_ATTR *)(ia_attr), (DAT_PROVIDER_ATTR_MASK)(prov_mask), (DAT_PROVIDER_ATTR *)(prov_attr))

#define dat_ib_close_query(ia_handle) \
    dat_extension_op((DAT_HANDLE)(ia_handle), (DAT_IB_OP)DAT_IB_CLOSE_QUERY_OP)

#define dat_ib_collective_create_member(ia_handle, progress_func, member, member_size) \
    dat_extension_op((DAT_IA_HANDLE)(ia_handle), (DAT_IB_OP)DAT_IB_COLLECTIVE_CREATE_MEMBER_OP, (void *)(progress_func), (DAT_IB_COLLECTIVE_MEMBER *)(member), (DAT_UINT32 *)(member_size))

#define dat_ib_collective_free_member(ia_handle, member) \
    dat_extension_op((DAT_IA_HANDLE)(ia_handle), (DAT_IB_OP)DAT_IB_COLLECTIVE_FREE_MEMBER_OP, (DAT_IB_COLLECTIVE_MEMBER)(member))

/* The group is created on an EVD: its completion arrives there. */

#define dat_ib_collective_create_group(members, group_size, self, group_id, group_info, evd, pd, user_context) \
    dat_extension_op((DAT_EVD_HANDLE)(evd), (DAT_IB_OP)DAT_IB_COLLECTIVE_CREATE_GROUP_OP, (DAT_IB_COLLECTIVE_MEMBER *)(members), (DAT_COUNT)(group_size), (DAT_IB_COLLECTIVE_RANK)(self), (DAT_IB_COLLECTIVE_ID)(group_id), (DAT_IB_COLLECTIVE_GROUP *)(group_info), (DAT_PZ_HANDLE)(pd), (DAT_CONTEXT)(user_context))

#define dat_ib_collective_free_group(coll_handle) \
    dat_extension_op((DAT_IB_COLLECTIVE_HANDLE)(coll_handle), (DAT_IB_OP)DAT_IB_COLLECTIVE_FREE_GROUP_OP)

/* The reference sends READ_CLOCK here, a slip; we send SET_CLOCK. */

#define dat_ib_collective_set_clock(coll_handle, clock_value, user_context) \
    dat_extension_op((DAT_IB_COLLECTIVE_HANDLE)(coll_handle), (DAT_IB_OP)DAT_IB_COLLECTIVE_SET_CLOCK_OP, (DAT_UINT64)(clock_value), (DAT_CONTEXT)(user_context))

#define dat_ib_collective_read_clock(coll_handle, clock_value) \
    dat_extension_op((DAT_IB_COLLECTIVE_HANDLE)(coll_handle), (DAT_IB_OP)DAT_IB_COLLECTIVE_READ_CLOCK_OP, (DAT_UINT64 *)(clock_value))

#define dat_ib_collective_scatter(coll_handle, sendbuf, sendsize, recvbuf, recvsize, root, user_context, flags) \
    dat_extension_op((DAT_IB_COLLECTIVE_HANDLE)(coll_handle), (DAT_IB_OP)DAT_IB_COLLECTIVE_SCATTER_OP, (DAT_PVOID)(sendbuf), (DAT_COUNT)(sendsize), (DAT_PVOID)(recvbuf), (DAT_COUNT)(recvsize), (DAT_IB_COLLECTIVE_RANK)(root), (DAT_CONTEXT)(user_context), (DAT_COMPLETION_FLAGS)(flags))

#define dat_ib_collective_scatterv(coll_handle, sendbuf, sendsizes, displs, recvbuf, recvsize, root, user_context, flags) \
    dat_extension_op((DAT_IB_COLLECTIVE_HANDLE)(coll_handle), (DAT_IB_OP)DAT_IB_COLLECTIVE_SCATTERV_OP, (DAT_PVOID)(sendbuf), (DAT_COUNT *)(sendsizes), (DAT_COUNT *)(displs), (DAT_PVOID)(recvbuf), (DAT_COUNT)(recvsize), (DAT_IB_COLLECTIVE_RANK)(root), (DAT_CONTEXT)(user_context), (DAT_COMPLETION_FLAGS)(flags))

#define dat_ib_collective_gather(coll_handle, sendbuf, sendsize, recvbuf, recvsize, root, user_context, flags) \
    dat_extension_op((DAT_IB_COLLECTIVE_HANDLE)(coll_handle), (DAT_IB_OP)DAT_IB_COLLECTIVE_GATHER_OP, (DAT_PVOID)(sendbuf), (DAT_COUNT)(sendsize), (DAT_PVOID)(recvbuf), (DAT_COUNT)(recvsize), (DAT_IB_COLLECTIVE_RANK)(root), (DAT_CONTEXT)(user_context), (DAT_COMPLETION_FLAGS)(flags))

#define dat_ib_collective_gatherv(coll_handle, sendbuf, sendsize, recvbufs, recvsizes, displs, root, user_context, flags) \
    dat_extension_op((DAT_IB_COLLECTIVE_HANDLE)(coll_handle), (DAT_IB_OP)DAT_IB_COLLECTIVE_GATHERV_OP, (DAT_PVOID)(sendbuf), (DAT_COUNT)(sendsize), (DAT_PVOID)(recvbufs), (DAT_COUNT *)(recvsizes), (DAT_COUNT *)(displs), (DAT_IB_COLLECTIVE_RANK)(root), (DAT_CONTEXT)(user_context), (DAT_COMPLETION_FLAGS)(flags))

#define dat_ib_collective_allgather(coll_handle, sendbuf, sendsize, recvbuf, recvsize, user_context, flags) \
    dat_extension_op((DAT_IB_COLLECTIVE_HANDLE)(coll_handle), (DAT_IB_OP)DAT_IB_COLLECTIVE_ALLGATHER_OP, (DAT_PVOID)(sendbuf), (DAT_COUNT)(sendsize), (DAT_PVOID)(recvbuf), (DAT_COUNT)(recvsize), (DAT_CONTEXT)(user_context), (DAT_COMPLETION_FLAGS)(flags))

#define dat_ib_collective_allgatherv(coll_handle, sendbuf, sendsize, recvbuf, recvsizes, displs, user_context, flags) \
    dat_extension_op((DAT_IB_COLLECTIVE_HANDLE)(coll_handle), (DAT_IB_OP)DAT_IB_COLLECTIVE_ALLGATHERV_OP, (DAT_PVOID)(sendbuf), (DAT_COUNT)(sendsize), (DAT_PVOID)(recvbuf), (DAT_COUNT *)(recvsizes), (DAT_COUNT *)(displs), (DAT_CONTEXT)(user_context), (DAT_COMPLETION_FLAGS)(flags))

#define dat_ib_collective_alltoall(coll_handle, sendbuf, sendsize, recvbuf, recvsize, user_context, flags) \
    dat_extension_op((DAT_IB_COLLECTIVE_HANDLE)(coll_handle), (DAT_IB_OP)DAT_IB_COLLECTIVE_ALLTOALL_OP, (DAT_PVOID)(sendbuf), (DAT_COUNT)(sendsize), (DAT_PVOID)(recvbuf), (DAT_COUNT)(recvsize), (DAT_CONTEXT)(user_context), (DAT_COMPLETION_FLAGS)(flags))

#define dat_ib_collective_alltoallv(coll_handle, sendbuf, sendsizes, senddispls, recvbuf, recvsizes, recvdispls, user_context, flags) \
    dat_extension_op((DAT_IB_COLLECTIVE_HANDLE)(coll_handle), (DAT_IB_OP)DAT_IB_COLLECTIVE_ALLTOALLV_OP, (DAT_PVOID)(sendbuf), (DAT_COUNT *)(sendsizes), (DAT_COUNT *)(senddispls), (DAT_PVOID)(recvbuf), (DAT_COUNT *)(recvsizes), (DAT_COUNT *)(recvdispls), (DAT_CONTEXT)(user_context), (DAT_COMPLETION_FLAGS)(flags))

#define dat_ib_collective_reduce(coll_handle, sendbuf, sendsize, recvbuf, recvsize, op, type, root, user_context, flags) \
    dat_extension_op((DAT_IB_COLLECTIVE_HANDLE)(coll_handle), (DAT_IB_OP)DAT_IB_COLLECTIVE_REDUCE_OP, (DAT_PVOID)(sendbuf), (DAT_COUNT)(sendsize), (DAT_PVOID)(recvbuf), (DAT_COUNT)(recvsize), (DAT_IB_COLLECTIVE_REDUCE_DATA_OP)(op), (DAT_IB_COLLECTIVE_DATA_TYPE)(type), (DAT_IB_COLLECTIVE_RANK)(root), (DAT_CONTEXT)(user_context), (DAT_COMPLETION_FLAGS)(flags))

#define dat_ib_collective_allreduce(coll_handle, sendbuf, sendsize, recvbuf, recvsize, op, type, user_context, flags) \
    dat_extension_op((DAT_IB_COLLECTIVE_HANDLE)(coll_handle), (DAT_IB_OP)DAT_IB_COLLECTIVE_ALLREDUCE_OP, (DAT_PVOID)(sendbuf), (DAT_COUNT)(sendsize), (DAT_PVOID)(recvbuf), (DAT_COUNT)(recvsize), (DAT_IB_COLLECTIVE_REDUCE_DATA_OP)(op), (DAT_IB_COLLECTIVE_DATA_TYPE)(type), (DAT_CONTEXT)(user_context), (DAT_COMPLETION_FLAGS)(flags))

#define dat_ib_collective_reduce_scatter(coll_handle, sendbuf, sendsize, recvbuf, recvsizes, op, type, user_context, flags) \
    dat_extension_op((DAT_IB_COLLECTIVE_HANDLE)(coll_handle), (DAT_IB_OP)DAT_IB_COLLECTIVE_REDUCE_SCATTER_OP, (DAT_PVOID)(sendbuf), (DAT_COUNT)(sendsize), (DAT_PVOID)(recvbuf), (DAT_COUNT *)(recvsizes), (DAT_IB_COLLECTIVE_REDUCE_DATA_OP)(op), (DAT_IB_COLLECTIVE_DATA_TYPE)(type), (DAT_CONTEXT)(user_context), (DAT_COMPLETION_FLAGS)(flags))

#define dat_ib_collective_scan(coll_handle, sendbuf, sendsize, recvbuf, recvsize, op, type, user_context, flags) \
    dat_extension_op((DAT_IB_COLLECTIVE_HANDLE)(coll_handle), (DAT_IB_OP)DAT_IB_COLLECTIVE_SCAN_OP, (DAT_PVOID)(sendbuf), (DAT_COUNT)(sendsize), (DAT_PVOID)(recvbuf), (DAT_COUNT)(recvsize), (DAT_IB_COLLECTIVE_REDUCE_DATA_OP)(op), (DAT_IB_COLLECTIVE_DATA_TYPE)(type), (DAT_CONTEXT)(user_context), (DAT_COMPLETION_FLAGS)(flags))

#define dat_ib_collective_broadcast(coll_handle, buf, size, root, user_context, flags) \
    dat_extension_op((DAT_IB_COLLECTIVE_HANDLE)(coll_handle), (DAT_IB_OP)DAT_IB_COLLECTIVE_BROADCAST_OP, (DAT_PVOID)(buf), (DAT_COUNT)(size), (DAT_IB_COLLECTIVE_RANK)(root), (DAT_CONTEXT)(user_context), (DAT_COMPLETION_FLAGS)(flags))

#define dat_ib_collective_barrier(coll_handle, user_context, flags) \
    dat_extension_op((DAT_IB_COLLECTIVE_HANDLE)(coll_handle), (DAT_IB_OP)DAT_IB_COLLECTIVE_BARRIER_OP, (DAT_CONTEXT)(user_context), (DAT_COMPLETION_FLAGS)(flags))

/* Older names kept for source compatibility. */
#define DAT_ATTR_COUNTERS DAT_IB_ATTR_COUNTERS
#define dat_query_counters dat_ib_query_counters
#define dat_print_counters dat_ib_print_counters
#define DAT_QUERY_COUNTERS_OP DAT_IB_QUERY_COUNTERS_OP
#define DAT_PRINT_COUNTERS_OP DAT_IB_PRINT_COUNTERS_OP

#endif /* _DAT_IB_EXTENSIONS_H_ */
