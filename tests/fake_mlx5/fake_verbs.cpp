// The fake mlx5 device's libibverbs and libmlx5 side: one device "mlx5_0"
// (RoCE, port 1, GID 0 = ::ffff:127.0.0.1), objects backed by the softnic,
// and traps for what real rdma-core/mlx5 would silently get wrong.
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#include "fake.hpp"

#include <endian.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#undef ibv_get_device_list
#undef ibv_query_port
#undef ibv_reg_mr

namespace fake {

void trap(const char* fmt, ...)
{
    std::va_list ap;
    va_start(ap, fmt);
    std::fprintf(stderr, "fake_mlx5: TRAP: ");
    std::vfprintf(stderr, fmt, ap);
    std::fprintf(stderr, "\n");
    va_end(ap);
    std::abort();
}

struct Cq;
struct Channel {
    ibv_comp_channel ch{};
    EventQueue<Cq*> q;
};

struct Context {
    verbs_context v{};
    EventQueue<ibv_async_event> async;
};

// A thread domain: a BlueFlame register of its own (a fake UAR page).
struct Td {
    ibv_td td{};
    std::uint8_t* uar = nullptr;
    Qp* user = nullptr; // the live QP ringing it
    int parents = 0;
};

struct Pd {
    ibv_pd pd{};
    std::uint32_t snpd = 0; // the softnic's protection domain
    Pd* base = nullptr;     // a parent domain's PD
    Td* td = nullptr;
    int users = 0;
};

struct Mr {
    ibv_mr mr{};
    Pd* pd = nullptr;
};

struct Cq {
    ibv_cq_ex cq{}; // ibv_cq's fields first, as mlx5dv_create_cq's callers expect
    sn::Cq* scq = nullptr;
    std::uint32_t cqn = 0;
    std::uint8_t* uar = nullptr; // cq_uar: the arm doorbell is at +MLX5_CQ_DOORBELL
    bool dv_owned = false;
    Channel* channel = nullptr;
    int users = 0;
    std::mutex arm_mu;
    int fired_sn = -1; // the arm sequence number whose event was sent
    std::atomic<unsigned> reported{0}, acked{0};
};

struct Srq {
    ibv_srq srq{};
    sn::Srq* ssrq = nullptr;
    Pd* pd = nullptr;
    std::uint32_t head = 0, tail = 0; // the free list as rdma-core links it
    int users = 0;
};

std::recursive_mutex& g_mu = *new std::recursive_mutex;
std::condition_variable_any& g_acked = *new std::condition_variable_any;

namespace {

std::vector<Qp*>& g_qps = *new std::vector<Qp*>;
std::vector<Ah*>& g_ahs = *new std::vector<Ah*>;
std::vector<Cq*>& g_cqs = *new std::vector<Cq*>;
std::vector<Srq*>& g_srqs = *new std::vector<Srq*>;
std::uint32_t g_next_cqn = 1;
Context* g_shared = nullptr;
ibv_device g_device{};
ibv_device* g_device_list[2] = {&g_device, nullptr};

std::uint8_t* uar_page()
{
    void* p = std::aligned_alloc(4096, 4096);
    std::memset(p, 0, 4096);
    return static_cast<std::uint8_t*>(p);
}

// FAKE_MLX5_NO_ATOMICS=1: a device without atomics (atomic_cap NONE), to
// check that the IA says so and refuses them (run.sh runs one test so).
bool device_has_atomics()
{
    static const bool none = [] {
        const char* v = std::getenv("FAKE_MLX5_NO_ATOMICS");
        return v && v[0] == '1';
    }();
    return !none;
}

std::uint32_t load_be32(const void* p) { return be32toh(__atomic_load_n(static_cast<const std::uint32_t*>(p), __ATOMIC_ACQUIRE)); }
std::uint64_t load_be64(const void* p) { return be64toh(__atomic_load_n(static_cast<const std::uint64_t*>(p), __ATOMIC_ACQUIRE)); }

// The CQE at free-running index `i` of a softnic CQ, if software owns it.
const mlx5_cqe64* sw_cqe(const Cq* c, std::uint32_t i)
{
    const mlx5dv_cq& d = c->scq->descriptor();
    const auto* cqe = reinterpret_cast<const mlx5_cqe64*>(static_cast<std::uint8_t*>(d.buf) +
                                                          static_cast<std::size_t>(i & (d.cqe_cnt - 1)) * d.cqe_size);
    const std::uint8_t op_own = __atomic_load_n(&cqe->op_own, __ATOMIC_ACQUIRE);
    const std::uint32_t log = fastdapl::fastpath::log2_of(d.cqe_cnt);
    if ((op_own >> 4) == MLX5_CQE_INVALID || (op_own & 1) != ((i >> log) & 1))
        return nullptr;
    return cqe;
}

// Arming, as the device sees it: the UAR's CQ doorbell (arm word, CQ
// number) with the same word in dbrec[1]; one event per sequence number,
// as soon as a CQE (a solicited or error one, if asked) is there at or past
// the consumer index the arm named.
void check_arm(Cq* c)
{
    if (!c->channel)
        return;
    std::lock_guard lock(c->arm_mu);
    const std::uint64_t db = load_be64(c->uar + MLX5_CQ_DOORBELL);
    if (db == 0)
        return; // never armed
    if ((db & 0xffffff) != c->cqn)
        trap("CQ %u: arm doorbell names CQ number %u", c->cqn, static_cast<unsigned>(db & 0xffffff));
    const auto word = static_cast<std::uint32_t>(db >> 32);
    if (load_be32(&c->scq->descriptor().dbrec[1]) != word)
        return; // dbrec[1] and UAR must agree before the arm counts
    const int sn = static_cast<int>((word >> 28) & 3);
    if (sn == c->fired_sn)
        return;
    const bool solicited_only = (word & MLX5_CQ_DB_REQ_NOT_SOL) != 0;
    bool fire = false;
    for (std::uint32_t i = word & 0xffffff;; ++i) {
        const mlx5_cqe64* cqe = sw_cqe(c, i);
        if (!cqe)
            break;
        const std::uint8_t op = cqe->op_own >> 4;
        if (!solicited_only || (cqe->op_own & 2) || op == MLX5_CQE_REQ_ERR || op == MLX5_CQE_RESP_ERR) {
            fire = true;
            break;
        }
    }
    if (!fire)
        return;
    c->fired_sn = sn;
    c->channel->q.push(c);
}

void on_cq_notify(void* context) { check_arm(static_cast<Cq*>(context)); } // softnic engine, its lock held

// The softnic's engine does not see BlueFlame writes (ordinary memory) and
// sleeps when idle: doorbell records that moved wake it here, and an
// armed CQ's event is looked for on every round.
void pump()
{
    struct Seen {
        const void* key;
        std::uint32_t value;
    };
    std::vector<Seen> seen;
    unsigned idle = 0;
    for (;;) {
        bool moved = false;
        {
            std::lock_guard lock(g_mu);
            std::vector<Seen> now;
            auto look = [&](const void* rec) {
                const std::uint32_t v = load_be32(rec);
                now.push_back({rec, v});
                auto it = std::find_if(seen.begin(), seen.end(), [&](const Seen& s) { return s.key == rec; });
                moved |= it == seen.end() ? v != 0 : it->value != v;
            };
            for (Qp* q : g_qps) {
                const __be32* db = q->sq->descriptor().dbrec;
                look(&db[MLX5_SND_DBR]);
                look(&db[MLX5_RCV_DBR]);
                if (q->state == QpState::reset && (q->reset_db[0] != load_be32(&db[0]) || q->reset_db[1] != load_be32(&db[1])))
                    trap("QP 0x%x: work posted while it is in RESET", q->qp.qp_num);
                if (q->direct && q->pd->td) { // the register's doorbell names this QP
                    const std::uint8_t* bf = q->pd->td->uar + 0x800;
                    for (int half = 0; half < 2; ++half) {
                        const std::uint32_t qpn_ds = load_be32(bf + half * 256 + 4);
                        if (qpn_ds && (qpn_ds >> 8) != q->qp.qp_num)
                            trap("QP 0x%x's BlueFlame register rung for QP 0x%x", q->qp.qp_num, qpn_ds >> 8);
                    }
                }
            }
            for (Srq* s : g_srqs)
                look(s->ssrq->descriptor().dbrec);
            seen = std::move(now);
            for (Cq* c : g_cqs)
                check_arm(c);
        }
        if (moved) {
            // Woken whether it sleeps or not (a fence-free check of its
            // flag would need our own store to the records): a spare wake
            // costs the engine one round.
            const fastdapl::fastpath::SoftwareDoorbell d = device().doorbell();
            const std::uint64_t one = 1;
            [[maybe_unused]] ssize_t n = ::write(d.wake_fd, &one, sizeof one);
            device().progress();
            idle = 0;
        } else if (++idle % 64 == 0) {
            device().progress(); // a receive posted for a message that waits, and the like
        }
        std::this_thread::sleep_for(std::chrono::microseconds(idle < 1000 ? 10 : 200));
    }
}

// FAKE_MLX5_NO_WINDOWS=1: a device without memory windows (max_mw 0,
// no alloc_mw), to check that the IA says so and refuses them.
bool device_has_windows()
{
    static const bool none = [] {
        const char* v = std::getenv("FAKE_MLX5_NO_WINDOWS");
        return v && v[0] == '1';
    }();
    return !none;
}

// --- generic data path (ibv_post_* / ibv_poll_cq through the context's ops) ---

int no_generic(const char* what)
{
    trap("%s: the generic verbs data path is not modelled (run with FASTDAPL_MLX5_DIRECT=1)", what);
}

int op_poll_cq(ibv_cq* cq, int, ibv_wc*)
{
    if (reinterpret_cast<Cq*>(cq)->dv_owned)
        trap("ibv_poll_cq on CQ %u, which mlx5dv_init_obj handed to direct access", reinterpret_cast<Cq*>(cq)->cqn);
    return no_generic("ibv_poll_cq");
}
int op_req_notify_cq(ibv_cq* cq, int)
{
    if (reinterpret_cast<Cq*>(cq)->dv_owned)
        trap("ibv_req_notify_cq on CQ %u, which mlx5dv_init_obj handed to direct access (its consumer index is "
             "not rdma-core's)",
             reinterpret_cast<Cq*>(cq)->cqn);
    return no_generic("ibv_req_notify_cq");
}
int op_post_send(ibv_qp*, ibv_send_wr*, ibv_send_wr**) { return no_generic("ibv_post_send"); }
int op_post_recv(ibv_qp*, ibv_recv_wr*, ibv_recv_wr**) { return no_generic("ibv_post_recv"); }
int op_post_srq_recv(ibv_srq*, ibv_recv_wr*, ibv_recv_wr**) { return no_generic("ibv_post_srq_recv"); }
// libmlx5's ibv_bind_mw posts a UMR WQE on the QP behind the direct path's back.
int op_bind_mw(ibv_qp*, ibv_mw*, ibv_mw_bind*)
{
    return no_generic("ibv_bind_mw");
}

// Memory windows: a key of the softnic's memory table (a window of the
// PD, of its IB type), bound by the UMR WQEs the direct path posts.
struct Mw {
    ibv_mw mw{};
    Pd* pd = nullptr;
};

ibv_mw* op_alloc_mw(ibv_pd* pd, ibv_mw_type type)
{
    if (type != IBV_MW_TYPE_1 && type != IBV_MW_TYPE_2) {
        errno = EINVAL;
        return nullptr;
    }
    std::lock_guard lock(g_mu);
    Pd* p = reinterpret_cast<Pd*>(pd);
    if (p->base) { // as mlx5: a window belongs to a plain PD
        errno = EINVAL;
        return nullptr;
    }
    const std::uint32_t key = device().memory().add_window(p->snpd, type == IBV_MW_TYPE_1 ? 1 : 2);
    if (key == 0) {
        errno = ENOMEM;
        return nullptr;
    }
    auto* m = new Mw;
    m->pd = p;
    m->mw.context = pd->context;
    m->mw.pd = pd;
    m->mw.rkey = key;
    m->mw.handle = key;
    m->mw.type = type;
    ++p->users;
    return &m->mw;
}

int op_dealloc_mw(ibv_mw* mw)
{
    std::lock_guard lock(g_mu);
    Mw* m = reinterpret_cast<Mw*>(mw);
    // The slot, whatever generation the window's key has reached (the
    // library's rkey may run ahead of a bind that failed).
    if (!device().memory().remove_window(mw->handle >> 8, m->pd->snpd))
        trap("ibv_dealloc_mw: window 0x%x is not in the device's table", mw->rkey);
    --m->pd->users;
    delete m;
    return 0;
}

// --- thread and parent domains (verbs_context ops) ----------------------------

ibv_td* op_alloc_td(ibv_context* ctx, ibv_td_init_attr* attr)
{
    if (attr && attr->comp_mask) {
        errno = EINVAL;
        return nullptr;
    }
    auto* t = new Td;
    t->td.context = ctx;
    t->uar = uar_page();
    return &t->td;
}

int op_dealloc_td(ibv_td* td)
{
    std::lock_guard lock(g_mu);
    auto* t = reinterpret_cast<Td*>(td);
    if (t->parents > 0)
        return EBUSY;
    std::free(t->uar);
    delete t;
    return 0;
}

ibv_pd* op_alloc_parent_domain(ibv_context* ctx, ibv_parent_domain_init_attr* attr)
{
    if (!attr || !attr->pd || attr->comp_mask) {
        errno = EINVAL;
        return nullptr;
    }
    std::lock_guard lock(g_mu);
    auto* p = new Pd;
    p->pd.context = ctx;
    p->base = reinterpret_cast<Pd*>(attr->pd);
    p->snpd = p->base->snpd;
    p->td = reinterpret_cast<Td*>(attr->td);
    ++p->base->users;
    if (p->td)
        ++p->td->parents;
    return &p->pd;
}

int op_query_port(ibv_context*, uint8_t port, ibv_port_attr* a, size_t);

Context* make_context()
{
    auto* c = new Context;
    c->v.sz = sizeof(verbs_context);
    c->v.alloc_td = op_alloc_td;
    c->v.dealloc_td = op_dealloc_td;
    c->v.alloc_parent_domain = op_alloc_parent_domain;
    c->v.query_port = op_query_port;
    ibv_context& ctx = c->v.context;
    ctx.device = &g_device;
    ctx.abi_compat = __VERBS_ABI_IS_EXTENDED;
    ctx.ops.poll_cq = op_poll_cq;
    ctx.ops.req_notify_cq = op_req_notify_cq;
    ctx.ops.post_send = op_post_send;
    ctx.ops.post_recv = op_post_recv;
    ctx.ops.post_srq_recv = op_post_srq_recv;
    if (device_has_windows()) {
        ctx.ops.alloc_mw = op_alloc_mw;
        ctx.ops.dealloc_mw = op_dealloc_mw;
        ctx.ops.bind_mw = op_bind_mw;
    }
    c->async.fd = ::eventfd(0, EFD_SEMAPHORE | EFD_CLOEXEC);
    ctx.async_fd = c->async.fd;
    ctx.cmd_fd = -1;
    pthread_mutex_init(&ctx.mutex, nullptr);
    return c;
}

Context* ctx_of(ibv_context* ctx) { return reinterpret_cast<Context*>(reinterpret_cast<std::uint8_t*>(ctx) - offsetof(verbs_context, context)); }

void post_async(ibv_context* ctx, ibv_event_type type, void* element)
{
    ibv_async_event ev{};
    ev.event_type = type;
    if (type == IBV_EVENT_SRQ_LIMIT_REACHED || type == IBV_EVENT_SRQ_ERR)
        ev.element.srq = static_cast<ibv_srq*>(element);
    ctx_of(ctx)->async.push(ev);
}
void on_srq_limit(void* srq) { post_async(static_cast<ibv_srq*>(srq)->context, IBV_EVENT_SRQ_LIMIT_REACHED, srq); }
void on_srq_error(void* srq) { post_async(static_cast<ibv_srq*>(srq)->context, IBV_EVENT_SRQ_ERR, srq); }

int op_query_port(ibv_context*, uint8_t port, ibv_port_attr* a, size_t)
{
    if (port != 1)
        return EINVAL;
    *a = ibv_port_attr{};
    a->state = IBV_PORT_ACTIVE;
    a->max_mtu = IBV_MTU_4096;
    a->active_mtu = IBV_MTU_4096;
    a->gid_tbl_len = 256;
    a->port_cap_flags = IBV_PORT_CM_SUP;
    a->max_msg_sz = sn::kMaxMessageSize;
    a->pkey_tbl_len = 1;
    a->max_vl_num = 4;
    a->active_width = 2;   // 4x
    a->active_speed = 32;  // EDR
    a->phys_state = 5;     // link up
    a->link_layer = IBV_LINK_LAYER_ETHERNET;
    return 0;
}

Cq* new_cq(ibv_context* ctx, int cqe, void* cq_context, ibv_comp_channel* channel)
{
    if (cqe < 1 || cqe > 65535) {
        errno = EINVAL;
        return nullptr;
    }
    sn::Cq* s = device().create_cq(static_cast<std::uint32_t>(cqe) + 1); // rdma-core: a power of two above cqe
    if (!s) {
        errno = ENOMEM;
        return nullptr;
    }
    auto* c = new Cq;
    c->scq = s;
    c->cq.context = ctx;
    c->cq.cq_context = cq_context;
    c->cq.channel = channel;
    c->cq.cqe = static_cast<int>(s->descriptor().cqe_cnt) - 1;
    pthread_mutex_init(&c->cq.mutex, nullptr);
    pthread_cond_init(&c->cq.cond, nullptr);
    c->channel = reinterpret_cast<Channel*>(channel);
    c->uar = uar_page();
    std::lock_guard lock(g_mu);
    c->cqn = g_next_cqn++;
    s->set_notify(on_cq_notify, c);
    g_cqs.push_back(c);
    return c;
}

// CQEs of `qpn` that software has not consumed and nobody cleaned.
bool has_cqes_of(const Cq* c, std::uint32_t qpn)
{
    const std::uint32_t ci = load_be32(&c->scq->descriptor().dbrec[0]) & 0xffffff;
    for (std::uint32_t i = ci; i - ci < c->scq->descriptor().cqe_cnt; ++i) {
        const mlx5_cqe64* cqe = sw_cqe(c, i);
        if (!cqe)
            return false;
        if ((be32toh(cqe->sop_drop_qpn) & 0xffffff) == qpn)
            return true;
    }
    return false;
}

} // namespace

sn::Device& device()
{
    static sn::Device* d = [] {
        auto* dev = new sn::Device; // never destroyed: its threads run until exit
        std::thread(pump).detach();
        return dev;
    }();
    return *d;
}

ibv_context* shared_context()
{
    std::lock_guard lock(g_mu);
    if (!g_shared)
        g_shared = make_context();
    return &g_shared->v.context;
}

Qp* qp_of(ibv_qp* qp) { return reinterpret_cast<Qp*>(qp); }

// Moves a queue pair as ibv_modify_qp does (verbs' state table, RC).
int set_state(Qp* q, QpState to)
{
    std::lock_guard lock(g_mu);
    const QpState from = q->state;
    const bool ok = to == QpState::reset || to == QpState::error || (to == QpState::init && (from == QpState::reset || from == QpState::init)) ||
                    (to == QpState::rtr && from == QpState::init) ||
                    (to == QpState::rts && (from == QpState::rtr || from == QpState::rts));
    if (!ok)
        return EINVAL;
    // ERROR flushes what the queue pair holds (receives posted in INIT too).
    // RESET of a connected one: the softnic cannot forget its queues, so
    // they flush first (the consumer cleans them before the destroy anyway).
    const sn::QpState now = q->sq->state();
    if ((to == QpState::error && now != sn::QpState::error) || (to == QpState::reset && now == sn::QpState::ready))
        device().disconnect(q->sq);
    if (to == QpState::reset)
        for (int i = 0; i < 2; ++i)
            q->reset_db[i] = load_be32(&q->sq->descriptor().dbrec[i]);
    q->state = to;
    q->qp.state = static_cast<ibv_qp_state>(to == QpState::reset ? IBV_QPS_RESET : to == QpState::init ? IBV_QPS_INIT
                                                : to == QpState::rtr ? IBV_QPS_RTR : to == QpState::rts ? IBV_QPS_RTS
                                                                                           : IBV_QPS_ERR);
    return 0;
}

} // namespace fake

