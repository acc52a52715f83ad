// libFuzzer target: the input is a sequence of DAT calls through the public
// API (our libdat2 hosting libfastdapl, the softnic IA on loopback): create
// and free every object kind, connect, accept, reject and disconnect
// endpoints of the same IA, post DTOs with IOVs that are sometimes valid and
// sometimes not, dequeue and wait with short timeouts, query; on live,
// stale, foreign-typed, forged and NULL handles.
// Invariants: nothing crashes or trips a sanitizer, every call returns (each
// wait is bounded), and no byte outside the regions registered with a write
// right ever changes (canaries, checked after every call). Each input runs
// on an IA of its own, closed at its end; one more IA stays open for the
// whole run so that the provider stays loaded.
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#include "fuzz_common.hpp"

#include <dat2/udat.h>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <vector>

using namespace fastdapl_fuzz;

namespace {

constexpr char kIaName[] = "fastdapl-tcp";
constexpr std::size_t kMaxSteps = 256;

enum Kind { kPz, kLmr, kEvd, kEp, kSrq, kPsp, kRsp, kCno, kCr, kKinds };

struct LmrInfo {
    DAT_LMR_CONTEXT lmr_context = 0;
    DAT_RMR_CONTEXT rmr_context = 0;
    std::uintptr_t addr = 0;
    std::uint64_t len = 0;
};

// Process-wide: the pool, the IA that keeps the provider loaded, handles of
// IAs closed by earlier inputs (stale by now), a forged handle.
struct Global {
    GuardedPool pool;
    DAT_IA_HANDLE anchor = DAT_HANDLE_NULL;
    std::vector<DAT_HANDLE> stale; // bounded: kMaxStale
    alignas(16) std::uint8_t forged[256] = {};
    std::uint64_t calls = 0;
    static constexpr std::size_t kMaxStale = 256;
};
Global* g = nullptr;

int agent_calls = 0;
void agent(DAT_PVOID, DAT_EVD_HANDLE)
{
    ++agent_calls;
}

// Every call answers with a DAT_RETURN dat_strerror can name: a known type
// and subtype, the error class on every failure but an empty queue's (a
// polling loop's ordinary answer, without the class as the reference has it).
DAT_RETURN ret(DAT_RETURN rc)
{
    const char *major = nullptr, *minor = nullptr;
    if (dat_strerror(rc, &major, &minor) != DAT_SUCCESS)
        fail("a call returned something that is not a DAT_RETURN", static_cast<std::uint32_t>(rc));
    const std::uint32_t type = DAT_GET_TYPE(rc);
    if (type != DAT_SUCCESS && type != DAT_QUEUE_EMPTY && (rc & DAT_CLASS_ERROR) != DAT_CLASS_ERROR)
        fail("a failure without the error class", static_cast<std::uint32_t>(rc));
    return rc;
}

class Session {
public:
    explicit Session(Reader& in) : in_(in) {}

    void run()
    {
        g->pool.reset();
        if (ret(dat_ia_open(const_cast<char*>(kIaName), 1 + in_.u8() % 64, &async_, &ia_)) != DAT_SUCCESS)
            fail("dat_ia_open");
        ia_open_ = true;
        DAT_IA_ATTR attr{};
        if (ret(dat_ia_query(ia_, nullptr, DAT_IA_FIELD_ALL, &attr, 0, nullptr)) != DAT_SUCCESS)
            fail("dat_ia_query");
        std::memcpy(&address_, attr.ia_address_ptr, sizeof(sockaddr_in));
        handles_[kEvd].push_back(async_);
        setup();
        for (std::size_t step = 0; step < kMaxSteps && !in_.empty(); ++step) {
            one_call(in_.u8());
            g->pool.check();
        }
        finish();
    }

private:
    // A common starting point (each piece can still be freed by the input):
    // a PZ, a region over half the pool, DTO/connection/CR EVDs, two EPs.
    void setup()
    {
        DAT_PZ_HANDLE pz;
        if (ret(dat_pz_create(ia_, &pz)) != DAT_SUCCESS)
            fail("setup pz");
        handles_[kPz].push_back(pz);
        register_region(pz, GuardedPool::kBytes / 2, GuardedPool::kBytes / 2, DAT_MEM_PRIV_ALL_FLAG);
        for (DAT_EVD_FLAGS f : {DAT_EVD_DTO_FLAG, DAT_EVD_CONNECTION_FLAG, DAT_EVD_CR_FLAG}) {
            DAT_EVD_HANDLE evd;
            if (ret(dat_evd_create(ia_, 16, DAT_HANDLE_NULL, f, &evd)) != DAT_SUCCESS)
                fail("setup evd");
            handles_[kEvd].push_back(evd);
        }
        for (int i = 0; i < 2; ++i) {
            DAT_EP_HANDLE ep;
            if (ret(dat_ep_create(ia_, pz, handles_[kEvd][1], handles_[kEvd][1], handles_[kEvd][2], nullptr, &ep)) !=
                DAT_SUCCESS)
                fail("setup ep");
            handles_[kEp].push_back(ep);
            conn_evd_[ep] = handles_[kEvd][2];
        }
    }

