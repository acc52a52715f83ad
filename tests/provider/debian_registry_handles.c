/* Debian's libdat2 hosting libfastdapl: the IA handle in our query results
 * is the one Debian's registry gave the consumer (its small index), so it
 * works wherever an IA handle goes. Built against Debian's libdat2.so.2.
 * SPDX-License-Identifier: BSD-3-Clause
 * Copyright (c) 2026 the fastdapl authors */
#include <dat2/udat.h>

#include <stdio.h>

static int failures;

static void expect(int ok, const char *what)
{
    if (!ok) {
        printf("FAIL: %s\n", what);
        ++failures;
    }
}

int main(void)
{
    DAT_IA_HANDLE ia;
    DAT_EVD_HANDLE async = DAT_HANDLE_NULL, evd;
    DAT_PZ_HANDLE pz, pz2;
    DAT_EVD_PARAM evd_param;
    DAT_PZ_PARAM pz_param;
    if (dat_ia_open("fastdapl-tcp", 8, &async, &ia) != DAT_SUCCESS) {
        printf("FAIL: dat_ia_open\n");
        return 1;
    }
    expect(dat_evd_create(ia, 4, DAT_HANDLE_NULL, DAT_EVD_SOFTWARE_FLAG, &evd) == DAT_SUCCESS, "dat_evd_create");
    expect(dat_evd_query(evd, DAT_EVD_FIELD_ALL, &evd_param) == DAT_SUCCESS, "dat_evd_query");
    expect(evd_param.ia_handle == ia, "dat_evd_query gives the consumer's IA handle");
    expect(dat_pz_create(ia, &pz) == DAT_SUCCESS, "dat_pz_create");
    expect(dat_pz_query(pz, DAT_PZ_FIELD_ALL, &pz_param) == DAT_SUCCESS, "dat_pz_query");
    expect(pz_param.ia_handle == ia, "dat_pz_query gives the consumer's IA handle");
    expect(dat_pz_create(pz_param.ia_handle, &pz2) == DAT_SUCCESS, "dat_pz_create with the queried handle");
    expect(dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG) == DAT_SUCCESS, "dat_ia_close");
    if (!failures)
        printf("ok: IA handles in query results are Debian's registry's own\n");
    return failures != 0;
}