using namespace fake;

// --- devices and contexts ---------------------------------------------------------

FAKE_API ibv_device** ibv_get_device_list(int* n)
{
    std::snprintf(g_device.name, sizeof g_device.name, "mlx5_0");
    std::snprintf(g_device.dev_name, sizeof g_device.dev_name, "uverbs0");
    g_device.node_type = IBV_NODE_CA;
    g_device.transport_type = IBV_TRANSPORT_IB;
    if (n)
        *n = 1;
    auto** list = static_cast<ibv_device**>(std::malloc(sizeof g_device_list));
    std::memcpy(list, g_device_list, sizeof g_device_list);
    return list;
}
FAKE_API void ibv_free_device_list(ibv_device** list) { std::free(list); }
FAKE_API const char* ibv_get_device_name(ibv_device* d) { return d->name; }
FAKE_API bool mlx5dv_is_supported(ibv_device* d) { return d == &g_device; }
FAKE_API ibv_context* ibv_open_device(ibv_device*) { return &make_context()->v.context; }
FAKE_API int ibv_close_device(ibv_context* ctx)
{
    if (ctx == shared_context())
        return 0; // librdmacm's stays open
    Context* c = ctx_of(ctx);
    ::close(c->async.fd);
    delete c;
    return 0;
}

FAKE_API int ibv_query_device(ibv_context*, ibv_device_attr* a)
{
    *a = ibv_device_attr{};
    std::snprintf(a->fw_ver, sizeof a->fw_ver, "16.35.0000 (fake)");
    a->node_guid = htobe64(0x0002c90300fa4e00ull);
    a->sys_image_guid = a->node_guid;
    a->max_mr_size = ~0ull;
    a->page_size_cap = 0xfffff000;
    a->vendor_id = 0x02c9;
    a->vendor_part_id = 4119; // ConnectX-5
    a->max_qp = 1 << 16;      // the softnic numbers 64 Ki queue pairs
    a->max_qp_wr = 16384;
    a->device_cap_flags = IBV_DEVICE_SRQ_RESIZE | IBV_DEVICE_RC_RNR_NAK_GEN;
    a->max_sge = 16;
    a->max_sge_rd = 16;
    a->max_cq = 1 << 24;
    a->max_cqe = 65535;
    a->max_mr = 1 << 24;
    a->max_mw = device_has_windows() ? 1 << 24 : 0;
    a->max_pd = 1 << 24;
    a->max_qp_rd_atom = 16;
    a->max_res_rd_atom = 16 << 16;
    a->max_qp_init_rd_atom = 16;
    a->atomic_cap = device_has_atomics() ? IBV_ATOMIC_HCA : IBV_ATOMIC_NONE;
    a->max_srq = 1 << 23;
    a->max_srq_wr = 16384;
    a->max_srq_sge = 16;
    a->max_pkeys = 128;
    a->local_ca_ack_delay = 16;
    a->phys_port_cnt = 1;
    return 0;
}