    void finish()
    {
        drain_all();
        if (ia_open_) {
            const DAT_RETURN rc =
                ret(dat_ia_close(ia_, (in_.u8() & 1) ? DAT_CLOSE_GRACEFUL_FLAG : DAT_CLOSE_ABRUPT_FLAG));
            if (rc != DAT_SUCCESS && ret(dat_ia_close(ia_, DAT_CLOSE_ABRUPT_FLAG)) != DAT_SUCCESS)
                fail("dat_ia_close abrupt", rc);
        }
        g->pool.check(); // nothing lands after the close either
        // Everything this input made is stale now: later inputs try them.
        auto keep = [](DAT_HANDLE h) {
            if (!h)
                return;
            if (g->stale.size() < Global::kMaxStale)
                g->stale.push_back(h);
            else
                g->stale[g->calls % Global::kMaxStale] = h;
        };
        keep(ia_);
        for (auto& list : handles_)
            for (DAT_HANDLE h : list)
                keep(h);
        g->calls += 1;
    }

    // --- choices ---------------------------------------------------------

    // A handle for an argument of kind `k`: mostly one of that kind made by
    // this input (live or freed), sometimes another kind's, NULL, a stale
    // one from an earlier input, or something that is no handle at all.
    DAT_HANDLE pick(Kind k)
    {
        const std::uint8_t sel = in_.u8();
        switch (sel & 15) {
        case 0:
            return DAT_HANDLE_NULL;
        case 1: {
            const auto& other = handles_[(sel >> 4) % kKinds];
            return other.empty() ? DAT_HANDLE_NULL : other[in_.u8() % other.size()];
        }
        case 2:
            return g->stale.empty() ? DAT_HANDLE_NULL : g->stale[in_.u16() % g->stale.size()];
        case 3: { // readable memory that is not a handle; its first word may be a real provider's
            in_.bytes(g->forged, sizeof g->forged);
            if ((sel & 16) && !handles_[kPz].empty())
                std::memcpy(g->forged, handles_[kPz][0], sizeof(void*));
            return g->forged;
        }
        case 4: // small or misaligned values: the registry refuses them unread
            return reinterpret_cast<DAT_HANDLE>(static_cast<std::uintptr_t>((sel & 16) ? in_.u16() % 4096 : 4097));
        case 5:
            return ia_;
        default: {
            const auto& list = handles_[k];
            return list.empty() ? DAT_HANDLE_NULL : list[(sel >> 4) % list.size()];
        }
        }
    }
    DAT_IA_HANDLE pick_ia()
    {
        const std::uint8_t sel = in_.u8();
        if (sel < 200)
            return ia_;
        return pick(static_cast<Kind>(sel % kKinds));
    }
    const LmrInfo* pick_lmr()
    {
        if (lmrs_.empty())
            return nullptr;
        return &lmrs_[in_.u8() % lmrs_.size()];
    }
    // An address in or around the pool, or one of a few that are nowhere.
    std::uintptr_t pick_address()
    {
        const std::uint8_t sel = in_.u8();
        switch (sel & 7) {
        case 0: {
            static constexpr std::uintptr_t nowhere[] = {0, 8, 0xffff800000000000u, ~std::uintptr_t{0} - 7};
            return nowhere[sel >> 3 & 3];
        }
        case 1:
            if (const LmrInfo* l = pick_lmr())
                return l->addr + in_.u16() % (l->len + 64);
            [[fallthrough]];
        default:
            return g->pool.lo() + in_.u32() % (g->pool.hi() - g->pool.lo());
        }
    }
    std::uint32_t pick_length()
    {
        const std::uint8_t sel = in_.u8();
        switch (sel & 7) {
        case 0:
            return 0;
        case 1:
            return in_.u32();
        case 2:
            return 0xffffffffu - (sel >> 3);
        default:
            return in_.u16() % 8192;
        }
    }
    DAT_TIMEOUT pick_timeout() { return static_cast<DAT_TIMEOUT>(in_.u8() % 4) * 250; } // ≤ 0.75 ms
    DAT_COUNT pick_count(DAT_COUNT usual)
    {
        const std::uint8_t sel = in_.u8();
        if ((sel & 7) == 0)
            return static_cast<DAT_COUNT>(in_.u32());
        if ((sel & 7) == 1)
            return -static_cast<DAT_COUNT>(sel >> 3);
        return static_cast<DAT_COUNT>(sel >> 3) % (usual + 1);
    }
    DAT_CONN_QUAL pick_qual()
    {
        const std::uint8_t sel = in_.u8();
        DAT_CONN_QUAL q;
        if (!quals_.empty() && (sel & 3) != 0)
            q = quals_[(sel >> 2) % quals_.size()];
        else if ((sel & 15) == 4)
            q = in_.u64();
        else
            q = 20000 + (sel >> 4) * 7; // a band nothing else here uses
        if (forbidden_port(q))
            q ^= 1;
        return q;
    }
    DAT_COMPLETION_FLAGS pick_completion_flags()
    {
        const std::uint8_t sel = in_.u8();
        return static_cast<DAT_COMPLETION_FLAGS>((sel & 3) == 0 ? sel >> 2 & 0x3f : 0);
    }
    DAT_MEM_PRIV_FLAGS pick_privileges()
    {
        const std::uint8_t sel = in_.u8();
        return static_cast<DAT_MEM_PRIV_FLAGS>((sel & 1) ? DAT_MEM_PRIV_ALL_FLAG : (sel >> 1) & 0x33);
    }
    DAT_DTO_COOKIE cookie()
    {
        DAT_DTO_COOKIE c;
        c.as_64 = in_.u64();
        return c;
    }
    // `n` local segments, each from a region (or a made-up context), an
    // address and a length, valid or not.
    DAT_LMR_TRIPLET* iov(DAT_COUNT n)
    {
        for (DAT_COUNT i = 0; i < n && i < static_cast<DAT_COUNT>(iov_.size()); ++i) {
            DAT_LMR_TRIPLET& t = iov_[static_cast<std::size_t>(i)];
            const LmrInfo* l = pick_lmr();
            const std::uint8_t sel = in_.u8();
            if (l && (sel & 3) != 0) {
                t.lmr_context = l->lmr_context;
                const std::uint64_t span = l->len ? l->len : 1;
                t.virtual_address = (sel & 4) ? pick_address() : l->addr + in_.u16() % span;
                t.segment_length = (sel & 8) ? pick_length() : static_cast<DAT_SEG_LENGTH>(in_.u16() % (span + 1));
            } else {
                t.lmr_context = in_.u32();
                t.virtual_address = pick_address();
                t.segment_length = pick_length();
            }
            // A send or write of at most kInlineBytes in all is copied into
            // the WQE at post time, as mlx5 devices take small ones, with no
            // key check: its local addresses are read by the caller's thread
            // like any pointer handed to memcpy (README). Addresses no
            // process could read go only into segments too long for that,
            // where the (software) NIC checks the key.
            if (t.segment_length <= kInlineBytes && !readable(t.virtual_address, t.segment_length))
                t.segment_length = kInlineBytes + 1 + in_.u8();
        }
        return in_.u8() == 0xff ? nullptr : iov_.data();
    }
    static constexpr DAT_SEG_LENGTH kInlineBytes = 64;
    // Within the pool's readable pages (read-write, then read-only).
    bool readable(std::uintptr_t a, std::uint64_t n) const
    {
        const auto start = reinterpret_cast<std::uintptr_t>(g->pool.base());
        const auto end = reinterpret_cast<std::uintptr_t>(g->pool.read_only()) + GuardedPool::kPage;
        return a >= start && a <= end && n <= end - a;
    }
    // One or two segments inside regions this input registered (perhaps
    // freed since), at most 4 KiB each.
    DAT_LMR_TRIPLET* sane_iov(DAT_COUNT& n)
    {
        n = 1 + in_.u8() % 2;
        for (DAT_COUNT i = 0; i < n; ++i) {
            const LmrInfo* l = pick_lmr();
            if (!l || l->len == 0) {
                n = i;
                break;
            }
            const std::uint64_t off = in_.u16() % l->len;
            const std::uint64_t room = std::min<std::uint64_t>(l->len - off, 4096);
            iov_[static_cast<std::size_t>(i)] =
                DAT_LMR_TRIPLET{l->addr + off, static_cast<DAT_SEG_LENGTH>(1 + in_.u16() % room), l->lmr_context};
        }
        return iov_.data();
    }
    DAT_RMR_TRIPLET sane_remote()
    {
        const LmrInfo* l = pick_lmr();
        if (!l || l->len == 0)
            return remote();
        const std::uint64_t off = in_.u16() % l->len;
        const std::uint64_t room = std::min<std::uint64_t>(l->len - off, 4096);
        return DAT_RMR_TRIPLET{l->addr + off, static_cast<DAT_SEG_LENGTH>(1 + in_.u16() % room), l->rmr_context};
    }
    DAT_COUNT nsegs()
    {
        const std::uint8_t sel = in_.u8();
        if ((sel & 15) == 0)
            return -1;
        if ((sel & 15) == 1)
            return static_cast<DAT_COUNT>(iov_.size());
        return (sel >> 4) % 5;
    }
    DAT_RMR_TRIPLET remote()
    {
        DAT_RMR_TRIPLET r{};
        const LmrInfo* l = pick_lmr();
        const std::uint8_t sel = in_.u8();
        if (l && (sel & 3) != 0) {
            r.rmr_context = l->rmr_context;
            r.virtual_address = (sel & 4) ? pick_address() : l->addr + in_.u16() % (l->len ? l->len : 1);
            r.segment_length = (sel & 8) ? pick_length() : in_.u16() % 4096;
        } else {
            r.rmr_context = in_.u32();
            r.virtual_address = pick_address();
            r.segment_length = pick_length();
        }
        return r;
    }
    DAT_EP_ATTR* ep_attr(DAT_EP_ATTR& a)
    {
        const std::uint8_t sel = in_.u8();
        if ((sel & 3) == 0)
            return nullptr;
        a = DAT_EP_ATTR{};
        a.service_type = DAT_SERVICE_TYPE_RC;
        a.qos = DAT_QOS_BEST_EFFORT;
        if ((sel & 3) == 1) { // anything in the integer fields
            a.max_message_size = in_.u32();
            a.max_rdma_size = in_.u32();
            a.recv_completion_flags = pick_completion_flags();
            a.request_completion_flags = pick_completion_flags();
            DAT_COUNT* counts[] = {&a.max_recv_dtos,   &a.max_request_dtos,  &a.max_recv_iov,
                                   &a.max_request_iov, &a.max_rdma_read_in,  &a.max_rdma_read_out,
                                   &a.srq_soft_hw,     &a.max_rdma_read_iov, &a.max_rdma_write_iov};
            for (DAT_COUNT* c : counts)
                *c = pick_count(64);
        } else { // small and mostly sane
            a.max_message_size = 1u << (in_.u8() % 24);
            a.max_rdma_size = 1u << (in_.u8() % 24);
            a.max_recv_dtos = 1 + in_.u8() % 32;
            a.max_request_dtos = 1 + in_.u8() % 32;
            a.max_recv_iov = 1 + in_.u8() % 4;
            a.max_request_iov = 1 + in_.u8() % 4;
            a.max_rdma_read_in = in_.u8() % 4;
            a.max_rdma_read_out = in_.u8() % 4;
            a.max_rdma_read_iov = in_.u8() % 4;
            a.max_rdma_write_iov = in_.u8() % 4;
        }
        return &a;
    }

