// Test helper: a server in a forked child that reports over a pipe (the
// two-process tests: the child offers its address and keys, the parent
// connects), and the child's exit status.
// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 the fastdapl authors
#pragma once

#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

namespace fastdapl_test {

// Forks a server: in the child `in_child()` runs first, then `body` with
// the write end of a pipe, whose result is the child's exit status (0 when
// all was well). The parent gets the child's pid (-1 if none) and the read
// end in `read_fd`.
template <typename Body, typename InChild>
pid_t fork_server(int& read_fd, Body body, InChild in_child)
{
    int fds[2];
    if (pipe(fds) != 0)
        return -1;
    const pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        alarm(60); // a child never outlives a broken test
        in_child();
        _exit(body(fds[1]));
    }
    close(fds[1]);
    read_fd = fds[0];
    return pid;
}

template <typename Body> pid_t fork_server(int& read_fd, Body body)
{
    return fork_server(read_fd, body, [] {});
}

// Reads what the child offered (one struct, whole) and closes `fd`.
template <typename Offer> bool read_offer(int fd, Offer& offer)
{
    const bool got = read(fd, &offer, sizeof offer) == static_cast<ssize_t>(sizeof offer);
    close(fd);
    return got;
}

// The child's exit status, or 128 + the signal that ended it; -1 if it
// could not be waited for.
inline int exit_status(pid_t pid)
{
    int status = 0;
    if (waitpid(pid, &status, 0) != pid)
        return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

} // namespace fastdapl_test
