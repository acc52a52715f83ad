// Google Benchmark: the same work through uDAPL (libdat2 + libfastdapl, the
// public dat_* API) and through plain libibverbs, on one rdma-core device,
// in one process. Each pair of benchmarks does the same thing both ways:
//   BM_{dat,verbs}_pingpong/LEN  send LEN bytes from A to B, B answers with
//                                LEN bytes: one round trip per iteration
//   BM_{dat,verbs}_post_poll     one signalled 8-byte RDMA write from A to B
//                                and the busy poll for its completion
// A and B are two RC queue pairs of the device connected to each other: for
// uDAPL two EPs of one IA through a PSP (rdma_cm), for verbs two QPs moved
// through INIT/RTR/RTS here with the port's GID. Every message is stamped
// with its iteration number and checked where it lands, so a run that moved
// the wrong bytes fails (exit 1). After the run the program prints the time
// per iteration of each pair and "ratio dat/verbs" (bench/README.md).
//
// Device: --device=NAME[:PORT] or $FASTDAPL_BENCH_DEVICE, else the first
// active port of the first rdma-core device; IA: --ia=NAME or
// $FASTDAPL_BENCH_IA, else that port's IA name (fastdapl-<dev>-<port>; the
// IA must be in dat.conf). No rdma-core device: exit 77.
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#include "discovery.hpp"

#include <dat2/udat.h>

#include <benchmark/benchmark.h>
#include <infiniband/verbs.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace {

namespace verbs = fastdapl::verbs;

constexpr std::size_t kRegion = 4096;         // each of: A's send, A's receive, B's send, B's receive
constexpr std::size_t kBufferSize = 4 * kRegion;
constexpr std::size_t kPostPollLength = 8;
constexpr std::uint32_t kMaxInline = 64;      // as the provider's verbs path (src/core/ia.hpp)
constexpr auto kCompletionDeadline = std::chrono::seconds(10);

struct Target {
    std::string device;
    std::uint8_t port = 0;
    int gid_index = 0;
    std::string ia;
};
Target g_target;
std::FILE* g_info = stdout; // our own lines; stderr when stdout carries JSON or CSV

bool g_failed = false; // a benchmark reported an error

// Offsets of the four regions in a pair's buffer.
constexpr std::size_t send_offset(int side) { return static_cast<std::size_t>(side) * 2 * kRegion; }
constexpr std::size_t recv_offset(int side) { return send_offset(side) + kRegion; }

// The iteration number at the start and end of a message (both ends: a
// message placed only in part is seen).
void stamp(char* p, std::size_t len, std::uint64_t value)
{
    std::memcpy(p, &value, sizeof value);
    if (len >= 2 * sizeof value)
        std::memcpy(p + len - sizeof value, &value, sizeof value);
}
bool stamped(const char* p, std::size_t len, std::uint64_t value)
{
    std::uint64_t head, tail;
    std::memcpy(&head, p, sizeof head);
    if (len < 2 * sizeof value)
        return head == value;
    std::memcpy(&tail, p + len - sizeof value, sizeof tail);
    return head == value && tail == value;
}

// Looks at the clock only every 64 Ki empty polls, and starts counting at
// the first look: the polls are what is measured.
struct Deadline {
    std::chrono::steady_clock::time_point end{};
    unsigned polls = 0;
    bool passed()
    {
        if (++polls % 65536 != 0)
            return false;
        const auto now = std::chrono::steady_clock::now();
        if (end == std::chrono::steady_clock::time_point{})
            end = now + kCompletionDeadline;
        return now > end;
    }
};

// ---------------------------------------------------------------- uDAPL

std::string dat_text(DAT_RETURN rc)
{
    const char* major = "";
    const char* minor = "";
    dat_strerror(rc, &major, &minor);
    return std::string(major) + " " + minor;
}