    // --- bookkeeping -----------------------------------------------------

    void register_region(DAT_PZ_HANDLE pz, std::size_t offset, std::size_t len, DAT_MEM_PRIV_FLAGS priv)
    {
        DAT_REGION_DESCRIPTION region{};
        region.for_va = g->pool.base() + offset;
        LmrInfo info;
        DAT_LMR_HANDLE lmr;
        DAT_VLEN size = 0;
        DAT_VADDR va = 0;
        if (ret(dat_lmr_create(ia_, DAT_MEM_TYPE_VIRTUAL, region, len, pz, priv, DAT_VA_TYPE_VA, &lmr,
                               &info.lmr_context, &info.rmr_context, &size, &va)) != DAT_SUCCESS)
            fail("setup lmr");
        g->pool.registered(reinterpret_cast<std::uintptr_t>(region.for_va), len, priv);
        info.addr = reinterpret_cast<std::uintptr_t>(region.for_va);
        info.len = len;
        handles_[kLmr].push_back(lmr);
        lmrs_.push_back(info);
    }

    void note_event(DAT_EVD_HANDLE evd, const DAT_EVENT& e)
    {
        if (e.event_number != DAT_SOFTWARE_EVENT && e.evd_handle != evd)
            fail("event names another EVD", e.event_number);
        if (e.event_number == DAT_CONNECTION_REQUEST_EVENT && handles_[kCr].size() < 64)
            handles_[kCr].push_back(e.event_data.cr_arrival_event_data.cr_handle);
    }
    void dequeue_some(DAT_EVD_HANDLE evd, int max)
    {
        for (int i = 0; i < max; ++i) {
            DAT_EVENT e{};
            if (ret(dat_evd_dequeue(evd, &e)) != DAT_SUCCESS)
                break;
            note_event(evd, e);
        }
    }
    void drain_all()
    {
        for (DAT_HANDLE evd : handles_[kEvd])
            dequeue_some(evd, 64);
    }
    bool add(Kind k, DAT_HANDLE h)
    {
        if (handles_[k].size() >= 32)
            return false;
        handles_[k].push_back(h);
        return true;
    }
    void add_qual(DAT_CONN_QUAL q)
    {
        if (quals_.size() < 16)
            quals_.push_back(q);
    }