FAKE_API int ibv_query_port(ibv_context* ctx, uint8_t port, _compat_ibv_port_attr* a)
{
    return op_query_port(ctx, port, reinterpret_cast<ibv_port_attr*>(a), sizeof(ibv_port_attr));
}

FAKE_API int ibv_query_gid(ibv_context*, uint8_t port, int index, ibv_gid* gid)
{
    if (port != 1 || index < 0 || index >= 256)
        return -1;
    *gid = ibv_gid{};
    if (index == 0) { // RoCE v2 of lo's 127.0.0.1 (discovery reads its type and netdev from sysfs)
        gid->raw[10] = gid->raw[11] = 0xff;
        gid->raw[12] = 127;
        gid->raw[15] = 1;
    }
    return 0;
}

FAKE_API int ibv_get_async_event(ibv_context* ctx, ibv_async_event* ev)
{
    return ctx_of(ctx)->async.pop(*ev) ? 0 : -1;
}
FAKE_API void ibv_ack_async_event(ibv_async_event*) {}

// --- PD, MR ------------------------------------------------------------------------

FAKE_API ibv_pd* ibv_alloc_pd(ibv_context* ctx)
{
    auto* p = new Pd;
    p->pd.context = ctx;
    p->snpd = device().alloc_pd();
    return &p->pd;
}