// Two EPs of one IA connected to each other, one DTO EVD each (requests and
// receives), one LMR over the buffer; each EP has one receive posted.
class DatPair {
public:
    // Empty on success, else what failed.
    std::string open(const std::string& ia_name)
    {
        buffer_.assign(kBufferSize, 0);
        std::string name = ia_name; // dat_ia_open takes a DAT_NAME_PTR (char*)
        DAT_RETURN rc = dat_ia_open(name.data(), 8, &async_, &ia_);
        if (rc != DAT_SUCCESS)
            return "dat_ia_open(" + ia_name + "): " + dat_text(rc);
        ia_open_ = true;
        std::string what;
        auto ok = [&](DAT_RETURN r, const char* call) {
            if (r == DAT_SUCCESS)
                return true;
            what = std::string(call) + ": " + dat_text(r);
            return false;
        };
        if (!ok(dat_pz_create(ia_, &pz_), "dat_pz_create"))
            return what;
        for (int side = 0; side < 2; ++side)
            if (!ok(dat_evd_create(ia_, 256, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, &dto_[side]), "dat_evd_create(DTO)") ||
                !ok(dat_evd_create(ia_, 4, DAT_HANDLE_NULL, DAT_EVD_CONNECTION_FLAG, &conn_[side]),
                    "dat_evd_create(connection)") ||
                !ok(dat_ep_create(ia_, pz_, dto_[side], dto_[side], conn_[side], nullptr, &ep_[side]), "dat_ep_create"))
                return what;
        if (!ok(dat_evd_create(ia_, 4, DAT_HANDLE_NULL, DAT_EVD_CR_FLAG, &cr_), "dat_evd_create(CR)"))
            return what;
        DAT_REGION_DESCRIPTION region{};
        region.for_va = buffer_.data();
        DAT_VLEN size;
        DAT_VADDR va;
        if (!ok(dat_lmr_create(ia_, DAT_MEM_TYPE_VIRTUAL, region, buffer_.size(), pz_, DAT_MEM_PRIV_ALL_FLAG,
                               DAT_VA_TYPE_VA, &lmr_, &lkey_, &rkey_, &size, &va),
                "dat_lmr_create"))
            return what;
        DAT_IA_ATTR attr{};
        if (!ok(dat_ia_query(ia_, nullptr, DAT_IA_FIELD_ALL, &attr, 0, nullptr), "dat_ia_query"))
            return what;
        for (int side = 0; side < 2; ++side)
            if (!ok(post_recv(side), "dat_ep_post_recv"))
                return what;
        DAT_CONN_QUAL qual = 0;
        DAT_PSP_HANDLE psp;
        if (!ok(dat_psp_create_any(ia_, &qual, cr_, DAT_PSP_CONSUMER_FLAG, &psp), "dat_psp_create_any"))
            return what;
        constexpr DAT_TIMEOUT kConnectWait = 10000000; // µs
        if (!ok(dat_ep_connect(ep_[0], attr.ia_address_ptr, qual, kConnectWait, 0, nullptr, DAT_QOS_BEST_EFFORT,
                               DAT_CONNECT_DEFAULT_FLAG),
                "dat_ep_connect"))
            return what;
        DAT_EVENT e{};
        DAT_COUNT nmore;
        if (!ok(dat_evd_wait(cr_, kConnectWait, 1, &e, &nmore), "dat_evd_wait(CR)"))
            return what;
        if (e.event_number != DAT_CONNECTION_REQUEST_EVENT)
            return "the CR EVD got event " + std::to_string(e.event_number) + ", not a connection request";
        if (!ok(dat_cr_accept(e.event_data.cr_arrival_event_data.cr_handle, ep_[1], 0, nullptr), "dat_cr_accept"))
            return what;
        for (int side = 0; side < 2; ++side) {
            if (!ok(dat_evd_wait(conn_[side], kConnectWait, 1, &e, &nmore), "dat_evd_wait(connection)"))
                return what;
            if (e.event_number != DAT_CONNECTION_EVENT_ESTABLISHED)
                return "connection event " + std::to_string(e.event_number) + ", not ESTABLISHED";
        }
        if (!ok(dat_psp_free(psp), "dat_psp_free"))
            return what;
        return {};
    }

    // Abrupt: dat_ia_close frees what is left.
    void close()
    {
        if (ia_open_)
            dat_ia_close(ia_, DAT_CLOSE_ABRUPT_FLAG);
        ia_open_ = false;
    }

    char* send_buffer(int side) { return buffer_.data() + send_offset(side); }

    DAT_RETURN post_recv(int side)
    {
        DAT_LMR_TRIPLET iov{reinterpret_cast<DAT_VADDR>(buffer_.data() + recv_offset(side)), kRegion, lkey_};
        return dat_ep_post_recv(ep_[side], 1, &iov, DAT_DTO_COOKIE{}, DAT_COMPLETION_DEFAULT_FLAG);
    }

    DAT_RETURN post_send(int side, std::size_t len)
    {
        DAT_LMR_TRIPLET iov{reinterpret_cast<DAT_VADDR>(send_buffer(side)), static_cast<DAT_SEG_LENGTH>(len), lkey_};
        const DAT_RETURN rc = dat_ep_post_send(ep_[side], 1, &iov, DAT_DTO_COOKIE{}, DAT_COMPLETION_DEFAULT_FLAG);
        sends_[side] += rc == DAT_SUCCESS;
        return rc;
    }