    // --- the calls -------------------------------------------------------

    void one_call(std::uint8_t op)
    {
        switch (op % 52) {
        case 0: {
            DAT_PZ_HANDLE pz;
            if (ret(dat_pz_create(pick_ia(), (in_.u8() == 0xff) ? nullptr : &pz)) == DAT_SUCCESS)
                add(kPz, pz);
            break;
        }
        case 1:
            ret(dat_pz_free(pick(kPz)));
            break;
        case 2: {
            DAT_PZ_PARAM p;
            ret(dat_pz_query(pick(kPz), DAT_PZ_FIELD_ALL, &p));
            break;
        }
        case 3: { // a region: inside the pool, across its edges, or nowhere
            DAT_REGION_DESCRIPTION region{};
            const std::uint8_t sel = in_.u8();
            std::uintptr_t addr;
            std::uint64_t len;
            if ((sel & 3) == 0) {
                addr = pick_address();
                len = pick_length();
            } else {
                const std::size_t off = in_.u16() % GuardedPool::kBytes;
                addr = reinterpret_cast<std::uintptr_t>(g->pool.base()) + off;
                len = 1 + in_.u16() % (GuardedPool::kBytes - off + ((sel & 4) ? 2 * GuardedPool::kPage : 0));
            }
            region.for_va = reinterpret_cast<void*>(addr);
            const DAT_MEM_PRIV_FLAGS priv = pick_privileges();
            const DAT_MEM_TYPE type = (sel & 8) ? DAT_MEM_TYPE_LMR : DAT_MEM_TYPE_VIRTUAL;
            const LmrInfo* shared = nullptr;
            if (type == DAT_MEM_TYPE_LMR) {
                region.for_lmr_handle = pick(kLmr);
                for (std::size_t i = 0; i < handles_[kLmr].size(); ++i)
                    if (handles_[kLmr][i] == region.for_lmr_handle)
                        shared = &lmrs_[i];
            }
            LmrInfo info;
            DAT_LMR_HANDLE lmr;
            DAT_VLEN size = 0;
            DAT_VADDR va = 0;
            const bool null_out = (sel & 0xf0) == 0xf0;
            const DAT_RETURN rc = ret(dat_lmr_create(
                pick_ia(), type, region, len, pick(kPz), priv, (sel & 16) ? DAT_VA_TYPE_ZB : DAT_VA_TYPE_VA,
                null_out ? nullptr : &lmr, &info.lmr_context, &info.rmr_context, &size, &va));
            if (rc == DAT_SUCCESS) {
                if (type == DAT_MEM_TYPE_VIRTUAL) {
                    g->pool.registered(addr, len, priv);
                    info.addr = addr;
                    info.len = len;
                } else {
                    // Another region's memory, perhaps with more rights.
                    if (!shared)
                        fail("a region shared with no live region was accepted");
                    info.addr = shared->addr;
                    info.len = shared->len;
                    g->pool.registered(info.addr, info.len, priv);
                }
                if (add(kLmr, lmr))
                    lmrs_.push_back(info);
            }
            break;
        }
        case 4: {
            const std::uint8_t i = in_.u8();
            if (!handles_[kLmr].empty() && (i & 1)) {
                ret(dat_lmr_free(handles_[kLmr][(i >> 1) % handles_[kLmr].size()]));
            } else {
                ret(dat_lmr_free(pick(kLmr)));
            }
            break;
        }
        case 5: {
            DAT_LMR_PARAM p;
            ret(dat_lmr_query(pick(kLmr), DAT_LMR_FIELD_ALL, &p));
            break;
        }
        case 6: {
            static constexpr DAT_EVD_FLAGS kinds[] = {
                DAT_EVD_DTO_FLAG,     DAT_EVD_CONNECTION_FLAG, DAT_EVD_CR_FLAG,       DAT_EVD_SOFTWARE_FLAG,
                DAT_EVD_DEFAULT_FLAG, DAT_EVD_ASYNC_FLAG,      DAT_EVD_RMR_BIND_FLAG, static_cast<DAT_EVD_FLAGS>(0)};
            const std::uint8_t sel = in_.u8();
            DAT_EVD_FLAGS flags = kinds[sel & 7];
            if ((sel & 0x38) == 0x38)
                flags = static_cast<DAT_EVD_FLAGS>(in_.u16() & 0x1ff);
            DAT_EVD_HANDLE evd;
            DAT_CNO_HANDLE cno = (sel & 0x40) ? pick(kCno) : DAT_HANDLE_NULL;
            if (ret(dat_evd_create(pick_ia(), pick_count(64), cno, flags, &evd)) == DAT_SUCCESS)
                add(kEvd, evd);
            break;
        }
        case 7:
            ret(dat_evd_free(pick(kEvd)));
            break;
        case 8: {
            DAT_EVD_PARAM p;
            ret(dat_evd_query(pick(kEvd), DAT_EVD_FIELD_ALL, &p));
            break;
        }
        case 9:
        case 10: {
            const DAT_EVD_HANDLE evd = pick(kEvd);
            DAT_EVENT e{};
            if (ret(dat_evd_dequeue(evd, in_.u8() == 0xff ? nullptr : &e)) == DAT_SUCCESS)
                note_event(evd, e);
            break;
        }
        case 11: {
            const DAT_EVD_HANDLE evd = pick(kEvd);
            DAT_EVENT e{};
            DAT_COUNT nmore = 0;
            const DAT_TIMEOUT timeout = pick_timeout();
            if (ret(dat_evd_wait(evd, timeout, pick_count(4), &e, &nmore)) == DAT_SUCCESS)
                note_event(evd, e);
            break;
        }
        case 12:
            switch (in_.u8() & 3) {
            case 0:
                ret(dat_evd_enable(pick(kEvd)));
                break;
            case 1:
                ret(dat_evd_disable(pick(kEvd)));
                break;
            case 2:
                ret(dat_evd_set_unwaitable(pick(kEvd)));
                break;
            default:
                ret(dat_evd_clear_unwaitable(pick(kEvd)));
            }
            break;
        case 13:
            ret(dat_evd_resize(pick(kEvd), pick_count(128)));
            break;
        case 14: {
            DAT_EVENT e{};
            e.event_number = (in_.u8() & 1) ? DAT_SOFTWARE_EVENT : DAT_DTO_COMPLETION_EVENT;
            e.event_data.software_event_data.pointer = reinterpret_cast<DAT_PVOID>(in_.u64());
            const DAT_EVD_HANDLE evd = pick(kEvd);
            e.evd_handle = evd;
            ret(dat_evd_post_se(evd, (in_.u8() == 0xff) ? nullptr : &e));
            break;
        }
        case 15:
            ret(dat_evd_modify_cno(pick(kEvd), pick(kCno)));
            break;
        case 16: {
            DAT_CNO_HANDLE cno;
            const std::uint8_t sel = in_.u8();
            DAT_OS_WAIT_PROXY_AGENT a{nullptr, nullptr};
            if (sel & 1)
                a = DAT_OS_WAIT_PROXY_AGENT{this, &agent};
            if (sel & 2) {
                DAT_FD fd = -1;
                if (ret(dat_cno_fd_create(pick_ia(), &fd, &cno)) == DAT_SUCCESS)
                    add(kCno, cno);
            } else if (ret(dat_cno_create(pick_ia(), a, &cno)) == DAT_SUCCESS) {
                add(kCno, cno);
            }
            break;
        }
        case 17:
            ret(dat_cno_free(pick(kCno)));
            break;
        case 18: {
            DAT_EVD_HANDLE evd = DAT_HANDLE_NULL;
            if (in_.u8() & 1)
                ret(dat_cno_wait(pick(kCno), pick_timeout(), &evd));
            else
                ret(dat_cno_trigger(pick(kCno), &evd));
            break;
        }
        case 19: {
            DAT_CNO_PARAM p;
            if (in_.u8() & 1)
                ret(dat_cno_query(pick(kCno), DAT_CNO_FIELD_ALL, &p));
            else
                ret(dat_cno_modify_agent(pick(kCno), DAT_OS_WAIT_PROXY_AGENT{this, (in_.u8() & 1) ? &agent : nullptr}));
            break;
        }
        case 20:
        case 21: {
            DAT_EP_ATTR a;
            DAT_EP_HANDLE ep;
            const DAT_IA_HANDLE ia = pick_ia();
            const DAT_PZ_HANDLE pz = pick(kPz);
            const DAT_EVD_HANDLE recv = pick(kEvd), req = pick(kEvd), conn = pick(kEvd);
            DAT_EP_ATTR* attr = ep_attr(a);
            DAT_RETURN rc;
            if (op % 52 == 21)
                rc = ret(dat_ep_create_with_srq(ia, pz, recv, req, conn, pick(kSrq), attr, &ep));
            else
                rc = ret(dat_ep_create(ia, pz, recv, req, conn, attr, &ep));
            if (rc == DAT_SUCCESS && add(kEp, ep))
                conn_evd_[ep] = conn;
            break;
        }
        case 22:
            ret(dat_ep_free(pick(kEp)));
            break;
        case 23: {
            DAT_EP_PARAM p;
            ret(dat_ep_query(pick(kEp), in_.u64(), &p));
            break;
        }
        case 24: {
            DAT_EP_PARAM p{};
            DAT_EP_ATTR a{};
            if (DAT_EP_ATTR* attr = ep_attr(a))
                p.ep_attr = *attr;
            p.pz_handle = pick(kPz);
            p.recv_evd_handle = pick(kEvd);
            p.request_evd_handle = pick(kEvd);
            p.connect_evd_handle = pick(kEvd);
            p.srq_handle = pick(kSrq);
            p.local_ia_address_ptr = reinterpret_cast<DAT_IA_ADDRESS_PTR>(&address_);
            p.remote_ia_address_ptr = reinterpret_cast<DAT_IA_ADDRESS_PTR>(&address_);
            ret(dat_ep_modify(pick(kEp), in_.u64(), &p));
            break;
        }
        case 25:
            ret(dat_ep_reset(pick(kEp)));
            break;
        case 26: {
            DAT_EP_STATE state;
            DAT_BOOLEAN recv_idle, request_idle;
            ret(dat_ep_get_status(pick(kEp), &state, (in_.u8() & 1) ? &recv_idle : nullptr, &request_idle));
            break;
        }
        case 27: {
            DAT_COUNT allocated = 0, span = 0;
            if (in_.u8() & 1)
                ret(dat_ep_set_watermark(pick(kEp), pick_count(16), pick_count(16)));
            else
                ret(dat_ep_recv_query(pick(kEp), &allocated, &span));
            break;
        }
        case 28: {
            DAT_SRQ_ATTR attr{pick_count(64), pick_count(4), pick_count(16)};
            DAT_SRQ_HANDLE srq;
            if (ret(dat_srq_create(pick_ia(), pick(kPz), &attr, &srq)) == DAT_SUCCESS)
                add(kSrq, srq);
            break;
        }
        case 29:
            ret(dat_srq_free(pick(kSrq)));
            break;
        case 30: {
            const DAT_SRQ_HANDLE srq = pick(kSrq);
            const DAT_COUNT n = nsegs();
            DAT_LMR_TRIPLET* segs = iov(n);
            ret(dat_srq_post_recv(srq, n, segs, cookie()));
            break;
        }
        case 31:
            switch (in_.u8() % 3) {
            case 0: {
                DAT_SRQ_PARAM p;
                ret(dat_srq_query(pick(kSrq), DAT_SRQ_FIELD_ALL, &p));
                break;
            }
            case 1:
                ret(dat_srq_resize(pick(kSrq), pick_count(128)));
                break;
            default:
                ret(dat_srq_set_lw(pick(kSrq), pick_count(16)));
            }
            break;
        case 32: {
            DAT_CONN_QUAL q = 0;
            DAT_PSP_HANDLE psp;
            const DAT_PSP_FLAGS flags = (in_.u8() & 1) ? DAT_PSP_PROVIDER_FLAG : DAT_PSP_CONSUMER_FLAG;
            if (ret(dat_psp_create_any(pick_ia(), &q, pick(kEvd), flags, &psp)) == DAT_SUCCESS) {
                if (forbidden_port(q)) {
                    ret(dat_psp_free(psp)); // someone else's port: give it back at once
                } else if (add(kPsp, psp)) {
                    add_qual(q);
                } else {
                    ret(dat_psp_free(psp));
                }
            }
            break;
        }
        case 33: {
            DAT_PSP_HANDLE psp;
            const DAT_CONN_QUAL q = pick_qual();
            const DAT_PSP_FLAGS flags = (in_.u8() & 1) ? DAT_PSP_PROVIDER_FLAG : DAT_PSP_CONSUMER_FLAG;
            if (ret(dat_psp_create(pick_ia(), q, pick(kEvd), flags, &psp)) == DAT_SUCCESS) {
                if (add(kPsp, psp))
                    add_qual(q);
                else
                    ret(dat_psp_free(psp));
            }
            break;
        }
        case 34:
            if (in_.u8() & 1) {
                ret(dat_psp_free(pick(kPsp)));
            } else {
                DAT_PSP_PARAM p;
                ret(dat_psp_query(pick(kPsp), DAT_PSP_FIELD_ALL, &p));
            }
            break;
        case 35: {
            DAT_RSP_HANDLE rsp;
            const DAT_CONN_QUAL q = pick_qual();
            if (ret(dat_rsp_create(pick_ia(), q, pick(kEp), pick(kEvd), &rsp)) == DAT_SUCCESS) {
                if (add(kRsp, rsp))
                    add_qual(q);
                else
                    ret(dat_rsp_free(rsp));
            }
            break;
        }
        case 36:
            if (in_.u8() & 1) {
                ret(dat_rsp_free(pick(kRsp)));
            } else {
                DAT_RSP_PARAM p;
                ret(dat_rsp_query(pick(kRsp), DAT_RSP_FIELD_ALL, &p));
            }
            break;
        case 37:
        case 38: {
            const DAT_EP_HANDLE ep = pick(kEp);
            const std::uint8_t sel = in_.u8();
            sockaddr_in other = address_;
            DAT_IA_ADDRESS_PTR addr = reinterpret_cast<DAT_IA_ADDRESS_PTR>(&address_);
            if ((sel & 7) == 0) {
                addr = nullptr;
            } else if ((sel & 7) == 1) { // another loopback address, or another family
                other.sin_addr.s_addr = htonl(0x7f000000u | (in_.u8() % 4));
                if (sel & 8)
                    other.sin_family = static_cast<sa_family_t>(in_.u8());
                addr = reinterpret_cast<DAT_IA_ADDRESS_PTR>(&other);
            }
            const DAT_CONN_QUAL q = pick_qual();
            const DAT_TIMEOUT timeout = (sel & 0x10) ? DAT_TIMEOUT_INFINITE : 1000 * (1 + in_.u8() % 100);
            const DAT_COUNT pdata_size = (sel & 0x20) ? pick_count(300) : in_.u8() % 65;
            in_.bytes(pdata_, 64);
            ret(dat_ep_connect(ep, addr, q, timeout, pdata_size, pdata_, DAT_QOS_BEST_EFFORT,
                               DAT_CONNECT_DEFAULT_FLAG));
            break;
        }
        case 39: { // accept a request that arrived (or a made-up one)
            const DAT_CR_HANDLE cr = pick(kCr);
            const DAT_COUNT pdata_size = (in_.u8() & 1) ? pick_count(300) : 0;
            ret(dat_cr_accept(cr, pick(kEp), pdata_size, pdata_));
            break;
        }
        case 40: {
            const DAT_CR_HANDLE cr = pick(kCr);
            if (in_.u8() & 1) {
                ret(dat_cr_reject(cr, pick_count(64), pdata_));
            } else {
                DAT_CR_PARAM p;
                ret(dat_cr_query(cr, DAT_CR_FIELD_ALL, &p));
            }
            break;
        }
        case 41:
            ret(dat_ep_disconnect(pick(kEp), (in_.u8() & 1) ? DAT_CLOSE_GRACEFUL_FLAG : DAT_CLOSE_ABRUPT_FLAG));
            break;
        case 42:
        case 43: { // 43: segments inside regions, as an application posts them
            const DAT_EP_HANDLE ep = pick(kEp);
            DAT_COUNT n = 0;
            DAT_LMR_TRIPLET* segs = op % 52 == 43 ? sane_iov(n) : iov(n = nsegs());
            ret(dat_ep_post_send(ep, n, segs, cookie(), pick_completion_flags()));
            break;
        }
        case 44:
        case 45: {
            const DAT_EP_HANDLE ep = pick(kEp);
            DAT_COUNT n = 0;
            DAT_LMR_TRIPLET* segs = op % 52 == 45 ? sane_iov(n) : iov(n = nsegs());
            ret(dat_ep_post_recv(ep, n, segs, cookie(), pick_completion_flags()));
            break;
        }
        case 46:
        case 47: {
            const DAT_EP_HANDLE ep = pick(kEp);
            const bool sane = in_.u8() & 1;
            DAT_COUNT n = 0;
            DAT_LMR_TRIPLET* segs = sane ? sane_iov(n) : iov(n = nsegs());
            const DAT_RMR_TRIPLET r = sane ? sane_remote() : remote();
            const bool read = op % 52 == 47;
            const DAT_RMR_TRIPLET* rp = (in_.u8() == 0xff) ? nullptr : &r;
            if (read)
                ret(dat_ep_post_rdma_read(ep, n, segs, cookie(), rp, pick_completion_flags()));
            else
                ret(dat_ep_post_rdma_write(ep, n, segs, cookie(), rp, pick_completion_flags()));
            break;
        }
        case 48: {
            const std::uint8_t sel = in_.u8();
            const DAT_HANDLE h = pick(static_cast<Kind>(sel % kKinds));
            DAT_CONTEXT c;
            c.as_64 = in_.u64();
            DAT_HANDLE_TYPE type;
            if (sel & 0x10)
                ret(dat_set_consumer_context(h, c));
            else if (sel & 0x20)
                ret(dat_get_consumer_context(h, &c));
            else
                ret(dat_get_handle_type(h, &type));
            break;
        }
        case 49: {
            DAT_IA_ATTR ia_attr;
            DAT_PROVIDER_ATTR provider_attr{};
            DAT_EVD_HANDLE async;
            const std::uint8_t sel = in_.u8();
            ret(dat_ia_query(pick_ia(), (sel & 1) ? &async : nullptr, in_.u64(), (sel & 2) ? &ia_attr : nullptr,
                             in_.u64(), (sel & 4) ? &provider_attr : nullptr));
            break;
        }
        case 50: { // connect two endpoints through a fresh PSP, as an application would
            connect_pair();
            break;
        }
        default: {
            const std::uint8_t sel = in_.u8();
            if (sel == 0xff && ia_open_) { // closing the IA in the middle leaves only stale handles
                const DAT_RETURN rc =
                    ret(dat_ia_close(ia_, (sel & 1) ? DAT_CLOSE_GRACEFUL_FLAG : DAT_CLOSE_ABRUPT_FLAG));
                if (rc == DAT_SUCCESS)
                    ia_open_ = false;
            } else if (sel & 1) {
                drain_all();
            } else {
                std::array<DAT_LMR_TRIPLET, 2> segs{};
                segs[0].virtual_address = pick_address();
                segs[0].segment_length = pick_length();
                segs[1].virtual_address = pick_address();
                segs[1].segment_length = pick_length();
                if (sel & 2)
                    ret(dat_lmr_sync_rdma_read(pick_ia(), segs.data(), in_.u8() % 3));
                else
                    ret(dat_lmr_sync_rdma_write(pick_ia(), segs.data(), in_.u8() % 3));
            }
            break;
        }
        }
    }

