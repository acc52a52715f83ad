// The bench programs' handling of a DAT call that must succeed: its
// message on stderr, under the program's name, then exit 1.
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#pragma once

#include <dat2/udat.h>

#include <errno.h> // program_invocation_short_name

#include <cstdio>
#include <cstdlib>

namespace bench {

inline void check(DAT_RETURN rc, const char* what)
{
    if (rc == DAT_SUCCESS)
        return;
    const char* major = "";
    const char* minor = "";
    dat_strerror(rc, &major, &minor);
    std::fprintf(stderr, "%s: %s: %s %s\n", program_invocation_short_name, what, major, minor);
    std::exit(1);
}

// The next event of `evd`, waited for (5 s at most).
inline DAT_EVENT wait_for(DAT_EVD_HANDLE evd)
{
    DAT_EVENT e{};
    DAT_COUNT nmore;
    check(dat_evd_wait(evd, 5000000, 1, &e, &nmore), "dat_evd_wait");
    return e;
}

} // namespace bench