    // An RDMA write from A's send region into B's receive region.
    DAT_RETURN post_write(std::size_t len)
    {
        DAT_LMR_TRIPLET iov{reinterpret_cast<DAT_VADDR>(send_buffer(0)), static_cast<DAT_SEG_LENGTH>(len), lkey_};
        const DAT_RMR_TRIPLET remote{reinterpret_cast<DAT_VADDR>(buffer_.data() + recv_offset(1)),
                                     static_cast<DAT_SEG_LENGTH>(len), rkey_};
        return dat_ep_post_rdma_write(ep_[0], 1, &iov, DAT_DTO_COOKIE{}, &remote, DAT_COMPLETION_DEFAULT_FLAG);
    }

    const char* landed(int side) const { return buffer_.data() + recv_offset(side); }

    // Busy dequeue of `side`'s next completion, which must be a success.
    // Empty or what went wrong.
    std::string next(int side, DAT_DTO_COMPLETION_EVENT_DATA& out)
    {
        Deadline deadline;
        for (;;) {
            DAT_EVENT e;
            const DAT_RETURN rc = dat_evd_dequeue(dto_[side], &e);
            if (DAT_GET_TYPE(rc) == DAT_QUEUE_EMPTY) {
                if (deadline.passed())
                    return "no completion within 10 s";
                continue;
            }
            if (rc != DAT_SUCCESS)
                return "dat_evd_dequeue: " + dat_text(rc);
            out = e.event_data.dto_completion_event_data;
            if (e.event_number != DAT_DTO_COMPLETION_EVENT || out.status != DAT_DTO_SUCCESS)
                return "event " + std::to_string(e.event_number) + " with status " + std::to_string(out.status);
            return {};
        }
    }

    // Until `side` has a completion of `want` for `len` bytes; send
    // completions seen on the way retire outstanding sends.
    std::string take(int side, DAT_DTOS want, std::size_t len)
    {
        for (;;) {
            DAT_DTO_COMPLETION_EVENT_DATA d;
            if (std::string why = next(side, d); !why.empty())
                return why;
            if (d.operation == DAT_DTO_SEND && want != DAT_DTO_SEND && sends_[side] > 0) {
                --sends_[side];
                continue;
            }
            if (d.operation != want || d.transfered_length != len)
                return "completion of operation " + std::to_string(d.operation) + " for " +
                       std::to_string(d.transfered_length) + " bytes; expected operation " + std::to_string(want) +
                       " for " + std::to_string(len);
            return {};
        }
    }

    // Takes the send completions still to come (at the end of a benchmark).
    std::string drain_sends()
    {
        for (int side = 0; side < 2; ++side)
            for (; sends_[side] > 0; --sends_[side]) {
                DAT_DTO_COMPLETION_EVENT_DATA d;
                if (std::string why = next(side, d); !why.empty())
                    return why;
                if (d.operation != DAT_DTO_SEND)
                    return "completion of operation " + std::to_string(d.operation) + " where a send's was due";
            }
        return {};
    }

private:
    std::vector<char> buffer_;
    DAT_IA_HANDLE ia_ = DAT_HANDLE_NULL;
    bool ia_open_ = false;
    DAT_EVD_HANDLE async_ = DAT_HANDLE_NULL, cr_ = DAT_HANDLE_NULL;
    DAT_EVD_HANDLE dto_[2] = {}, conn_[2] = {};
    DAT_EP_HANDLE ep_[2] = {};
    DAT_PZ_HANDLE pz_ = DAT_HANDLE_NULL;
    DAT_LMR_HANDLE lmr_ = DAT_HANDLE_NULL;
    DAT_LMR_CONTEXT lkey_ = 0;
    DAT_RMR_CONTEXT rkey_ = 0;
    long sends_[2] = {0, 0}; // send completions not taken yet
};

// ---------------------------------------------------------------- plain verbs

std::string errno_text(const char* call, int err) { return std::string(call) + ": " + std::strerror(err); }