    void connect_pair()
    {
        const std::uint8_t sel = in_.u8();
        if ((sel & 3) == 0 && !handles_[kPz].empty() && handles_[kEvd].size() >= 4) { // two fresh EPs
            for (int i = 0; i < 2; ++i) {
                DAT_EP_HANDLE ep;
                if (ret(dat_ep_create(ia_, handles_[kPz][0], handles_[kEvd][1], handles_[kEvd][1], handles_[kEvd][2],
                                      nullptr, &ep)) == DAT_SUCCESS &&
                    add(kEp, ep))
                    conn_evd_[ep] = handles_[kEvd][2];
            }
        }
        const auto& eps = handles_[kEp];
        DAT_EP_HANDLE active = pick(kEp), passive = pick(kEp);
        if ((sel & 4) && eps.size() >= 2) { // two different ones of this input
            const std::size_t a = in_.u8() % eps.size();
            active = eps[a];
            passive = eps[(a + 1 + in_.u8() % (eps.size() - 1)) % eps.size()];
        }
        const DAT_EVD_HANDLE cr_evd = (sel & 8) ? pick(kEvd) : handles_[kEvd][3];
        DAT_CONN_QUAL q = 0;
        DAT_PSP_HANDLE psp;
        if (ret(dat_psp_create_any(ia_, &q, cr_evd, DAT_PSP_CONSUMER_FLAG, &psp)) != DAT_SUCCESS)
            return;
        if (!forbidden_port(q) &&
            ret(dat_ep_connect(active, reinterpret_cast<DAT_IA_ADDRESS_PTR>(&address_), q, 200000, 0, nullptr,
                               DAT_QOS_BEST_EFFORT, DAT_CONNECT_DEFAULT_FLAG)) == DAT_SUCCESS) {
            DAT_EVENT e{};
            DAT_COUNT nmore;
            if (ret(dat_evd_wait(cr_evd, 20000, 1, &e, &nmore)) == DAT_SUCCESS) {
                note_event(cr_evd, e);
                if (e.event_number == DAT_CONNECTION_REQUEST_EVENT)
                    ret(dat_cr_accept(e.event_data.cr_arrival_event_data.cr_handle, passive, 0, nullptr));
            }
            for (DAT_EP_HANDLE ep : {active, passive}) {
                auto it = conn_evd_.find(ep);
                if (it != conn_evd_.end() && ret(dat_evd_wait(it->second, 5000, 1, &e, &nmore)) == DAT_SUCCESS)
                    note_event(it->second, e);
            }
        }
        ret(dat_psp_free(psp));
    }