FAKE_API int ibv_dealloc_pd(ibv_pd* pd)
{
    std::lock_guard lock(g_mu);
    Pd* p = reinterpret_cast<Pd*>(pd);
    if (p->users > 0)
        return EBUSY;
    if (p->base) {
        --p->base->users;
        if (p->td)
            --p->td->parents;
    }
    delete p;
    return 0;
}

FAKE_API ibv_mr* ibv_reg_mr_iova2(ibv_pd* pd, void* addr, size_t length, uint64_t iova, unsigned int access)
{
    // Remote write or atomics need local write (verbs); remote atomics need
    // a device that has them. The region is addressed from iova (the
    // softnic's memory table translates).
    if (((access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) && !(access & IBV_ACCESS_LOCAL_WRITE)) ||
        ((access & IBV_ACCESS_REMOTE_ATOMIC) && !device_has_atomics())) {
        errno = EINVAL;
        return nullptr;
    }
    std::uint32_t a = sn::kLocalRead;
    a |= (access & IBV_ACCESS_LOCAL_WRITE) ? std::uint32_t{sn::kLocalWrite} : 0u;
    a |= (access & IBV_ACCESS_REMOTE_READ) ? std::uint32_t{sn::kRemoteRead} : 0u;
    a |= (access & IBV_ACCESS_REMOTE_WRITE) ? std::uint32_t{sn::kRemoteWrite} : 0u;
    std::lock_guard lock(g_mu);
    Pd* p = reinterpret_cast<Pd*>(pd);
    auto* m = new Mr;
    m->pd = p;
    m->mr.context = pd->context;
    m->mr.pd = pd;
    m->mr.addr = addr;
    m->mr.length = length;
    sn::RangeFault fault = sn::RangeFault::none;
    m->mr.lkey = m->mr.rkey =
        device().memory().add_at(iova, reinterpret_cast<std::uintptr_t>(addr), length, a, p->snpd, &fault);
    if (m->mr.lkey == 0) { // as the kernel: EFAULT for memory it cannot pin
        delete m;
        errno = fault == sn::RangeFault::none ? ENOMEM : EFAULT;
        return nullptr;
    }
    ++p->users;
    return &m->mr;
}
FAKE_API ibv_mr* ibv_reg_mr(ibv_pd* pd, void* addr, size_t length, int access)
{
    return ibv_reg_mr_iova2(pd, addr, length, reinterpret_cast<std::uintptr_t>(addr), static_cast<unsigned>(access));
}

