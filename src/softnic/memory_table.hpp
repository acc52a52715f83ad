// The softnic's memory-region table: every key is checked here, for range,
// rights and protection domain, before a byte moves.
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#pragma once

#include "mapped_range.hpp"
#include "spin_lock.hpp" // fastpath

#include <cstdint>
#include <shared_mutex>
#include <vector>

namespace fastdapl::softnic {

enum Access : std::uint32_t {
    kLocalRead = 1u << 0,
    kLocalWrite = 1u << 1,
    kRemoteRead = 1u << 2,
    kRemoteWrite = 1u << 3,
};

class MemoryTable {
public:
    // Registers [addr, addr+length) and returns its key (used as lkey and
    // rkey). Key layout: slot index << 8 | 8-bit generation, so a key of a
    // freed region stops matching when its slot is reused.
    // Returns 0 when the table is full, or when the range is not mapped in
    // this process readable throughout, and writable if kLocalWrite or
    // kRemoteWrite is asked for (check_mapped): a device refuses to pin
    // such a range, and the softnic would fault copying into it. `fault`,
    // if given, receives check_mapped's answer (none when the table is full).
    std::uint32_t add(std::uint64_t addr, std::uint64_t length, std::uint32_t access, std::uint32_t pd,
                      RangeFault* fault = nullptr)
    {
        return add_at(addr, addr, length, access, pd, fault);
    }
    // The same, with the region addressed from `iova` rather than from its
    // address in this process (0: zero-based, as ibv_reg_mr_iova): keys
    // are checked, and windows bound, in that address space.
    std::uint32_t add_at(std::uint64_t iova, std::uint64_t addr, std::uint64_t length, std::uint32_t access,
                         std::uint32_t pd, RangeFault* fault = nullptr);

    // Returns false for an unknown key (a region's or a window's).
    bool remove(std::uint32_t key);
    // Removes the window in slot `index` of `pd`, whatever its key's
    // generation (a device's bind requests set it); false when there is none.
    bool remove_window(std::uint32_t index, std::uint32_t pd);

    // True when `key` names a live region of protection domain `pd` that
    // covers [addr, addr+length) (in the region's address space) and grants
    // every right in `access`; or a bound window (remote rights only) of
    // `pd` over a live region, bound to no queue pair or to `qpn`. `host`,
    // if given, receives where `addr` is in this process.
    bool check(std::uint32_t key, std::uint64_t addr, std::uint64_t length, std::uint32_t access, std::uint32_t pd,
               std::uint32_t qpn = 0, std::uint64_t* host = nullptr) const;

    // Memory windows (RMRs): keys that give remote access to part of a
    // region. A new window is unbound; 0 when the table is full. `type`:
    // the IB window type a device's own bind requests name (1, or 2: bound
    // for one queue pair; see bind_window_request); 0: the softnic's own,
    // bound through bind_window only, either way.
    std::uint32_t add_window(std::uint32_t pd, std::uint8_t type = 0);
    // Binds window `key` to [addr, addr+length) of region `region_key` with
    // `access` (remote rights), for queue pair `qpn` only if not 0; length
    // 0 unbinds. `zero_based`: the window is addressed from 0 (its keys'
    // addresses are offsets into it), else as its region is. Returns the
    // window's new key (the old one stops working), or 0 when `key` is not
    // a live window, or the region is not a live region of the window's PD
    // covering the range.
    std::uint32_t bind_window(std::uint32_t key, std::uint32_t region_key, std::uint64_t addr, std::uint64_t length,
                              std::uint32_t access, std::uint32_t qpn, bool zero_based = false);
    // A window bind as a device's send queue states it (an mlx5 UMR WQE,
    // executed by queue pair `qpn` of `pd`): the window of `pd` in slot
    // `new_key >> 8`, of IB type `type` (1 or 2), takes the key `new_key`
    // and is bound as bind_window binds it (a type 2 window for `qpn`), or
    // freed (length 0). `require_free`: a bind of a window that must be
    // unbound (a type 2 window's); a type 2 window freed must be free or
    // bound for `qpn`. The region must grant local write where the window
    // gives remote write. False, and nothing changed, when any of it fails.
    bool bind_window_request(std::uint32_t new_key, std::uint32_t pd, std::uint8_t type, bool require_free,
                             std::uint32_t region_key, std::uint64_t addr, std::uint64_t length, std::uint32_t access,
                             std::uint32_t qpn, bool zero_based);
    // A peer's send with invalidate, arriving on queue pair `qpn`: window
    // `key` of `pd` becomes unbound, or region `key` loses its remote rights
    // (its local use stays). False when `key` names neither in `pd`, a
    // window bound for another queue pair, or a type 1 window (IB lets a
    // peer invalidate type 2 windows only).
    bool invalidate(std::uint32_t key, std::uint32_t pd, std::uint32_t qpn);

private:
    struct Region {
        std::uint64_t addr = 0; // where keys address it: iova for a region; a window's: 0 if zero-based, else `at`
        std::uint64_t at = 0;   // where its first byte is in its region's space (a region's: its addr)
        std::uint64_t host = 0; // a region's first byte in this process
        std::uint64_t length = 0;
        std::uint32_t access = 0;
        std::uint32_t pd = 0;
        std::uint8_t generation = 0;
        bool live = false;
        bool window = false;
        std::uint8_t type = 0;    // a window's IB type (add_window)
        std::uint32_t parent = 0; // a bound window: its region's key
        std::uint32_t qpn = 0;    // a window bound for one queue pair only
    };
    // A free slot, marked live with a new generation (the lock held); 0 when full.
    std::uint32_t take_slot();
    // The live entry `key` names (the lock held), or null.
    const Region* find(std::uint32_t key) const;
    // Whether region `region_key` of `pd` covers [addr, addr+length) (the
    // lock held); then binds window `w` over it (length 0: unbinds) with
    // key generation `generation`. One step for both kinds of bind.
    bool apply_bind(Region& w, std::uint8_t generation, std::uint32_t region_key, std::uint64_t addr,
                    std::uint64_t length, std::uint32_t access, std::uint32_t qpn, bool zero_based);
    // Read on every message's key check; written by registrations and binds.
    mutable fastpath::SharedSpinLock mutex_;
    std::vector<Region> regions_;
    std::vector<std::uint32_t> free_slots_;
};

} // namespace fastdapl::softnic