    Reader& in_;
    DAT_IA_HANDLE ia_ = DAT_HANDLE_NULL;
    DAT_EVD_HANDLE async_ = DAT_HANDLE_NULL;
    bool ia_open_ = false;
    sockaddr_in address_{};
    std::array<std::vector<DAT_HANDLE>, kKinds> handles_;
    std::vector<LmrInfo> lmrs_;
    std::map<DAT_EP_HANDLE, DAT_EVD_HANDLE> conn_evd_;
    std::vector<DAT_CONN_QUAL> quals_;
    std::array<DAT_LMR_TRIPLET, 20> iov_{};
    std::uint8_t pdata_[512] = {};
};

} // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***)
{
    g = new Global;
    DAT_EVD_HANDLE async = DAT_HANDLE_NULL; // NULL: the IA makes its own
    if (dat_ia_open(const_cast<char*>(kIaName), 8, &async, &g->anchor) != DAT_SUCCESS) {
        std::fprintf(stderr, "fuzz_dat_api: cannot open %s (is DAT_OVERRIDE set?)\n", kIaName);
        std::abort();
    }
    DAT_PZ_HANDLE pz;
    if (dat_pz_create(g->anchor, &pz) != DAT_SUCCESS)
        fail("dat_pz_create");
    register_handle_arena(pz);
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    Reader in(data, size);
    Session(in).run();
    return 0;
}
