/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * list.h: intrusive circular doubly linked lists, Linux kernel style.
 *
 * A list head is a `struct mk_list` that points to itself when empty; an
 * element embeds a `struct mk_list` and is recovered with mk_list_entry().
 * Nothing here allocates. An element removed with mk_list_del() is left
 * pointing to itself, so removing it twice is harmless.
 */
#ifndef MK_CORE_LIST_H
#define MK_CORE_LIST_H

#include <stddef.h>

struct mk_list {
    struct mk_list *prev;
    struct mk_list *next;
};

#define mk_container_of(ptr, type, member)                                                         \
    ((type *) (void *) ((char *) (ptr) -offsetof(type, member)))

#define mk_list_entry(ptr, type, member) mk_container_of(ptr, type, member)

static inline void mk_list_init(struct mk_list *head)
{
    head->prev = head;
    head->next = head;
}

static inline int mk_list_is_empty(const struct mk_list *head)
{
    return head->next == head;
}

static inline void mk_list_insert_between(struct mk_list *node, struct mk_list *prev,
                                          struct mk_list *next)
{
    next->prev = node;
    node->next = next;
    node->prev = prev;
    prev->next = node;
}

/* Append `node` at the end of `head`. */
static inline void mk_list_add_tail(struct mk_list *node, struct mk_list *head)
{
    mk_list_insert_between(node, head->prev, head);
}

/* Insert `node` at the front of `head`. */
static inline void mk_list_add_head(struct mk_list *node, struct mk_list *head)
{
    mk_list_insert_between(node, head, head->next);
}

/* Unlink `node` from whatever list holds it; it then forms an empty list. */
static inline void mk_list_del(struct mk_list *node)
{
    node->prev->next = node->next;
    node->next->prev = node->prev;
    mk_list_init(node);
}

/* Move `node` (linked or self-pointing) to the end of `head`. */
static inline void mk_list_move_tail(struct mk_list *node, struct mk_list *head)
{
    mk_list_del(node);
    mk_list_add_tail(node, head);
}

#define mk_list_foreach(it, head) for ((it) = (head)->next; (it) != (head); (it) = (it)->next)

/* Iteration that tolerates removal of the current element. */
#define mk_list_foreach_safe(it, tmp, head)                                                        \
    for ((it) = (head)->next, (tmp) = (it)->next; (it) != (head); (it) = (tmp), (tmp) = (it)->next)

#endif
