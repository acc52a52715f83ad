/* LD_PRELOADed into Debian's dtestcm by dtestcm_loop.sh, between dtestcm
 * and libdat2:
 *  - every connection event dtestcm takes (dat_evd_wait, dat_evd_dequeue)
 *    is appended to the file FASTDAPL_DTESTCM_EVENTS names, as
 *    "<event number in hex> <EP handle>", so the script can check what the
 *    provider delivered instead of trusting dtestcm's own checks (its
 *    server looks at event numbers only with -u; see dtestcm_loop.sh);
 *  - the first dat_ep_disconnect waits until the file
 *    FASTDAPL_DTESTCM_SERVER_LOG names holds "CONNECTED on Server", that
 *    is until the server has taken all its ESTABLISHED events, which
 *    dtestcm's server assumes and its client does not wait for.
 * SPDX-License-Identifier: BSD-3-Clause
 * Copyright (c) 2026 the fastdapl authors */
#define _GNU_SOURCE
#include <dat2/udat.h>

#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef DAT_RETURN (*evd_wait_fn)(DAT_EVD_HANDLE, DAT_TIMEOUT, DAT_COUNT, DAT_EVENT *, DAT_COUNT *);
typedef DAT_RETURN (*evd_dequeue_fn)(DAT_EVD_HANDLE, DAT_EVENT *);
typedef DAT_RETURN (*ep_disconnect_fn)(DAT_EP_HANDLE, DAT_CLOSE_FLAGS);

/* the project builds with -fvisibility=hidden; these must interpose */
#define INTERPOSED __attribute__((visibility("default")))

static evd_wait_fn next_evd_wait;
static evd_dequeue_fn next_evd_dequeue;
static ep_disconnect_fn next_ep_disconnect;
static int events_fd = -1;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void *next_symbol(const char *name)
{
    void *f = dlsym(RTLD_NEXT, name);
    if (!f) {
        fprintf(stderr, "dtestcm_events: %s not found after this library\n", name);
        abort();
    }
    return f;
}

static void init(void)
{
    next_evd_wait = (evd_wait_fn)next_symbol("dat_evd_wait");
    next_evd_dequeue = (evd_dequeue_fn)next_symbol("dat_evd_dequeue");
    next_ep_disconnect = (ep_disconnect_fn)next_symbol("dat_ep_disconnect");
    const char *path = getenv("FASTDAPL_DTESTCM_EVENTS");
    if (path)
        events_fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
}

static void record(const DAT_EVENT *event)
{
    const unsigned n = (unsigned)event->event_number;
    if (events_fd < 0 || n < DAT_CONNECTION_EVENT_ESTABLISHED || n > DAT_CONNECTION_EVENT_UNREACHABLE)
        return;
    char line[64];
    const int len = snprintf(line, sizeof line, "%#x %p\n", n, (void *)event->event_data.connect_event_data.ep_handle);
    if (len > 0 && write(events_fd, line, (size_t)len) != len)
        perror("dtestcm_events: write");
}

INTERPOSED DAT_RETURN dat_evd_wait(DAT_EVD_HANDLE evd, DAT_TIMEOUT timeout, DAT_COUNT threshold, DAT_EVENT *event,
                                   DAT_COUNT *nmore)
{
    pthread_once(&once, init);
    const DAT_RETURN rc = next_evd_wait(evd, timeout, threshold, event, nmore);
    if (rc == DAT_SUCCESS)
        record(event);
    return rc;
}

INTERPOSED DAT_RETURN dat_evd_dequeue(DAT_EVD_HANDLE evd, DAT_EVENT *event)
{
    pthread_once(&once, init);
    const DAT_RETURN rc = next_evd_dequeue(evd, event);
    if (rc == DAT_SUCCESS)
        record(event);
    return rc;
}

/* 1: the server log says all its connections are established; 0: not yet
 * (or no log to wait for). */
static int server_has_all(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    char line[256];
    int found = 0;
    while (!found && fgets(line, sizeof line, f))
        found = strstr(line, "CONNECTED on Server") != NULL;
    fclose(f);
    return found;
}

INTERPOSED DAT_RETURN dat_ep_disconnect(DAT_EP_HANDLE ep, DAT_CLOSE_FLAGS flags)
{
    static int waited;
    pthread_once(&once, init);
    const char *log = getenv("FASTDAPL_DTESTCM_SERVER_LOG");
    if (log && !waited) {
        waited = 1;
        const struct timespec nap = {0, 10 * 1000 * 1000};
        for (int i = 0; i < 12000 && !server_has_all(log); ++i) /* 120 s at most: then the run fails */
            nanosleep(&nap, NULL);
    }
    return next_ep_disconnect(ep, flags);
}