// Two RC QPs of one device connected to each other by hand (no rdma_cm),
// one CQ each (requests and receives), one MR over the buffer; each QP has
// one receive posted. Sends of up to 64 bytes go inline, as the provider's.
class VerbsPair {
public:
    std::string open(const Target& t)
    {
        buffer_.assign(kBufferSize, 0);
        int n = 0;
        ibv_device** list = ibv_get_device_list(&n);
        if (!list)
            return errno_text("ibv_get_device_list", errno);
        for (int i = 0; i < n && !ctx_; ++i)
            if (t.device == ibv_get_device_name(list[i]))
                ctx_ = ibv_open_device(list[i]);
        ibv_free_device_list(list);
        if (!ctx_)
            return "ibv_open_device(" + t.device + ") failed";
        ibv_port_attr port{};
        if (int err = ibv_query_port(ctx_, t.port, &port); err != 0)
            return errno_text("ibv_query_port", err);
        ibv_gid gid{};
        if (ibv_query_gid(ctx_, t.port, t.gid_index, &gid) != 0)
            return "ibv_query_gid(index " + std::to_string(t.gid_index) + ") failed";
        if (!(pd_ = ibv_alloc_pd(ctx_)))
            return errno_text("ibv_alloc_pd", errno);
        mr_ = ibv_reg_mr(pd_, buffer_.data(), buffer_.size(),
                         IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
        if (!mr_)
            return errno_text("ibv_reg_mr", errno);
        for (int side = 0; side < 2; ++side) {
            if (!(cq_[side] = ibv_create_cq(ctx_, 256, nullptr, nullptr, 0)))
                return errno_text("ibv_create_cq", errno);
            ibv_qp_init_attr init{};
            init.send_cq = init.recv_cq = cq_[side];
            init.qp_type = IBV_QPT_RC;
            init.cap.max_send_wr = init.cap.max_recv_wr = 64;
            init.cap.max_send_sge = init.cap.max_recv_sge = 1;
            init.cap.max_inline_data = kMaxInline;
            qp_[side] = ibv_create_qp(pd_, &init);
            if (!qp_[side]) { // a device that copies nothing inline
                init.cap.max_inline_data = 0;
                qp_[side] = ibv_create_qp(pd_, &init);
            }
            if (!qp_[side])
                return errno_text("ibv_create_qp", errno);
            max_inline_ = std::min(init.cap.max_inline_data, kMaxInline);
        }
        for (int side = 0; side < 2; ++side)
            if (std::string why = connect(side, t.port, port, gid, t.gid_index); !why.empty())
                return why;
        for (int side = 0; side < 2; ++side)
            if (int err = post_recv(side); err != 0)
                return errno_text("ibv_post_recv", err);
        return {};
    }

    void close()
    {
        for (int side = 0; side < 2; ++side) {
            if (qp_[side])
                ibv_destroy_qp(qp_[side]);
            if (cq_[side])
                ibv_destroy_cq(cq_[side]);
            qp_[side] = nullptr;
            cq_[side] = nullptr;
        }
        if (mr_)
            ibv_dereg_mr(mr_);
        if (pd_)
            ibv_dealloc_pd(pd_);
        if (ctx_)
            ibv_close_device(ctx_);
        mr_ = nullptr;
        pd_ = nullptr;
        ctx_ = nullptr;
    }

    char* send_buffer(int side) { return buffer_.data() + send_offset(side); }
    const char* landed(int side) const { return buffer_.data() + recv_offset(side); }

    int post_recv(int side)
    {
        ibv_sge sge{reinterpret_cast<std::uintptr_t>(buffer_.data() + recv_offset(side)), static_cast<std::uint32_t>(kRegion),
                    mr_->lkey};
        ibv_recv_wr wr{};
        wr.wr_id = kRecvTag;
        wr.sg_list = &sge;
        wr.num_sge = 1;
        ibv_recv_wr* bad;
        return ibv_post_recv(qp_[side], &wr, &bad);
    }

    int post_send(int side, std::size_t len)
    {
        ibv_sge sge{reinterpret_cast<std::uintptr_t>(send_buffer(side)), static_cast<std::uint32_t>(len), mr_->lkey};
        ibv_send_wr wr{};
        wr.sg_list = &sge;
        wr.num_sge = 1;
        wr.opcode = IBV_WR_SEND;
        wr.send_flags = send_flags(len);
        ibv_send_wr* bad;
        const int err = ibv_post_send(qp_[side], &wr, &bad);
        sends_[side] += err == 0;
        return err;
    }

    int post_write(std::size_t len)
    {
        ibv_sge sge{reinterpret_cast<std::uintptr_t>(send_buffer(0)), static_cast<std::uint32_t>(len), mr_->lkey};
        ibv_send_wr wr{};
        wr.sg_list = &sge;
        wr.num_sge = 1;
        wr.opcode = IBV_WR_RDMA_WRITE;
        wr.send_flags = send_flags(len);
        wr.wr.rdma.remote_addr = reinterpret_cast<std::uintptr_t>(buffer_.data() + recv_offset(1));
        wr.wr.rdma.rkey = mr_->rkey;
        ibv_send_wr* bad;
        return ibv_post_send(qp_[0], &wr, &bad);
    }

    // Busy poll of `side`'s next completion, which must be a success.
    std::string next(int side, ibv_wc& wc)
    {
        Deadline deadline;
        for (;;) {
            const int n = ibv_poll_cq(cq_[side], 1, &wc);
            if (n == 0) {
                if (deadline.passed())
                    return "no completion within 10 s";
                continue;
            }
            if (n < 0)
                return "ibv_poll_cq failed";
            if (wc.status != IBV_WC_SUCCESS)
                return std::string("completion status ") + ibv_wc_status_str(wc.status);
            return {};
        }
    }

    // As DatPair::take: until `side` has a completion of `want` for `len` bytes.
    std::string take(int side, ibv_wc_opcode want, std::size_t len)
    {
        for (;;) {
            ibv_wc wc;
            if (std::string why = next(side, wc); !why.empty())
                return why;
            if (wc.opcode == IBV_WC_SEND && want != IBV_WC_SEND && sends_[side] > 0) {
                --sends_[side];
                continue;
            }
            // A request's byte_len is undefined in verbs: only a receive's is checked.
            if (wc.opcode != want || (want == IBV_WC_RECV && (wc.byte_len != len || wc.wr_id != kRecvTag)))
                return "completion of opcode " + std::to_string(wc.opcode) + " for " + std::to_string(wc.byte_len) +
                       " bytes; expected opcode " + std::to_string(want) + " for " + std::to_string(len);
            return {};
        }
    }

    std::string drain_sends()
    {
        for (int side = 0; side < 2; ++side)
            for (; sends_[side] > 0; --sends_[side]) {
                ibv_wc wc;
                if (std::string why = next(side, wc); !why.empty())
                    return why;
                if (wc.opcode != IBV_WC_SEND)
                    return "completion of opcode " + std::to_string(wc.opcode) + " where a send's was due";
            }
        return {};
    }

private:
    static constexpr std::uint64_t kRecvTag = 0x5245; // the only receive wr_id

    unsigned send_flags(std::size_t len) const
    {
        return IBV_SEND_SIGNALED | (len <= max_inline_ ? static_cast<unsigned>(IBV_SEND_INLINE) : 0u);
    }

    // RESET -> INIT -> RTR -> RTS towards the other QP of the pair, on the
    // port's GID entry that the IA uses (RoCE needs it; IB uses the LID).
    std::string connect(int side, std::uint8_t port_num, const ibv_port_attr& port, const ibv_gid& gid, int gid_index)
    {
        ibv_qp* qp = qp_[side];
        ibv_qp_attr a{};
        a.qp_state = IBV_QPS_INIT;
        a.pkey_index = 0;
        a.port_num = port_num;
        a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
        if (int err = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
            return errno_text("ibv_modify_qp(INIT)", err);
        a = ibv_qp_attr{};
        a.qp_state = IBV_QPS_RTR;
        a.path_mtu = port.active_mtu;
        a.dest_qp_num = qp_[1 - side]->qp_num;
        a.rq_psn = 0;
        a.max_dest_rd_atomic = 1;
        a.min_rnr_timer = 12;
        a.ah_attr.port_num = port_num;
        a.ah_attr.dlid = port.lid;
        a.ah_attr.is_global = 1;
        a.ah_attr.grh.dgid = gid;
        a.ah_attr.grh.sgid_index = static_cast<std::uint8_t>(gid_index);
        a.ah_attr.grh.hop_limit = 1;
        if (int err = ibv_modify_qp(qp, &a,
                                    IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                        IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
            return errno_text("ibv_modify_qp(RTR)", err);
        a = ibv_qp_attr{};
        a.qp_state = IBV_QPS_RTS;
        a.timeout = 14;
        a.retry_cnt = 7;
        a.rnr_retry = 7;
        a.sq_psn = 0;
        a.max_rd_atomic = 1;
        if (int err = ibv_modify_qp(qp, &a,
                                    IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                                        IBV_QP_MAX_QP_RD_ATOMIC))
            return errno_text("ibv_modify_qp(RTS)", err);
        return {};
    }

    std::vector<char> buffer_;
    ibv_context* ctx_ = nullptr;
    ibv_pd* pd_ = nullptr;
    ibv_mr* mr_ = nullptr;
    ibv_cq* cq_[2] = {};
    ibv_qp* qp_[2] = {};
    std::uint32_t max_inline_ = 0;
    long sends_[2] = {0, 0};
};

// ---------------------------------------------------------------- the pairs

// Each kind's pair is set up on first use and kept for the whole run (the
// benchmark functions run several times while the iteration count is found).
template <class Pair>
struct Fixture {
    std::unique_ptr<Pair> pair;
    std::string failure; // why it could not be set up

    Pair* get(benchmark::State& state, const std::function<std::string(Pair&)>& open)
    {
        if (!pair && failure.empty()) {
            pair = std::make_unique<Pair>();
            failure = open(*pair);
            if (!failure.empty())
                pair->close();
        }
        if (!failure.empty()) {
            state.SkipWithError(failure.c_str());
            g_failed = true;
            return nullptr;
        }
        return pair.get();
    }
};
Fixture<DatPair> g_dat;
Fixture<VerbsPair> g_verbs;

DatPair* dat_pair(benchmark::State& state)
{
    return g_dat.get(state, [](DatPair& p) { return p.open(g_target.ia); });
}
VerbsPair* verbs_pair(benchmark::State& state)
{
    return g_verbs.get(state, [](VerbsPair& p) { return p.open(g_target); });
}

void fail(benchmark::State& state, const std::string& why)
{
    static std::string message; // SkipWithError keeps the pointer
    message = why;
    state.SkipWithError(message.c_str());
    g_failed = true;
}

// One round trip per iteration: A sends LEN bytes, B takes them, posts its
// receive again and answers with LEN bytes, A takes them and posts its
// receive again. Both messages carry the iteration number, checked on
// arrival. The same steps for both kinds (Pair::post_* return 0 / DAT_SUCCESS).
template <class Pair, class Recv>
void pingpong(benchmark::State& state, Pair* p, Recv recv_op)
{
    if (!p)
        return;
    const auto len = static_cast<std::size_t>(state.range(0));
    std::uint64_t i = 0;
    std::string why;
    for (auto _ : state) {
        ++i;
        stamp(p->send_buffer(0), len, i);
        if (p->post_send(0, len) != 0) {
            why = "post send A";
            break;
        }
        if (!(why = p->take(1, recv_op, len)).empty())
            break;
        if (!stamped(p->landed(1), len, i)) {
            why = "B received the wrong bytes in iteration " + std::to_string(i);
            break;
        }
        stamp(p->send_buffer(1), len, ~i);
        if (p->post_recv(1) != 0 || p->post_send(1, len) != 0) {
            why = "post receive or send B";
            break;
        }
        if (!(why = p->take(0, recv_op, len)).empty())
            break;
        if (!stamped(p->landed(0), len, ~i)) {
            why = "A received the wrong bytes in iteration " + std::to_string(i);
            break;
        }
        if (p->post_recv(0) != 0) {
            why = "post receive A";
            break;
        }
    }
    if (why.empty())
        why = p->drain_sends();
    if (!why.empty())
        return fail(state, why);
    state.SetBytesProcessed(static_cast<std::int64_t>(2 * len * i));
}

// One 8-byte RDMA write from A into B's memory and the poll of its
// completion per iteration; the bytes are checked in B's memory once the
// write has completed (RC: it has been placed).
template <class Pair, class Op>
void post_poll(benchmark::State& state, Pair* p, Op write_op)
{
    if (!p)
        return;
    std::uint64_t i = 0;
    std::string why;
    for (auto _ : state) {
        ++i;
        stamp(p->send_buffer(0), kPostPollLength, i);
        if (p->post_write(kPostPollLength) != 0) {
            why = "post RDMA write";
            break;
        }
        if (!(why = p->take(0, write_op, kPostPollLength)).empty())
            break;
        if (!stamped(p->landed(1), kPostPollLength, i)) {
            why = "the RDMA write of iteration " + std::to_string(i) + " did not land";
            break;
        }
    }
    if (!why.empty())
        return fail(state, why);
    state.SetBytesProcessed(static_cast<std::int64_t>(kPostPollLength * i));
}

void BM_dat_pingpong(benchmark::State& state) { pingpong(state, dat_pair(state), DAT_DTO_RECEIVE); }
void BM_verbs_pingpong(benchmark::State& state) { pingpong(state, verbs_pair(state), IBV_WC_RECV); }
void BM_dat_post_poll(benchmark::State& state) { post_poll(state, dat_pair(state), DAT_DTO_RDMA_WRITE); }
void BM_verbs_post_poll(benchmark::State& state) { post_poll(state, verbs_pair(state), IBV_WC_RDMA_WRITE); }

// ---------------------------------------------------------------- report

// Passes every report on to the display reporter of --benchmark_format and
// keeps each run's real time per iteration for the ratio table.
class RatioReporter : public benchmark::BenchmarkReporter {
public:
    explicit RatioReporter(benchmark::BenchmarkReporter* display) : display_(display) {}

    bool ReportContext(const Context& context) override { return display_->ReportContext(context); }
    void ReportRuns(const std::vector<Run>& runs) override
    {
        for (const Run& run : runs) {
            // With --benchmark_report_aggregates_only only the aggregates come.
            const bool median_run = run.run_type == Run::RT_Aggregate && run.aggregate_name == "median";
            if (run.run_type != Run::RT_Iteration && !median_run)
                continue;
            const std::string name =
                run.run_name.function_name + (run.run_name.args.empty() ? "" : "/" + run.run_name.args);
            if (!results_.count(name))
                order_.push_back(name);
            Result& r = results_[name];
            if (run.error_occurred) {
                r.error = run.error_message;
                continue;
            }
            const double us = run.GetAdjustedRealTime() * to_us(run.time_unit);
            if (median_run)
                r.median_us = us;
            else
                r.times_us.push_back(us);
        }
        display_->ReportRuns(runs);
    }
    void Finalize() override { display_->Finalize(); }

    // "ratio dat/verbs" per pair, the median over repetitions; to `out`.
    void print_ratios(std::FILE* out) const
    {
        std::fprintf(out, "\n%-22s %14s %14s %16s\n", "pair (time/iteration)", "dat (us)", "verbs (us)", "ratio dat/verbs");
        for (const std::string& name : order_) {
            if (name.rfind("BM_dat_", 0) != 0)
                continue;
            const Result& dat = results_.at(name);
            const std::string pair = name.substr(std::strlen("BM_dat_"));
            const auto verbs = results_.find("BM_verbs_" + pair);
            const std::string dat_text = cell(dat);
            const std::string verbs_text = verbs == results_.end() ? "not run" : cell(verbs->second);
            std::string ratio = "-";
            if (verbs != results_.end() && dat.error.empty() && verbs->second.error.empty() && dat.timed() &&
                verbs->second.timed()) {
                char text[32];
                std::snprintf(text, sizeof text, "%.2f", dat.us() / verbs->second.us());
                ratio = text;
            }
            std::fprintf(out, "%-22s %14s %14s %16s\n", pair.c_str(), dat_text.c_str(), verbs_text.c_str(), ratio.c_str());
        }
        for (const std::string& name : order_)
            if (name.rfind("BM_verbs_", 0) == 0 && !results_.count("BM_dat_" + name.substr(std::strlen("BM_verbs_"))))
                std::fprintf(out, "%-22s %14s %14s %16s\n", name.substr(std::strlen("BM_verbs_")).c_str(), "not run",
                             cell(results_.at(name)).c_str(), "-");
    }

    std::size_t ran() const { return results_.size(); }

private:
    struct Result {
        std::vector<double> times_us; // per repetition
        double median_us = -1;        // the library's median aggregate, where it made one
        std::string error;
        bool timed() const { return median_us >= 0 || !times_us.empty(); }
        double us() const { return median_us >= 0 ? median_us : median(times_us); }
    };

    static double to_us(benchmark::TimeUnit unit)
    {
        switch (unit) {
        case benchmark::kNanosecond: return 1e-3;
        case benchmark::kMicrosecond: return 1.0;
        case benchmark::kMillisecond: return 1e3;
        case benchmark::kSecond: return 1e6;
        }
        return 1.0;
    }
    static double median(std::vector<double> v)
    {
        std::sort(v.begin(), v.end());
        const std::size_t n = v.size();
        return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
    }
    static std::string cell(const Result& r)
    {
        if (!r.error.empty())
            return "FAILED";
        if (!r.timed())
            return "-";
        char text[32];
        std::snprintf(text, sizeof text, "%.2f", r.us());
        return text;
    }

    benchmark::BenchmarkReporter* display_;
    std::map<std::string, Result> results_;
    std::vector<std::string> order_; // names as they first ran
};

int usage()
{
    std::fprintf(stderr,
                 "usage: gbench_verbs_vs_dat [--device=NAME[:PORT]] [--ia=IA_NAME] [--iterations=N] [--benchmark_*...]\n"
                 "  defaults: $FASTDAPL_BENCH_DEVICE, else the first active rdma-core port; $FASTDAPL_BENCH_IA,\n"
                 "  else that port's IA name (fastdapl-<dev>-<port>). --iterations: exactly N per benchmark.\n");
    return 2;
}

// Picks the port from NAME[:PORT] (empty: the first active port, else the
// first port). 77 where there is no rdma-core device, 2 where the named
// one is not there, else 0.
int choose_target(const std::string& wanted, const std::string& ia)
{
    const std::vector<verbs::PortInfo> ports = verbs::discover_ports();
    if (ports.empty()) {
        std::printf("gbench_verbs_vs_dat: no rdma-core device on this host: nothing to compare (skip)\n");
        return 77;
    }
    std::string device = wanted;
    int port = 0;
    if (const auto colon = wanted.find(':'); colon != std::string::npos) {
        device = wanted.substr(0, colon);
        port = std::atoi(wanted.c_str() + colon + 1);
        if (port < 1 || port > 255) {
            std::fprintf(stderr, "gbench_verbs_vs_dat: bad port in %s\n", wanted.c_str());
            return 2;
        }
    }
    const verbs::PortInfo* chosen = nullptr;
    for (const verbs::PortInfo& p : ports) {
        if ((!device.empty() && p.device != device) || (port && p.port != port))
            continue;
        if (!chosen || (p.active && !chosen->active))
            chosen = &p;
        if (chosen->active)
            break;
    }
    if (!chosen) {
        std::fprintf(stderr, "gbench_verbs_vs_dat: no port %s; ports here:", wanted.c_str());
        for (const verbs::PortInfo& p : ports)
            std::fprintf(stderr, " %s:%u", p.device.c_str(), p.port);
        std::fprintf(stderr, "\n");
        return 2;
    }
    g_target.device = chosen->device;
    g_target.port = chosen->port;
    g_target.gid_index = std::max(chosen->gid_index, 0);
    g_target.ia = ia.empty() ? verbs::ia_name(*chosen) : ia;
    std::fprintf(g_info, "gbench_verbs_vs_dat: device %s port %u (%s, GID index %d %s), IA %s\n", g_target.device.c_str(),
                g_target.port, chosen->active ? "active" : "NOT active", g_target.gid_index, chosen->gid.c_str(),
                g_target.ia.c_str());
    return 0;
}

} // namespace

int main(int argc, char** argv)
{
    // The display format's output goes to stdout: the table goes to stderr
    // unless it is the console's.
    bool console = true;
    for (int i = 1; i < argc; ++i)
        if (std::strncmp(argv[i], "--benchmark_format=", 19) == 0)
            console = std::strcmp(argv[i] + 19, "console") == 0;
    g_info = console ? stdout : stderr;
    benchmark::Initialize(&argc, argv);
    const char* env_device = std::getenv("FASTDAPL_BENCH_DEVICE");
    const char* env_ia = std::getenv("FASTDAPL_BENCH_IA");
    std::string device = env_device ? env_device : "";
    std::string ia = env_ia ? env_ia : "";
    long iterations = 0;
    for (int i = 1; i < argc; ++i) {
        const std::string arg = argv[i];
        if (arg.rfind("--device=", 0) == 0)
            device = arg.substr(9);
        else if (arg.rfind("--ia=", 0) == 0)
            ia = arg.substr(5);
        else if (arg.rfind("--iterations=", 0) == 0) {
            char* end = nullptr;
            iterations = std::strtol(arg.c_str() + 13, &end, 10);
            if (*end != '\0' || iterations <= 0)
                return usage();
        } else
            return usage();
    }
    if (int rc = choose_target(device, ia); rc != 0)
        return rc;

    // In pairs, dat first, so that the two halves of a pair run back to back.
    std::vector<benchmark::internal::Benchmark*> registered = {
        benchmark::RegisterBenchmark("BM_dat_pingpong", BM_dat_pingpong)->Arg(8),
        benchmark::RegisterBenchmark("BM_verbs_pingpong", BM_verbs_pingpong)->Arg(8),
        benchmark::RegisterBenchmark("BM_dat_pingpong", BM_dat_pingpong)->Arg(4096),
        benchmark::RegisterBenchmark("BM_verbs_pingpong", BM_verbs_pingpong)->Arg(4096),
        benchmark::RegisterBenchmark("BM_dat_post_poll", BM_dat_post_poll),
        benchmark::RegisterBenchmark("BM_verbs_post_poll", BM_verbs_post_poll),
    };
    for (benchmark::internal::Benchmark* b : registered) {
        // The completions come from another thread or the kernel: wall time.
        b->UseRealTime()->Unit(benchmark::kMicrosecond);
        if (iterations > 0)
            b->Iterations(iterations);
    }

    std::unique_ptr<benchmark::BenchmarkReporter> display(benchmark::CreateDefaultDisplayReporter());
    RatioReporter reporter(display.get());
    benchmark::RunSpecifiedBenchmarks(&reporter);
    reporter.print_ratios(g_info);
    if (g_dat.pair)
        g_dat.pair->close();
    if (g_verbs.pair)
        g_verbs.pair->close();
    benchmark::Shutdown();
    if (reporter.ran() == 0) {
        std::fprintf(stderr, "gbench_verbs_vs_dat: no benchmark ran (--benchmark_filter=%s)\n",
                     benchmark::GetBenchmarkFilter().c_str());
        return 1;
    }
    if (g_failed)
        std::fprintf(stderr, "gbench_verbs_vs_dat: FAILED (see the errors above)\n");
    else
        std::fprintf(g_info, "gbench_verbs_vs_dat: every benchmark that ran moved and checked its bytes\n");
    return g_failed ? 1 : 0;
}
