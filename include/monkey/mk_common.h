/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * mk_common.h: the few definitions shared by every public header and by the
 * server itself: return codes and the version. It defines no globals and
 * includes nothing beyond the C library.
 */
#ifndef MONKEY_MK_COMMON_H
#define MONKEY_MK_COMMON_H

#define MK_VERSION_MAJOR 0
#define MK_VERSION_MINOR 1
#define MK_VERSION_PATCH 0
#define MK_VERSION_STR "0.1.0"

/*
 * One way to fail. Functions that can fail return one of these; functions
 * that produce a count return it as a non-negative number instead of MK_OK.
 */
#define MK_OK 0          /* done */
#define MK_ERR (-1)      /* failed; the caller decides what the failure means */
#define MK_AGAIN (-2)    /* not yet: call again when more input or room exists */
#define MK_DECLINED (-3) /* not mine: let the next handler try */

#if defined(__GNUC__)
#define MK_EXPORT __attribute__((visibility("default")))
#else
#define MK_EXPORT
#endif

#endif
