/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * task_queue.h: the bounded, fair queue in front of the task threads.
 *
 * Jobs are grouped in shares, one per plugin. Each share has its own FIFO
 * and its own bound, and the threads take jobs from the shares in turn, so
 * a plugin that queues many slow jobs neither takes another plugin's room
 * nor delays another plugin's jobs by more than one job per thread. A job
 * also counts against its client (an IPv4 address, or the /64 of an IPv6
 * address), so that one client cannot fill a share on its own; and within
 * a share the oldest job of a client with nothing running goes first, so
 * that one client's queued jobs do not hold up another client's either.
 *
 * A job counts from mk_task_queue_push() until mk_task_queue_done() (it ran)
 * or a successful mk_task_queue_cancel() (it never will).
 *
 * Pure: no threads, no locks, no allocation after init. The caller
 * serialises every call (task.c holds the pool's lock).
 */
#ifndef MK_SERVER_TASK_QUEUE_H
#define MK_SERVER_TASK_QUEUE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "../../core/list.h"

#define MK_TASK_KEY_LEN 16

enum mk_task_state {
    MK_TASK_IDLE = 0, /* not in the queue */
    MK_TASK_WAITING,  /* in its share's FIFO */
    MK_TASK_RUNNING,  /* taken by a thread, not done yet */
};

/* A job as the queue sees it; embedded in the job's own struct. */
struct mk_task_entry {
    struct mk_list node; /* its share's FIFO while waiting, `running` while running */
    uint8_t key[MK_TASK_KEY_LEN];
    uint32_t share;
    uint8_t state; /* enum mk_task_state */
};

struct mk_task_queue {
    struct mk_list *fifo; /* one per share */
    unsigned *count;      /* per share: jobs waiting or running */
    size_t n_shares;
    size_t next; /* the share the next pop looks at first */
    struct mk_list running;
    unsigned total; /* jobs waiting or running */
};

/*
 * The client key of a socket address: mk_cidr_client()'s (mk_util.h: an
 * IPv4 address, also when it comes IPv4-mapped over IPv6, in the mapped
 * form) with an IPv6 address cut to its first 64 bits; zeros for anything
 * else.
 */
void mk_task_key(const struct sockaddr *sa, uint8_t key[MK_TASK_KEY_LEN]);

/* An empty queue with `n_shares` shares (at least 1). */
void mk_task_queue_init(struct mk_task_queue *q, size_t n_shares);
/* Release the queue's arrays; the jobs still in it are forgotten. */
void mk_task_queue_destroy(struct mk_task_queue *q);

/* Results of mk_task_queue_push() besides MK_OK. */
#define MK_TASK_SHARE_FULL 1  /* the share has `share_max` jobs */
#define MK_TASK_CLIENT_FULL 2 /* the client has `client_max` jobs, all shares together */

/*
 * Queue `e` (MK_TASK_IDLE) at the end of share `share` (the last share when
 * out of range) for client `key`. MK_OK, or MK_TASK_SHARE_FULL or
 * MK_TASK_CLIENT_FULL with nothing queued. O(jobs in the queue).
 */
int mk_task_queue_push(struct mk_task_queue *q, struct mk_task_entry *e, size_t share,
                       const uint8_t key[MK_TASK_KEY_LEN], unsigned share_max, unsigned client_max);

/*
 * The next job to run, now MK_TASK_RUNNING (NULL: none): from the next
 * share that has one after the share served by the previous pop (round
 * robin), the oldest job of a client with no job running, else the oldest.
 * O(jobs waiting in that share × jobs running).
 */
struct mk_task_entry *mk_task_queue_pop(struct mk_task_queue *q);

/* A job taken by mk_task_queue_pop() has finished: it no longer counts. */
void mk_task_queue_done(struct mk_task_queue *q, struct mk_task_entry *e);

/*
 * Take a waiting job out of the queue: true when it was waiting (it will
 * not run and no longer counts); false when it is running or not queued.
 */
bool mk_task_queue_cancel(struct mk_task_queue *q, struct mk_task_entry *e);

/* Jobs of client `key` waiting or running, all shares together. */
unsigned mk_task_queue_client(const struct mk_task_queue *q, const uint8_t key[MK_TASK_KEY_LEN]);

#endif
