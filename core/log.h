/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * log.h: the server's diagnostic log (not the access log, which is a plugin).
 *
 * Lines go to standard error or to a file named by the `Log` key, one write(2)
 * each, so lines from several threads never interleave. Any thread may log.
 * mk_log_reopen() is called on SIGUSR1 so logrotate works.
 */
#ifndef MK_CORE_LOG_H
#define MK_CORE_LOG_H

enum mk_log_level { MK_LOG_ERROR = 0, MK_LOG_WARN, MK_LOG_INFO, MK_LOG_DEBUG };

/* Send lines to `path` (NULL: standard error). Returns MK_OK or MK_ERR. */
int mk_log_open(const char *path);
int mk_log_reopen(void);
void mk_log_close(void);
void mk_log_set_level(enum mk_log_level level);
enum mk_log_level mk_log_get_level(void);

void mk_log(enum mk_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define mk_err(...) mk_log(MK_LOG_ERROR, __VA_ARGS__)
#define mk_warn(...) mk_log(MK_LOG_WARN, __VA_ARGS__)
#define mk_info(...) mk_log(MK_LOG_INFO, __VA_ARGS__)
#define mk_debug(...)                                                                              \
    do {                                                                                           \
        if (mk_log_get_level() >= MK_LOG_DEBUG) {                                                  \
            mk_log(MK_LOG_DEBUG, __VA_ARGS__);                                                     \
        }                                                                                          \
    } while (0)

#endif
