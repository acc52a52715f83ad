/* Compiled as C++20 with every warning an error: the public headers
 * must be clean for C++ consumers.
 * SPDX-License-Identifier: BSD-3-Clause
 * Copyright (c) 2026 the fastdapl authors */
#include <sys/socket.h>
#include <netinet/in.h>
#include <dat2/udat.h>
#include <dat2/dat_registry.h>
#include <dat2/dat_ib_extensions.h>

int main(void)
{
    DAT_EVENT event;
    DAT_PROVIDER provider;
    (void)event;
    (void)provider;
    return (int)(sizeof(DAT_EVENT) + sizeof(DAT_PROVIDER)) == 0;
}