FAKE_API int ibv_dereg_mr(ibv_mr* mr)
{
    std::lock_guard lock(g_mu);
    Mr* m = reinterpret_cast<Mr*>(mr);
    device().memory().remove(mr->lkey);
    --m->pd->users;
    delete m;
    return 0;
}

// --- completion channels and CQs -------------------------------------------------

FAKE_API ibv_comp_channel* ibv_create_comp_channel(ibv_context* ctx)
{
    auto* c = new Channel;
    c->q.fd = ::eventfd(0, EFD_SEMAPHORE | EFD_CLOEXEC);
    c->ch.context = ctx;
    c->ch.fd = c->q.fd;
    return &c->ch;
}

FAKE_API int ibv_destroy_comp_channel(ibv_comp_channel* ch)
{
    std::lock_guard lock(g_mu);
    for (Cq* c : g_cqs)
        if (c->channel == reinterpret_cast<Channel*>(ch))
            return EBUSY;
    ::close(ch->fd);
    delete reinterpret_cast<Channel*>(ch);
    return 0;
}

FAKE_API int ibv_get_cq_event(ibv_comp_channel* ch, ibv_cq** cq, void** cq_context)
{
    Cq* c = nullptr;
    if (!reinterpret_cast<Channel*>(ch)->q.pop(c))
        return -1;
    ++c->reported; // as uverbs counts them: events read, not events queued
    *cq = reinterpret_cast<ibv_cq*>(&c->cq);
    *cq_context = c->cq.cq_context;
    return 0;
}

FAKE_API void ibv_ack_cq_events(ibv_cq* cq, unsigned int n)
{
    std::lock_guard lock(g_mu);
    reinterpret_cast<Cq*>(cq)->acked += n;
    g_acked.notify_all();
}

FAKE_API ibv_cq* ibv_create_cq(ibv_context* ctx, int cqe, void* cq_context, ibv_comp_channel* channel, int)
{
    return reinterpret_cast<ibv_cq*>(new_cq(ctx, cqe, cq_context, channel));
}

