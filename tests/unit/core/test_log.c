/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * test_log.c: unit tests of core/log.c: a log file is opened without
 * following a link at its path, and what root opens for a User is given to
 * that User (mk_log_set_owner, mk_log_file_give), a file with several links
 * refused. The ownership cases need root (the test then runs them). And
 * the gate that limits a message to one a period (mk_log_gate_pass).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <monkey/mk_common.h>

#include "core/log.h"

#define OTHER_UID ((uid_t) 65534)

struct dir {
    char path[64];
    char file[128];
};

static struct dir *dir_new(void)
{
    struct dir *d = calloc(1, sizeof(*d));
    snprintf(d->path, sizeof(d->path), "/tmp/mk-test-log-XXXXXX");
    assert_non_null(mkdtemp(d->path));
    snprintf(d->file, sizeof(d->file), "%s/error.log", d->path);
    return d;
}

static void dir_free(struct dir *d)
{
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", d->path);
    assert_int_equal(system(cmd), 0);
    free(d);
}

static struct stat stat_of(const char *path)
{
    struct stat st;
    assert_int_equal(lstat(path, &st), 0);
    return st;
}

/* A link at the path is refused (ELOOP) at open and at reopen; what it names stays. */
static void test_no_link_followed(void **state)
{
    struct dir *d = dir_new();
    struct mk_log_sink sink;
    char target[160], other[160];
    (void) state;

    mk_log_sink_init(&sink);
    mk_log_bind(&sink);
    snprintf(target, sizeof(target), "%s/target", d->path);
    snprintf(other, sizeof(other), "%s/error.log.1", d->path);
    assert_int_equal(symlink(target, d->file), 0);
    errno = 0;
    assert_int_equal(mk_log_open(d->file), MK_ERR);
    assert_int_equal(errno, ELOOP);
    assert_int_not_equal(access(target, F_OK), 0); /* not created through the link */

    /* A file, then a link in its place: the reopen keeps the file it had. */
    assert_int_equal(unlink(d->file), 0);
    assert_int_equal(mk_log_open(d->file), MK_OK);
    mk_err("first");
    assert_int_equal(rename(d->file, other), 0);
    assert_int_equal(symlink(target, d->file), 0);
    assert_int_equal(mk_log_reopen(), MK_ERR);
    assert_int_equal(errno, ELOOP);
    mk_err("second");
    assert_int_not_equal(access(target, F_OK), 0);
    assert_true(stat_of(other).st_size > 0);
    mk_log_sink_release(&sink);
    dir_free(d);
}

/* As root for a User: the files root owns are given to it, others are left alone. */
static void test_given_to_the_user(void **state)
{
    struct dir *d = dir_new();
    struct mk_log_sink sink;
    char theirs[160], linked[160], planted[160];
    int fd;
    (void) state;

    if (geteuid() != 0) {
        dir_free(d);
        skip();
    }
    mk_log_sink_init(&sink);
    mk_log_bind(&sink);
    mk_log_set_owner(OTHER_UID);
    assert_int_equal(mk_log_open(d->file), MK_OK); /* created by root, then given */
    assert_int_equal(stat_of(d->file).st_uid, OTHER_UID);
    assert_int_equal(stat_of(d->file).st_mode & 07777, 0640);

    /* A file somebody else was given stays theirs. */
    snprintf(theirs, sizeof(theirs), "%s/theirs", d->path);
    fd = open(theirs, O_WRONLY | O_CREAT | O_EXCL, 0644);
    assert_true(fd >= 0);
    assert_int_equal(fchown(fd, 1234, (gid_t) -1), 0);
    assert_int_equal(mk_log_file_give(fd, OTHER_UID), MK_OK);
    assert_int_equal(stat_of(theirs).st_uid, 1234);
    close(fd);

    /* A file of root's with a second link (one planted in the User's
       directory): refused, neither given nor written. */
    snprintf(linked, sizeof(linked), "%s/roots", d->path);
    snprintf(planted, sizeof(planted), "%s/planted.log", d->path);
    fd = open(linked, O_WRONLY | O_CREAT | O_EXCL, 0600);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(link(linked, planted), 0);
    fd = open(planted, O_WRONLY);
    errno = 0;
    assert_int_equal(mk_log_file_give(fd, OTHER_UID), MK_ERR);
    assert_int_equal(errno, EMLINK);
    assert_int_equal(mk_log_file_give(fd, (uid_t) -1), MK_OK); /* no User: nothing to give */
    close(fd);
    errno = 0;
    assert_int_equal(mk_log_open(planted), MK_ERR);
    assert_int_equal(errno, EMLINK);
    assert_int_equal(stat_of(linked).st_uid, 0);
    assert_int_equal(stat_of(linked).st_size, 0);

    /* Without an owner the same file is root's to write (no User: nothing to protect). */
    mk_log_set_owner((uid_t) -1);
    assert_int_equal(mk_log_open(planted), MK_OK);
    assert_int_equal(stat_of(linked).st_uid, 0);
    mk_log_sink_release(&sink);
    dir_free(d);
}

/* One message a period, with the count of the ones held back. */
static void test_gate(void **state)
{
    struct mk_log_gate g = {0};
    unsigned skipped = 77;
    (void) state;

    assert_true(mk_log_gate_pass(&g, 5000, 1000, &skipped)); /* the first passes */
    assert_int_equal(skipped, 0);
    assert_false(mk_log_gate_pass(&g, 5000, 1000, &skipped));
    assert_false(mk_log_gate_pass(&g, 5999, 1000, &skipped));
    assert_true(mk_log_gate_pass(&g, 6000, 1000, &skipped));
    assert_int_equal(skipped, 2);
    for (int i = 0; i < 1000; i++) {
        assert_false(mk_log_gate_pass(&g, 6000 + (uint64_t) i, 1000, &skipped));
    }
    assert_true(mk_log_gate_pass(&g, 60000, 1000, &skipped)); /* long after: at once */
    assert_int_equal(skipped, 1000);
    assert_false(mk_log_gate_pass(&g, 60500, 1000, &skipped));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_no_link_followed),
        cmocka_unit_test(test_given_to_the_user),
        cmocka_unit_test(test_gate),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
