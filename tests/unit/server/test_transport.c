/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * test_transport.c: server/conn/transport.c: a plugin's struct mk_transport is
 * copied up to the end of its ABI minor's struct (mk_transport_adopt), so a
 * field added in a later minor counts as NULL for an older plugin whatever
 * its memory holds there.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "core/memory.h"
#include "server/conn/transport.h"

static int fake_check_sites(const struct mk_config *cfg, char *reason, size_t len)
{
    (void) cfg;
    (void) reason;
    (void) len;
    return MK_OK;
}

static int fake_sendfile_copies(struct mk_conn *c)
{
    (void) c;
    return 1;
}

static int fake_handshake(struct mk_conn *c)
{
    (void) c;
    return MK_OK;
}

/* A transport with every field set, adopted as a plugin of ABI 3.<minor>. */
static struct mk_transport *adopt(unsigned minor)
{
    static const struct mk_transport full = {
        .name = "fake",
        .handshake = fake_handshake,
        .sendfile_copies = fake_sendfile_copies,
        .check_sites = fake_check_sites,
    };
    struct mk_plugin p = {.abi_major = MK_PLUGIN_ABI_MAJOR,
                          .abi_minor = (uint16_t) minor,
                          .size = sizeof(struct mk_plugin),
                          .name = "fake",
                          .transport = &full};
    return mk_transport_adopt(&p);
}

static void test_fields_follow_the_plugins_minor(void **state)
{
    struct mk_transport *t;
    (void) state;

    t = adopt(1);
    assert_string_equal(t->name, "fake");
    assert_null(t->handshake);
    assert_null(t->sendfile_copies);
    assert_null(t->check_sites);
    mk_free(t);

    t = adopt(3);
    assert_ptr_equal(t->handshake, fake_handshake);
    assert_ptr_equal(t->sendfile_copies, fake_sendfile_copies);
    assert_null(t->check_sites);
    mk_free(t);

    t = adopt(9); /* check_sites came with 3.10 */
    assert_ptr_equal(t->sendfile_copies, fake_sendfile_copies);
    assert_null(t->check_sites);
    mk_free(t);

    t = adopt(10);
    assert_ptr_equal(t->check_sites, fake_check_sites);
    mk_free(t);

    t = adopt(MK_PLUGIN_ABI_MINOR);
    assert_ptr_equal(t->check_sites, fake_check_sites);
    mk_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fields_follow_the_plugins_minor),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