FAKE_API ibv_cq_ex* mlx5dv_create_cq(ibv_context* ctx, ibv_cq_init_attr_ex* attr, mlx5dv_cq_init_attr* dv)
{
    if (dv && dv->comp_mask) { // CQE compression, CQE size: not modelled
        errno = EOPNOTSUPP;
        return nullptr;
    }
    Cq* c = new_cq(ctx, static_cast<int>(attr->cqe), attr->cq_context, attr->channel);
    return c ? &c->cq : nullptr;
}

FAKE_API int ibv_resize_cq(ibv_cq*, int) { return no_generic("ibv_resize_cq"); }

FAKE_API int ibv_destroy_cq(ibv_cq* cq)
{
    Cq* c = reinterpret_cast<Cq*>(cq);
    {
        std::unique_lock lock(g_mu);
        if (c->users > 0)
            return EBUSY;
        wait_acked(lock, [c] { return c->acked.load() == c->reported.load(); }, "ibv_destroy_cq");
        g_cqs.erase(std::find(g_cqs.begin(), g_cqs.end(), c));
    }
    device().destroy_cq(c->scq); // no notification names it after this
    if (c->channel) { // its events not yet read go with it, as uverbs drops them
        std::lock_guard lock(c->channel->q.mu);
        auto& items = c->channel->q.items;
        items.erase(std::remove(items.begin(), items.end(), c), items.end());
    }
    std::free(c->uar);
    delete c;
    return 0;
}

// --- SRQ ---------------------------------------------------------------------------

FAKE_API ibv_srq* ibv_create_srq(ibv_pd* pd, ibv_srq_init_attr* init)
{
    const std::uint32_t max_wr = init->attr.max_wr, max_sge = init->attr.max_sge;
    if (max_wr == 0 || max_wr > 16384 || max_sge == 0 || max_sge > 16) {
        errno = EINVAL;
        return nullptr;
    }
    // rdma-core's mlx5: 2 * max_wr + 1 WQEs if the device allows (a wait
    // queue off the free list), the free list 0 .. pow2(max_wr + 1) - 1.
    const bool wait_queue = 2 * max_wr + 1 <= 16384;
    sn::Srq* s = device().create_srq(reinterpret_cast<Pd*>(pd)->snpd, wait_queue ? 2 * max_wr + 1 : max_wr + 1, max_sge);
    if (!s) {
        errno = ENOMEM;
        return nullptr;
    }
    std::uint32_t tail = 1;
    while (tail < max_wr + 1)
        tail <<= 1;
    --tail;
    const mlx5dv_srq& d = s->descriptor();
    auto link = [&](std::uint32_t from, std::uint32_t to) {
        for (std::uint32_t i = from; i < to; ++i)
            reinterpret_cast<mlx5_wqe_srq_next_seg*>(static_cast<std::uint8_t*>(d.buf) + static_cast<std::size_t>(i) * d.stride)
                ->next_wqe_index = htobe16(static_cast<std::uint16_t>(i + 1));
    };
    link(0, tail);
    if (wait_queue)
        link(tail + 1, s->wqe_cnt() - 1);
    auto* r = new Srq;
    r->ssrq = s;
    r->pd = reinterpret_cast<Pd*>(pd);
    r->tail = tail;
    r->srq.context = pd->context;
    r->srq.srq_context = init->srq_context;
    r->srq.pd = pd;
    pthread_mutex_init(&r->srq.mutex, nullptr);
    pthread_cond_init(&r->srq.cond, nullptr);
    s->set_callbacks(on_srq_limit, on_srq_error, &r->srq);
    init->attr.max_wr = tail; // the list keeps one WQE unused
    init->attr.max_sge = s->max_sge();
    std::lock_guard lock(g_mu);
    ++r->pd->users;
    g_srqs.push_back(r);
    return &r->srq;
}

FAKE_API int ibv_modify_srq(ibv_srq* srq, ibv_srq_attr* attr, int mask)
{
    if (mask & IBV_SRQ_MAX_WR)
        return EINVAL; // mlx5 does not resize SRQs
    if (mask & IBV_SRQ_LIMIT)
        device().arm_srq_limit(reinterpret_cast<Srq*>(srq)->ssrq, attr->srq_limit);
    return 0;
}

FAKE_API int ibv_destroy_srq(ibv_srq* srq)
{
    Srq* r = reinterpret_cast<Srq*>(srq);
    {
        std::lock_guard lock(g_mu);
        if (r->users > 0)
            return EBUSY;
        g_srqs.erase(std::find(g_srqs.begin(), g_srqs.end(), r));
        --r->pd->users;
    }
    device().destroy_srq(r->ssrq);
    delete r;
    return 0;
}

// --- QPs ---------------------------------------------------------------------------

namespace {

ibv_qp* create_qp(Pd* p, ibv_qp_init_attr_ex* a, bool direct)
{
    ibv_qp_cap& cap = a->cap;
    if ((a->qp_type != IBV_QPT_RC && a->qp_type != IBV_QPT_UD) || !a->send_cq || !a->recv_cq || cap.max_send_wr > 16384 || cap.max_recv_wr > 16384 ||
        cap.max_send_sge > 16 || cap.max_recv_sge > 16 || cap.max_inline_data > 256) {
        errno = EINVAL;
        return nullptr;
    }
    std::lock_guard lock(g_mu);
    if (direct && p->td && p->td->user)
        trap("a second QP on thread domain %p: QP 0x%x rings its BlueFlame register already", static_cast<void*>(p->td),
             p->td->user->qp.qp_num);
    Cq* scq = reinterpret_cast<Cq*>(a->send_cq);
    Cq* rcq = reinterpret_cast<Cq*>(a->recv_cq);
    Srq* srq = reinterpret_cast<Srq*>(a->srq);
    const std::uint32_t max_sge = std::max({cap.max_send_sge, srq ? 1u : cap.max_recv_sge, 1u});
    sn::Qp* s = device().create_qp(p->snpd, scq->scq, rcq->scq, std::max(cap.max_send_wr, 1u),
                                   srq ? 0 : std::max(cap.max_recv_wr, 1u), max_sge, cap.max_inline_data,
                                   srq ? srq->ssrq : nullptr);
    if (!s) {
        errno = ENOMEM;
        return nullptr;
    }
    if (a->qp_type == IBV_QPT_UD) { // a datagram queue pair on the port's address (see fake.hpp)
        sockaddr_in local{}, bound{};
        local.sin_family = AF_INET;
        local.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (!device().open_datagrams(s, local, bound)) {
            device().destroy_qp(s);
            errno = ENOMEM;
            return nullptr;
        }
    }
    auto* q = new Qp;
    q->sq = s;
    q->pd = p;
    q->send_cq = scq;
    q->recv_cq = rcq;
    q->direct = direct;
    q->qp.context = p->pd.context;
    q->qp.qp_context = a->qp_context;
    q->qp.pd = &p->pd;
    q->qp.send_cq = a->send_cq;
    q->qp.recv_cq = a->recv_cq;
    q->qp.srq = a->srq;
    q->qp.qp_num = s->qpn();
    q->qp.state = IBV_QPS_RESET;
    q->qp.qp_type = a->qp_type;
    pthread_mutex_init(&q->qp.mutex, nullptr);
    pthread_cond_init(&q->qp.cond, nullptr);
    if (srq)
        cap.max_recv_wr = cap.max_recv_sge = 0;
    ++p->users;
    ++scq->users;
    ++rcq->users;
    if (srq)
        ++srq->users;
    if (direct && p->td)
        p->td->user = q;
    g_qps.push_back(q);
    return &q->qp;
}

} // namespace

FAKE_API ibv_qp* ibv_create_qp(ibv_pd* pd, ibv_qp_init_attr* init)
{
    ibv_qp_init_attr_ex a{};
    std::memcpy(&a, init, sizeof *init);
    ibv_qp* qp = create_qp(reinterpret_cast<Pd*>(pd), &a, false);
    if (qp)
        init->cap = a.cap;
    return qp;
}

FAKE_API ibv_qp* mlx5dv_create_qp(ibv_context*, ibv_qp_init_attr_ex* a, mlx5dv_qp_init_attr* dv)
{
    if (!(a->comp_mask & IBV_QP_INIT_ATTR_PD) || !a->pd) {
        errno = EINVAL;
        return nullptr;
    }
    if (!dv || !(dv->comp_mask & MLX5DV_QP_INIT_ATTR_MASK_QP_CREATE_FLAGS) ||
        !(dv->create_flags & MLX5DV_QP_CREATE_DISABLE_SCATTER_TO_CQE))
        trap("mlx5dv_create_qp without MLX5DV_QP_CREATE_DISABLE_SCATTER_TO_CQE: small receives would land in CQEs");
    Pd* p = reinterpret_cast<Pd*>(a->pd);
    if (!p->base || !p->td)
        trap("mlx5dv_create_qp not on a parent domain with a thread domain: its BlueFlame register is shared and "
             "rdma-core's lock, which direct posts skip, guards it");
    return create_qp(p, a, true);
}

FAKE_API int ibv_modify_qp(ibv_qp* qp, ibv_qp_attr* attr, int mask)
{
    if (!(mask & IBV_QP_STATE))
        return 0;
    if (qp->qp_type == IBV_QPT_UD && attr->qp_state == IBV_QPS_INIT) {
        // verbs: RESET to INIT of a UD queue pair names its qkey (and port, pkey).
        if ((mask & (IBV_QP_QKEY | IBV_QP_PORT | IBV_QP_PKEY_INDEX)) != (IBV_QP_QKEY | IBV_QP_PORT | IBV_QP_PKEY_INDEX) ||
            attr->port_num != 1 || attr->qkey == 0)
            return EINVAL;
        const int rc = set_state(qp_of(qp), QpState::init);
        if (rc == 0 && !device().set_datagram_qkey(qp_of(qp)->sq, attr->qkey))
            return EINVAL;
        return rc;
    }
    switch (attr->qp_state) {
    case IBV_QPS_RESET: return set_state(qp_of(qp), QpState::reset);
    case IBV_QPS_INIT: return set_state(qp_of(qp), QpState::init);
    case IBV_QPS_RTR: return set_state(qp_of(qp), QpState::rtr);
    case IBV_QPS_RTS: return set_state(qp_of(qp), QpState::rts);
    case IBV_QPS_ERR: return set_state(qp_of(qp), QpState::error);
    default: return EINVAL;
    }
}

// --- address handles ------------------------------------------------------------

// RoCE v2 address handles over IPv4: the AV as rdma-core's mlx5 builds it
// (see fake.hpp for what the model reads of it).
FAKE_API ibv_ah* ibv_create_ah(ibv_pd* pd, ibv_ah_attr* attr)
{
    static constexpr std::uint8_t kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    // RoCE needs a GRH; GID 0 is the port's only one; the model's datagrams are IPv4.
    if (!pd || !attr || attr->port_num != 1 || !attr->is_global || attr->grh.sgid_index != 0 ||
        std::memcmp(attr->grh.dgid.raw, kMapped, sizeof kMapped) != 0) {
        errno = EINVAL;
        return nullptr;
    }
    auto* a = new Ah;
    a->ah.context = pd->context;
    a->ah.pd = pd;
    mlx5_wqe_av& av = a->av;
    av.stat_rate_sl = static_cast<std::uint8_t>(attr->sl & 0xf);
    static std::atomic<std::uint16_t> sport{0};
    av.rlid = htobe16(static_cast<std::uint16_t>(0xc000 | (sport++ & 0x3fff))); // RoCE v2: the UDP source port
    // rmac: lo's, all zeros.
    av.tclass = attr->grh.traffic_class;
    av.hop_limit = attr->grh.hop_limit;
    av.grh_gid_fl = htobe32(1u << 30 | static_cast<std::uint32_t>(attr->grh.sgid_index) << 20 |
                            (attr->grh.flow_label & 0xfffff));
    std::memcpy(av.rgid, attr->grh.dgid.raw, 16);
    std::lock_guard lock(g_mu);
    a->pd = reinterpret_cast<Pd*>(pd);
    ++a->pd->users;
    g_ahs.push_back(a);
    return &a->ah;
}

FAKE_API int ibv_destroy_ah(ibv_ah* ah)
{
    std::lock_guard lock(g_mu);
    auto* a = reinterpret_cast<Ah*>(ah);
    const auto it = std::find(g_ahs.begin(), g_ahs.end(), a);
    if (it == g_ahs.end())
        trap("ibv_destroy_ah on %p, which is no live address handle (rdma-core would free it twice)", static_cast<void*>(ah));
    g_ahs.erase(it);
    --a->pd->users;
    delete a;
    return 0;
}

FAKE_API int _ibv_query_gid_ex(ibv_context*, uint32_t port, uint32_t index, ibv_gid_entry* entry, uint32_t flags,
                               size_t entry_size)
{
    if (port != 1 || flags != 0 || entry_size < sizeof(ibv_gid_entry))
        return EINVAL;
    if (index != 0)
        return ENODATA; // an empty entry
    *entry = ibv_gid_entry{};
    entry->gid.raw[10] = entry->gid.raw[11] = 0xff; // RoCE v2 of lo's 127.0.0.1, as ibv_query_gid
    entry->gid.raw[12] = 127;
    entry->gid.raw[15] = 1;
    entry->gid_index = 0;
    entry->port_num = 1;
    entry->gid_type = IBV_GID_TYPE_ROCE_V2;
    entry->ndev_ifindex = 1;
    return 0;
}

FAKE_API int ibv_destroy_qp(ibv_qp* qp)
{
    Qp* q = qp_of(qp);
    {
        std::lock_guard lock(g_mu);
        // rdma-core cleans a QP's CQEs from its CQs at destroy, except from
        // CQs that are DV-owned: those must be cleaned by their owner, after
        // RESET stopped the QP (else stale CQEs name a dead, reusable QPN).
        for (Cq* c : {q->send_cq, q->recv_cq}) {
            if (!c->dv_owned)
                continue;
            if (q->state != QpState::reset)
                trap("ibv_destroy_qp on QP 0x%x (DV-owned CQ %u) that was not moved to RESET first", qp->qp_num, c->cqn);
            if (has_cqes_of(c, qp->qp_num))
                trap("ibv_destroy_qp on QP 0x%x with CQEs of it still in DV-owned CQ %u (not consumed, not cleaned)",
                     qp->qp_num, c->cqn);
        }
        g_qps.erase(std::find(g_qps.begin(), g_qps.end(), q));
        --q->pd->users;
        --q->send_cq->users;
        --q->recv_cq->users;
        if (q->qp.srq)
            --reinterpret_cast<Srq*>(q->qp.srq)->users;
        if (q->pd->td && q->pd->td->user == q)
            q->pd->td->user = nullptr;
    }
    device().destroy_qp(q->sq);
    delete q;
    return 0;
}

// --- mlx5dv_init_obj ---------------------------------------------------------------

FAKE_API int mlx5dv_init_obj(mlx5dv_obj* obj, uint64_t types)
{
    std::lock_guard lock(g_mu);
    if (types & MLX5DV_OBJ_QP) {
        Qp* q = qp_of(obj->qp.in);
        mlx5dv_qp& o = *obj->qp.out;
        const mlx5dv_qp& d = q->sq->descriptor();
        o.dbrec = d.dbrec;
        o.sq = {d.sq.buf, d.sq.wqe_cnt, d.sq.stride};
        o.rq = {d.rq.buf, q->qp.srq ? 0 : d.rq.wqe_cnt, d.rq.stride};
        // A thread domain's own register (BlueFlame, 256-byte halves); a
        // plain PD shares the context's, as uuar 0 without BlueFlame.
        static std::uint8_t* const shared_uar = uar_page();
        o.bf.reg = (q->pd->td ? q->pd->td->uar : shared_uar) + 0x800;
        o.bf.size = q->pd->td ? 256 : 0;
        o.comp_mask = 0;
    }
    if (types & MLX5DV_OBJ_CQ) {
        Cq* c = reinterpret_cast<Cq*>(obj->cq.in);
        mlx5dv_cq& o = *obj->cq.out;
        const mlx5dv_cq& d = c->scq->descriptor();
        o.buf = d.buf;
        o.dbrec = d.dbrec; // [0] SET_CI, [1] the arm word
        o.cqe_cnt = d.cqe_cnt;
        o.cqe_size = d.cqe_size;
        o.cq_uar = c->uar;
        o.cqn = c->cqn;
        o.comp_mask = 0;
        c->dv_owned = true; // from here on rdma-core no longer knows its consumer index
    }
    if (types & MLX5DV_OBJ_SRQ) {
        Srq* r = reinterpret_cast<Srq*>(obj->srq.in);
        mlx5dv_srq& o = *obj->srq.out;
        const mlx5dv_srq& d = r->ssrq->descriptor();
        o.buf = d.buf;
        o.dbrec = d.dbrec;
        o.stride = d.stride;
        o.head = r->head;
        o.tail = r->tail;
        o.comp_mask = 0;
    }
    if (types & MLX5DV_OBJ_AH) {
        auto* a = reinterpret_cast<Ah*>(obj->ah.in);
        if (std::find(g_ahs.begin(), g_ahs.end(), a) == g_ahs.end())
            trap("mlx5dv_init_obj(MLX5DV_OBJ_AH) on %p, which is no live address handle", static_cast<void*>(obj->ah.in));
        obj->ah.out->av = &a->av;
        obj->ah.out->comp_mask = 0;
    }
    if (types & ~static_cast<uint64_t>(MLX5DV_OBJ_QP | MLX5DV_OBJ_CQ | MLX5DV_OBJ_SRQ | MLX5DV_OBJ_AH))
        return EOPNOTSUPP;
    return 0;
}
