/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * test_conf.c: unit tests of server/config/conf.c and server/config/conf_site.c. Each
 * test writes a configuration directory under /tmp (mkdtemp), loads it and
 * removes it again. Errors must name the file and the line at fault, as
 * "path/to/file:LINE: ".
 */
#include <arpa/inet.h>
#include <errno.h>
#include <ftw.h>
#include <limits.h>
#include <pwd.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include <monkey/mk_common.h>

#include "core/log.h"
#include "server/http/compress.h"
#include "server/config/conf.h"
#include "server/process/server.h"
#include "server/static/static.h"

/* ---- a configuration directory in /tmp ---------------------------------- */

struct confdir {
    char path[PATH_MAX]; /* as created */
    char real[PATH_MAX]; /* realpath: what messages name */
};

static void write_file(const struct confdir *d, const char *rel, const char *text)
{
    char path[PATH_MAX * 2];
    FILE *f;

    snprintf(path, sizeof(path), "%s/%s", d->path, rel);
    /* create the parent directories */
    for (char *s = path + strlen(d->path) + 1; (s = strchr(s, '/')); s++) {
        *s = '\0';
        if (mkdir(path, 0755) < 0 && errno != EEXIST) {
            fail_msg("mkdir %s: %s", path, strerror(errno));
        }
        *s = '/';
    }
    f = fopen(path, "w");
    if (!f) {
        fail_msg("fopen %s: %s", path, strerror(errno));
    }
    assert_int_equal(fwrite(text, 1, strlen(text), f), strlen(text));
    assert_int_equal(fclose(f), 0);
}

static void make_dir(const struct confdir *d, const char *rel)
{
    char path[PATH_MAX * 2];
    snprintf(path, sizeof(path), "%s/%s", d->path, rel);
    assert_int_equal(mkdir(path, 0755), 0);
}

#define BASE_CONF "[SERVER]\n    Listen 2001\n"
#define BASE_SITE "[HOST]\n    ServerName localhost\n    DocumentRoot htdocs\n"

/* A valid directory: monkey.conf, sites/default and htdocs/. */
static struct confdir *confdir_new(void)
{
    struct confdir *d = calloc(1, sizeof(*d));
    assert_non_null(d);
    strcpy(d->path, "/tmp/mk-test-conf-XXXXXX");
    assert_non_null(mkdtemp(d->path));
    assert_non_null(realpath(d->path, d->real));
    write_file(d, "monkey.conf", BASE_CONF);
    write_file(d, "sites/default", BASE_SITE);
    write_file(d, "htdocs/index.html", "<p>hello</p>\n");
    write_file(d, "htdocs/404.html", "<p>not found</p>\n");
    write_file(d, "htdocs/errors/500.html", "<p>oops</p>\n");
    write_file(d, "outside.html", "<p>outside the document root</p>\n");
    return d;
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void) st;
    (void) flag;
    (void) ftw;
    return remove(path);
}

static void confdir_free(struct confdir *d)
{
    assert_int_equal(nftw(d->path, rm_entry, 16, FTW_DEPTH | FTW_PHYS), 0);
    free(d);
}

static struct mk_config *load(const struct confdir *d, const struct mk_config_override *ov,
                              size_t n_ov)
{
    char err[1024] = "";
    struct mk_config *cfg = mk_config_load(d->path, ov, n_ov, err, sizeof(err));
    if (!cfg) {
        fail_msg("mk_config_load: %s", err);
    }
    return cfg;
}

/*
 * Loading must fail with a message that starts with "<dir>/<file>:<line>: "
 * (file relative to the configuration directory) and contains `needle`.
 */
static bool expect_load_error(const struct confdir *d, const struct mk_config_override *ov,
                              size_t n_ov, const char *file, int line, const char *needle)
{
    char err[1024] = "", prefix[PATH_MAX * 2];
    struct mk_config *cfg = mk_config_load(d->path, ov, n_ov, err, sizeof(err));

    if (cfg) {
        mk_config_unref(cfg);
        print_error("%s: loaded although line %d is wrong\n", file, line);
        return false;
    }
    snprintf(prefix, sizeof(prefix), "%s/%s:%d: ", d->real, file, line);
    if (strncmp(err, prefix, strlen(prefix)) != 0) {
        print_error("message '%s' does not start with '%s'\n", err, prefix);
        return false;
    }
    if (needle && !strstr(err, needle)) {
        print_error("message '%s' does not mention '%s'\n", err, needle);
        return false;
    }
    return true;
}

/* ---- defaults and values ------------------------------------------------- */

static void test_defaults(void **state)
{
    struct confdir *d = confdir_new();
    struct mk_config *cfg;
    char docroot[PATH_MAX * 2];
    (void) state;

    write_file(d, "monkey.conf", "# nothing but defaults\n[SERVER]\n");
    cfg = load(d, NULL, 0);

    assert_string_equal(cfg->confdir, d->real);
    assert_int_equal(cfg->n_listen, 1);
    assert_string_equal(cfg->listen[0].spec, "2001");
    assert_string_equal(cfg->listen[0].transport, "plain");
    assert_true(cfg->listen[0].any);
    assert_int_equal(cfg->listen[0].addr.ss_family, AF_INET6);
    assert_int_equal(ntohs(((struct sockaddr_in6 *) &cfg->listen[0].addr)->sin6_port), 2001);
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    assert_int_equal(cfg->workers, cpus < 1 ? 1 : cpus);
    assert_int_equal(cfg->balancing, MK_BALANCE_REUSEPORT);
    assert_int_equal(cfg->timeout_ms, 15000);
    assert_int_equal(cfg->body_min_rate, 500);
    assert_int_equal(cfg->send_timeout_ms, 30000);
    assert_true(cfg->keepalive);
    assert_int_equal(cfg->keepalive_timeout_ms, 5000);
    assert_int_equal(cfg->max_keepalive_requests, 1000);
    assert_int_equal(cfg->graceful_timeout_ms, 30000);
    assert_int_equal(cfg->limits.max_line, 8192);
    assert_int_equal(cfg->limits.max_head, 32768);
    assert_int_equal(cfg->limits.max_headers, 100);
    assert_int_equal(cfg->max_body, 16u << 20);
    assert_int_equal(cfg->max_connections, 0);
    assert_int_equal(cfg->backlog, 1024);
    assert_int_equal(cfg->tcp_fastopen, 0);
    assert_true(cfg->defer_accept);
    assert_false(cfg->hide_version);
    assert_null(cfg->user);
    assert_null(cfg->pidfile);
    assert_null(cfg->log_path);
    assert_int_equal(cfg->log_level, MK_LOG_INFO);
    assert_string_equal(cfg->default_mime, "application/octet-stream");
    assert_int_equal(cfg->n_index_files, 2);
    assert_string_equal(cfg->index_files[0], "index.html");
    assert_string_equal(cfg->index_files[1], "index.htm");
    assert_string_equal(cfg->server_header, "Server: Monkey/" MK_VERSION_STR "\r\n");
    assert_int_equal(cfg->server_header_len, strlen(cfg->server_header));
    assert_int_equal(cfg->n_plugins, 0);

    /* no monkey.mime: the built-in table */
    assert_non_null(cfg->mime);
    struct mk_str t = mk_mime_lookup(cfg->mime, "/a.html", 7);
    assert_memory_equal(t.p, "text/html; charset=utf-8", t.len);
    t = mk_mime_lookup(cfg->mime, "/a.unknown", 10);
    assert_memory_equal(t.p, "application/octet-stream", t.len);

    /* the one site */
    assert_int_equal(cfg->n_sites, 1);
    assert_ptr_equal(cfg->default_site, cfg->sites[0]);
    snprintf(docroot, sizeof(docroot), "%s/htdocs", d->real);
    assert_string_equal(cfg->default_site->docroot, docroot);
    assert_true(cfg->default_site->docroot_fd >= 0);
    assert_false(cfg->default_site->symlinks);
    assert_true(cfg->default_site->hide_dotfiles); /* on unless the site says Off */
    assert_int_equal(cfg->default_site->n_names, 1);
    assert_string_equal(cfg->default_site->names[0], "localhost");
    assert_int_equal(cfg->default_site->n_error_pages, 0);

    mk_config_unref(cfg);
    confdir_free(d);
}

/* An empty monkey.conf (no [SERVER] at all) is all defaults too. */
static void test_empty_file(void **state)
{
    struct confdir *d = confdir_new();
    struct mk_config *cfg;
    (void) state;

    write_file(d, "monkey.conf", "");
    cfg = load(d, NULL, 0);
    assert_int_equal(cfg->n_listen, 1);
    assert_string_equal(cfg->listen[0].spec, "2001");
    assert_int_equal(cfg->timeout_ms, 15000);
    mk_config_unref(cfg);
    confdir_free(d);
}

/* Balancing fair, unless this build left the fair balancing mode out (MK_FAIR=OFF). */
#ifdef MK_HAVE_FAIR
#define EVERY_BALANCING "fair"
#define EVERY_BALANCE MK_BALANCE_FAIR
#else
#define EVERY_BALANCING "reuseport"
#define EVERY_BALANCE MK_BALANCE_REUSEPORT
#endif

static void test_every_key(void **state)
{
    struct confdir *d = confdir_new();
    struct mk_config *cfg;
    char path[PATH_MAX * 2];
    (void) state;

    write_file(d, "monkey.conf",
               "[SERVER]\n"
               "    Listen 127.0.0.1:8080\n"
               "    Listen [::1]:8081\n"
               "    Listen *:8082\n"
               "    Listen 8083 tls  h2\tcert=a.pem\n"
               "    Workers 3\n"
               "    Balancing " EVERY_BALANCING "\n"
               "    Timeout 20\n"
               "    BodyMinRate 2K\n"
               "    SendTimeout 40\n"
               "    KeepAlive Off\n"
               "    KeepAliveTimeout 7\n"
               "    MaxKeepAliveRequests 0\n"
               "    GracefulTimeout 0\n"
               "    MaxRequestLine 4K\n"
               "    MaxRequestSize 1M\n"
               "    MaxRequestHeaders 50\n"
               "    MaxRequestBody 1G\n"
               "    MaxConnections 5000\n"
               "    Backlog 511\n"
               "    TCPFastOpen 16\n"
               "    DeferAccept yes\n"
               "    HideVersion true\n"
               "    User nobody\n"
               "    PidFile run/monkey.pid\n"
               "    Log /var/log/monkey.log\n"
               "    LogLevel DEBUG\n"
               "    IndexFiles default.htm  index.php\tindex.html\n"
               "    DefaultMimeType text/plain; charset=utf-8\n");
    cfg = load(d, NULL, 0);

    assert_int_equal(cfg->n_listen, 4);
    struct sockaddr_in *in4 = (struct sockaddr_in *) &cfg->listen[0].addr;
    assert_int_equal(in4->sin_family, AF_INET);
    assert_int_equal(ntohs(in4->sin_port), 8080);
    assert_int_equal(ntohl(in4->sin_addr.s_addr), INADDR_LOOPBACK);
    assert_false(cfg->listen[0].any);
    assert_int_equal(cfg->listen[0].addrlen, sizeof(struct sockaddr_in));
    struct sockaddr_in6 *in6 = (struct sockaddr_in6 *) &cfg->listen[1].addr;
    assert_int_equal(in6->sin6_family, AF_INET6);
    assert_int_equal(ntohs(in6->sin6_port), 8081);
    assert_memory_equal(&in6->sin6_addr, &in6addr_loopback, sizeof(in6addr_loopback));
    assert_false(cfg->listen[1].any);
    assert_true(cfg->listen[2].any);
    assert_string_equal(cfg->listen[2].spec, "*:8082");
    assert_string_equal(cfg->listen[3].spec, "8083");
    assert_string_equal(cfg->listen[3].transport, "tls");
    assert_string_equal(cfg->listen[3].options, "h2 cert=a.pem");
    assert_string_equal(cfg->listen[3].text, "8083 tls h2 cert=a.pem");
    assert_null(cfg->listen[0].options);
    assert_string_equal(cfg->listen[0].transport, "plain");
    snprintf(path, sizeof(path), "%s/monkey.conf:5", d->real);
    assert_string_equal(cfg->listen[3].where, path);

    assert_int_equal(cfg->workers, 3);
    assert_int_equal(cfg->balancing, EVERY_BALANCE);
    assert_int_equal(cfg->timeout_ms, 20000);
    assert_int_equal(cfg->body_min_rate, 2048);
    assert_int_equal(cfg->send_timeout_ms, 40000);
    assert_false(cfg->keepalive);
    assert_int_equal(cfg->keepalive_timeout_ms, 7000);
    assert_int_equal(cfg->max_keepalive_requests, 0);
    assert_int_equal(cfg->graceful_timeout_ms, 0);
    assert_int_equal(cfg->limits.max_line, 4096);
    assert_int_equal(cfg->limits.max_head, 1u << 20);
    assert_int_equal(cfg->limits.max_headers, 50);
    assert_int_equal(cfg->max_body, 1u << 30);
    assert_int_equal(cfg->max_connections, 5000);
    assert_int_equal(cfg->backlog, 511);
    assert_int_equal(cfg->tcp_fastopen, 16);
    assert_true(cfg->defer_accept);
    assert_true(cfg->hide_version);
    assert_string_equal(cfg->server_header, "Server: Monkey\r\n");
    assert_string_equal(cfg->user, "nobody");
    snprintf(path, sizeof(path), "%s/run/monkey.pid", d->real);
    assert_string_equal(cfg->pidfile, path);
    assert_string_equal(cfg->log_path, "/var/log/monkey.log");
    assert_int_equal(cfg->log_level, MK_LOG_DEBUG);
    assert_int_equal(cfg->n_index_files, 3);
    assert_string_equal(cfg->index_files[0], "default.htm");
    assert_string_equal(cfg->index_files[1], "index.php");
    assert_string_equal(cfg->index_files[2], "index.html");
    assert_string_equal(cfg->default_mime, "text/plain; charset=utf-8");
    struct mk_str t = mk_mime_lookup(cfg->mime, "/README", 7);
    assert_memory_equal(t.p, "text/plain; charset=utf-8", t.len);

    mk_config_unref(cfg);
    confdir_free(d);
}

/* Keys and boolean words are case-insensitive; sizes take k/m/g as well. */
static void test_key_case_and_variants(void **state)
{
    struct confdir *d = confdir_new();
    struct mk_config *cfg;
    (void) state;

    write_file(d, "monkey.conf",
               "[server]\n"
               "    LISTEN 8080\n"
               "    keepalive OFF\n"
               "    tcpfastopen on\n"
               "    maxrequestbody 2m\n"
               "    MaxRequestSize 64k\n"
               "    Log stderr\n"
               "    LogLevel Warn\n"
               "    Balancing REUSEPORT\n");
    cfg = load(d, NULL, 0);
    assert_int_equal(cfg->n_listen, 1);
    assert_string_equal(cfg->listen[0].spec, "8080");
    assert_false(cfg->keepalive);
    assert_int_equal(cfg->tcp_fastopen, 256);
    assert_int_equal(cfg->max_body, 2u << 20);
    assert_int_equal(cfg->limits.max_head, 64u << 10);
    assert_null(cfg->log_path);
    assert_int_equal(cfg->log_level, MK_LOG_WARN);
    assert_int_equal(cfg->balancing, MK_BALANCE_REUSEPORT);
    mk_config_unref(cfg);
    confdir_free(d);
}

/* Timeouts take durations: a unit (ms, s, m, h) or plain seconds. */
static void test_sub_second_timeouts(void **state)
{
    struct confdir *d = confdir_new();
    struct mk_config *cfg;
    (void) state;

    write_file(d, "monkey.conf",
               "[SERVER]\n"
               "    Timeout 250ms\n"
               "    SendTimeout 2s\n"
               "    KeepAliveTimeout 1m\n"
               "    GracefulTimeout 1500ms\n");
    cfg = load(d, NULL, 0);
    assert_int_equal(cfg->timeout_ms, 250);
    assert_int_equal(cfg->send_timeout_ms, 2000);
    assert_int_equal(cfg->keepalive_timeout_ms, 60000);
    assert_int_equal(cfg->graceful_timeout_ms, 1500);
    mk_config_unref(cfg);

    write_file(d, "monkey.conf", "[SERVER]\n    Timeout 1h\n    GracefulTimeout 0ms\n");
    cfg = load(d, NULL, 0);
    assert_int_equal(cfg->timeout_ms, 3600000);
    assert_int_equal(cfg->graceful_timeout_ms, 0);
    mk_config_unref(cfg);
    confdir_free(d);
}

/* MaxRequestLine never exceeds MaxRequestSize. */
#ifdef MK_HAVE_REALIP
/* proxy_protocol anywhere after the address; RealIPFrom's blocks from several lines. */
static void test_proxy_and_real_ip(void **state)
{
    struct confdir *d = confdir_new();
    struct mk_config *cfg;
    (void) state;

    write_file(d, "monkey.conf",
               "[SERVER]\n    Listen 2001 proxy_protocol\n    Listen 2002 proxy_protocol h2c\n"
               "    Listen 2003 h2c\n    Listen 2004 tls proxy_protocol\n"
               "    RealIPFrom 10.0.0.0/8 ::1\n    RealIPFrom 192.0.2.7\n"
               "    RealIPHeader forwarded\n");
    cfg = load(d, NULL, 0);
    assert_int_equal(cfg->n_listen, 4);
    assert_true(cfg->listen[0].proxy_protocol);
    assert_string_equal(cfg->listen[0].transport, "plain");
    assert_null(cfg->listen[0].options);
    assert_string_equal(cfg->listen[0].text, "2001 proxy_protocol");
    assert_true(cfg->listen[1].proxy_protocol);
    assert_string_equal(cfg->listen[1].options, "h2c");
    assert_string_equal(cfg->listen[1].text, "2002 plain h2c proxy_protocol");
    assert_false(cfg->listen[2].proxy_protocol);
    assert_true(cfg->listen[3].proxy_protocol);
    assert_string_equal(cfg->listen[3].transport, "tls");
    assert_null(cfg->listen[3].options);
    assert_string_equal(mk_config_value(cfg, "Listen", 3), "2004 tls proxy_protocol");
    assert_int_equal(cfg->n_realip_from, 3);
    assert_int_equal(cfg->realip_from[1].family, AF_INET6);
    assert_string_equal(mk_config_value(cfg, "RealIPFrom", 2), "192.0.2.7");
    assert_null(mk_config_value(cfg, "RealIPFrom", 3));
    assert_int_equal(cfg->realip_header, MK_REALIP_FORWARDED);
    mk_config_unref(cfg);

    /* the defaults: off */
    write_file(d, "monkey.conf", "[SERVER]\n    Listen 2001\n");
    cfg = load(d, NULL, 0);
    assert_false(cfg->listen[0].proxy_protocol);
    assert_int_equal(cfg->n_realip_from, 0);
    assert_null(cfg->realip_from);
    assert_int_equal(cfg->realip_header, MK_REALIP_X_FORWARDED_FOR);
    mk_config_unref(cfg);
    confdir_free(d);
}
#endif

#ifdef MK_HAVE_METRICS
/* MetricsBuckets: seconds to microseconds; the default is Prometheus'. */
static void test_metrics_buckets(void **state)
{
    static const uint64_t fixed[] = MK_METRICS_BOUNDS_US;
    struct confdir *d = confdir_new();
    struct mk_config *cfg;
    (void) state;

    write_file(d, "monkey.conf", "[SERVER]\n    MetricsBuckets 0.000001 .25 1.5\t3600\n");
    cfg = load(d, NULL, 0);
    assert_int_equal(cfg->n_metrics_bounds, 4);
    assert_int_equal(cfg->metrics_bounds[0], 1);
    assert_int_equal(cfg->metrics_bounds[1], 250000);
    assert_int_equal(cfg->metrics_bounds[2], 1500000);
    assert_int_equal(cfg->metrics_bounds[3], 3600000000ull);
    mk_config_unref(cfg);
    write_file(d, "monkey.conf", "[SERVER]\n    Listen 2001\n");
    cfg = load(d, NULL, 0);
    assert_int_equal(cfg->n_metrics_bounds, MK_METRICS_BUCKETS - 1);
    assert_memory_equal(cfg->metrics_bounds, fixed, sizeof(fixed));
    mk_config_unref(cfg);
    confdir_free(d);
}
#endif

static void test_line_limit_clamped(void **state)
{
    struct confdir *d = confdir_new();
    struct mk_config *cfg;
    (void) state;

    write_file(d, "monkey.conf", "[SERVER]\n    MaxRequestLine 16K\n    MaxRequestSize 8K\n");
    cfg = load(d, NULL, 0);
    assert_int_equal(cfg->limits.max_head, 8192);
    assert_int_equal(cfg->limits.max_line, 8192);
    mk_config_unref(cfg);
    confdir_free(d);
}

/* ---- errors: each names the file and the line ------------------------ */

struct bad_case {
    const char *file; /* relative path written with `text` */
    const char *text;
    int line;           /* of the faulty line */
    const char *needle; /* expected in the message */
};

static const struct bad_case bad_server[] = {
    {"monkey.conf", "[SERVER]\n    Listen 2001\n    Bogus 1\n", 3, "Bogus"},
    {"monkey.conf", "[SERVER]\n    Listen 2001\n\n[OTHER]\n    Timeout 5\n", 4, "[OTHER]"},
    {"monkey.conf", "[SERVER]\n    Timeout 5\n[SERVER]\n    SendTimeout 5\n", 3, "twice"},
    {"monkey.conf", "# comment\n[SERVER]\n    KeepAlive maybe\n", 3, "maybe"},
    {"monkey.conf", "[SERVER]\n    DeferAccept 2\n", 2, "DeferAccept"},
    {"monkey.conf", "[SERVER]\n    HideVersion onn\n", 2, "HideVersion"},
    {"monkey.conf", "[SERVER]\n    Timeout 0\n", 2, "out of range"},
    {"monkey.conf", "[SERVER]\n    Timeout 3601\n", 2, "out of range"},
    {"monkey.conf", "[SERVER]\n    Timeout -5\n", 2, "Timeout"},
    {"monkey.conf", "[SERVER]\n    Timeout 5x\n", 2, "duration"},
    {"monkey.conf", "[SERVER]\n    Timeout 1.5s\n", 2, "Timeout"},
    {"monkey.conf", "[SERVER]\n    Timeout 0ms\n", 2, "out of range (1ms to 3600s)"},
    {"monkey.conf", "[SERVER]\n    Timeout 61m\n", 2, "out of range"},
    {"monkey.conf", "[SERVER]\n    KeepAliveTimeout 5 s\n", 2, "KeepAliveTimeout"},
    {"monkey.conf", "[SERVER]\n    Timeout 99999999999999999999999\n", 2, "Timeout"},
    {"monkey.conf", "[SERVER]\n    SendTimeout 0\n", 2, "SendTimeout"},
    {"monkey.conf", "[SERVER]\n    BodyMinRate 2G\n", 2, "BodyMinRate"},
    {"monkey.conf", "[SERVER]\n    BodyMinRate fast\n", 2, "BodyMinRate"},
    {"monkey.conf", "[SERVER]\n    KeepAliveTimeout 3601\n", 2, "KeepAliveTimeout"},
    {"monkey.conf", "[SERVER]\n    MaxKeepAliveRequests -1\n", 2, "MaxKeepAliveRequests"},
    {"monkey.conf", "[SERVER]\n    GracefulTimeout 86401\n", 2, "GracefulTimeout"},
    {"monkey.conf", "[SERVER]\n    Workers 1025\n", 2, "Workers"},
    {"monkey.conf", "[SERVER]\n    Workers many\n", 2, "Workers"},
    {"monkey.conf", "[SERVER]\n    Balancing random\n", 2, "Balancing"},
    {"monkey.conf", "[SERVER]\n    MaxRequestLine 63\n", 2, "MaxRequestLine"},
    {"monkey.conf", "[SERVER]\n    MaxRequestLine 2M\n", 2, "MaxRequestLine"},
    {"monkey.conf", "[SERVER]\n    MaxRequestSize 255\n", 2, "MaxRequestSize"},
    {"monkey.conf", "[SERVER]\n    MaxRequestSize 17M\n", 2, "MaxRequestSize"},
    {"monkey.conf", "[SERVER]\n    MaxRequestHeaders 0\n", 2, "MaxRequestHeaders"},
    {"monkey.conf", "[SERVER]\n    MaxRequestHeaders 10001\n", 2, "MaxRequestHeaders"},
    {"monkey.conf", "[SERVER]\n    MaxRequestBody 1T\n", 2, "MaxRequestBody"},
    {"monkey.conf", "[SERVER]\n    MaxRequestBody 99999999999G\n", 2, "MaxRequestBody"},
    {"monkey.conf", "[SERVER]\n    MaxRequestBody -1\n", 2, "MaxRequestBody"},
    {"monkey.conf", "[SERVER]\n    MaxConnections 10000001\n", 2, "MaxConnections"},
    {"monkey.conf", "[SERVER]\n    Backlog 0\n", 2, "Backlog"},
    {"monkey.conf", "[SERVER]\n    TCPFastOpen maybe\n", 2, "TCPFastOpen"},
    {"monkey.conf", "[SERVER]\n    TCPFastOpen 1048577\n", 2, "TCPFastOpen"},
    {"monkey.conf", "[SERVER]\n    LogLevel verbose\n", 2, "LogLevel"},
    {"monkey.conf", "[SERVER]\n    DefaultMimeType binary\n", 2, "DefaultMimeType"},
    /* Listen */
    {"monkey.conf", "[SERVER]\n    Listen 0\n", 2, "port"},
    {"monkey.conf", "[SERVER]\n    Listen 65536\n", 2, "port"},
    {"monkey.conf", "[SERVER]\n    Listen http\n", 2, "port"},
    {"monkey.conf", "[SERVER]\n    Listen 127.0.0.1:\n", 2, "port"},
    {"monkey.conf", "[SERVER]\n    Listen 127.0.0.1\n", 2, "Listen"},
    {"monkey.conf", "[SERVER]\n    Listen 1.2.3.4.5:80\n", 2, "1.2.3.4.5"},
    {"monkey.conf", "[SERVER]\n    Listen localhost:80\n", 2, "localhost"},
    {"monkey.conf", "[SERVER]\n    Listen [::1]80\n", 2, "[::1]80"},
#ifdef MK_HAVE_REALIP
    {"monkey.conf", "[SERVER]\n    Listen 2001 proxy_protocol proxy_protocol\n", 2, "twice"},
    {"monkey.conf", "[SERVER]\n    Listen proxy_protocol\n", 2, "proxy_protocol"},
    {"monkey.conf", "[SERVER]\n    Listen 2001\n    Listen 2001 proxy_protocol\n", 3, "twice"},
    /* RealIPFrom, RealIPHeader */
    {"monkey.conf", "[SERVER]\n    RealIPFrom 10.0.0.0/33\n", 2, "out of range for IPv4"},
    {"monkey.conf", "[SERVER]\n    RealIPFrom ::/129\n", 2, "out of range for IPv6"},
    {"monkey.conf", "[SERVER]\n    RealIPFrom 10.0.0.1/8\n", 2, "bits set beyond"},
    {"monkey.conf", "[SERVER]\n    RealIPFrom 10.0.0.0/8\n    RealIPFrom lb.example\n", 3,
     "'lb.example' is not an IPv4 or IPv6 address block"},
    {"monkey.conf", "[SERVER]\n    RealIPFrom 10.0.0.0/x\n", 2, "must be a number"},
    {"monkey.conf", "[SERVER]\n    RealIPFrom ::ffff:10.0.0.0/8\n", 2, "IPv4-mapped"},
    {"monkey.conf", "[SERVER]\n    RealIPHeader X-Client-IP\n", 2, "RealIPHeader"},
#endif
#ifdef MK_HAVE_REQID
    /* RequestIdHeader, RequestIdFrom, TraceContext */
    {"monkey.conf", "[SERVER]\n    RequestIdHeader X:Id\n", 2, "is not a field name"},
    {"monkey.conf", "[SERVER]\n    RequestIdHeader traceparent\n", 2, "the server reads itself"},
    {"monkey.conf", "[SERVER]\n    RequestIdHeader Transfer-Encoding\n", 2,
     "the server reads itself"},
    {"monkey.conf", "[SERVER]\n    RequestIdFrom 10.0.0.1/8\n", 2, "bits set beyond"},
    {"monkey.conf", "[SERVER]\n    RequestIdFrom lb.example\n", 2,
     "'lb.example' is not an IPv4 or IPv6 address block"},
    {"monkey.conf", "[SERVER]\n    TraceContext Always\n", 2, "TraceContext"},
#endif
#ifdef MK_HAVE_METRICS
    /* MetricsBuckets */
    {"monkey.conf", "[SERVER]\n    Workers 1\n    MetricsBuckets 0.5 0.1\n", 3, "must ascend"},
    {"monkey.conf", "[SERVER]\n    MetricsBuckets 0.1 0.1\n", 2, "must ascend"},
    {"monkey.conf", "[SERVER]\n    MetricsBuckets 0\n", 2, "'0' is not a bound"},
    {"monkey.conf", "[SERVER]\n    MetricsBuckets 0.0000001\n", 2, "at most 6 decimals"},
    {"monkey.conf", "[SERVER]\n    MetricsBuckets 3600.000001\n", 2, "not a bound"},
    {"monkey.conf", "[SERVER]\n    MetricsBuckets 1 2 x\n", 2, "'x' is not a bound"},
    {"monkey.conf", "[SERVER]\n    MetricsBuckets .\n", 2, "'.' is not a bound"},
    {"monkey.conf", "[SERVER]\n    MetricsBuckets 1 2 3 4 5 6 7 8 9 10 11 12\n", 2,
     "at most 11 bounds"},
#endif
    {"monkey.conf", "[SERVER]\n    Listen [::1\n", 2, "Listen"},
    {"monkey.conf", "[SERVER]\n    Listen [zz::1]:80\n", 2, "zz::1"},
    {"monkey.conf", "[SERVER]\n    Listen 8080 plain extra\n", 2,
     "the transport 'plain' takes no options"},
    {"monkey.conf", "[SERVER]\n    Listen 8080\n    Timeout 5\n    Listen 8080\n", 4, "twice"},
    {"monkey.conf", "[SERVER]\n    Listen 8080\n    Listen *:8080\n", 3, "twice"},
    {"monkey.conf", "[SERVER]\n    Listen 127.0.0.1:80\n    Listen 127.0.0.1:80 tls\n", 3, "twice"},
    /* a key given twice */
    {"monkey.conf", "[SERVER]\n    Timeout 5\n    Workers 1\n    Timeout 6\n", 4, "Timeout"},
    {"monkey.conf", "[SERVER]\n    User root\n    user root\n", 3, "User"},
    /* a user the system does not know */
    {"monkey.conf", "[SERVER]\n    Listen 2001\n    User mk-no-such-user\n", 3,
     "no such user 'mk-no-such-user'"},
    /* syntax errors from the reader */
    {"monkey.conf", "[SERVER]\nListen 2001\n", 2, "SECTION"},
    {"monkey.conf", "    Listen 2001\n[SERVER]\n", 1, "outside"},
    {"monkey.conf", "[SERVER]\n    Listen\n", 2, "no value"},
};

static const struct bad_case bad_sites[] = {
    /* no DocumentRoot: the [HOST] line */
    {"sites/default", "# the site\n[HOST]\n    ServerName localhost\n", 2, "DocumentRoot"},
    /* a DocumentRoot that does not exist */
    {"sites/default", "[HOST]\n    ServerName localhost\n    DocumentRoot nowhere\n", 3, "nowhere"},
    {"sites/default", "[HOST]\n    DocumentRoot outside.html\n", 2, "DocumentRoot"},
    {"sites/default", "[HOST]\n    DocumentRoot htdocs\n    DocumentRoot htdocs\n", 3, "twice"},
    {"sites/default", "[HOST]\n    DocumentRoot htdocs\n    Symlinks perhaps\n", 3, "Symlinks"},
    {"sites/default", "[HOST]\n    DocumentRoot htdocs\n    Symlinks On\n    Symlinks Off\n", 4,
     "twice"},
    {"sites/default", "[HOST]\n    DocumentRoot htdocs\n    HideDotFiles sometimes\n", 3,
     "HideDotFiles"},
    {"sites/default",
     "[HOST]\n    DocumentRoot htdocs\n    HideDotFiles On\n    HideDotFiles Off\n", 4,
     "'HideDotFiles' is given twice"},
    {"sites/default", "[HOST]\n    DocumentRoot htdocs\n    ServerName a.com b_c!d\n", 3, "b_c!d"},
    {"sites/default", "[HOST]\n    DocumentRoot htdocs\n    Alias /x\n", 3,
     "Alias"}, /* sections (other than [HOST] and [ERROR_PAGES]: see test_unclaimed_site_section) */
    {"sites/default", "[HOST]\n    DocumentRoot htdocs\n[HOST]\n    DocumentRoot htdocs\n", 3,
     "twice"},
    /* the site's IndexFiles: checked as the server's */
    {"sites/default",
     "[HOST]\n    DocumentRoot htdocs\n    IndexFiles a.html\n    IndexFiles b.html\n", 4,
     "'IndexFiles' is given twice"},
    {"sites/default", "[HOST]\n    DocumentRoot htdocs\n    IndexFiles index.php ..\n", 3,
     "IndexFiles: '..' is not a plain file name"},
    /* no [HOST]: the section meant to be it, else the first section, else line 1 */
    {"sites/default", "# typo\n[HOSTS]\n    DocumentRoot htdocs\n", 2,
     "unknown section [HOSTS]: did you mean [HOST]?"},
    {"sites/default", "[ERROR_PAGES]\n    404 404.html\n[hots]\n    DocumentRoot htdocs\n", 3,
     "unknown section [hots]: did you mean [HOST]?"},
    {"sites/default", "\n[ACCESS]\n    Allow all\n", 2,
     "missing [HOST] section: the file has [ACCESS]"},
    {"sites/default", "# nothing\n", 1, "missing [HOST] section: the file has no section"},
    /* error pages */
    {"sites/default", "[HOST]\n    DocumentRoot htdocs\n[ERROR_PAGES]\n    404 ../outside.html\n",
     4, "../outside.html"},
    {"sites/default", "[HOST]\n    DocumentRoot htdocs\n[ERROR_PAGES]\n    404 /../outside.html\n",
     4, "outside.html"},
    {"sites/default",
     "[HOST]\n    DocumentRoot htdocs\n[ERROR_PAGES]\n    404 404.html\n    500 %2e%2e/x\n", 5,
     "%2e%2e/x"},
    {"sites/default", "[HOST]\n    DocumentRoot htdocs\n[ERROR_PAGES]\n    404 missing.html\n", 4,
     "missing.html"},
    {"sites/default", "[HOST]\n    DocumentRoot htdocs\n[ERROR_PAGES]\n    404 errors/\n", 4,
     "errors/"},
    {"sites/default", "[HOST]\n    DocumentRoot htdocs\n[ERROR_PAGES]\n    404 errors\n", 4,
     "regular"},
    {"sites/default", "[HOST]\n    DocumentRoot htdocs\n[ERROR_PAGES]\n    302 404.html\n", 4,
     "302"},
    {"sites/default", "[HOST]\n    DocumentRoot htdocs\n[ERROR_PAGES]\n    600 404.html\n", 4,
     "600"},
    {"sites/default", "[HOST]\n    DocumentRoot htdocs\n[ERROR_PAGES]\n    NotFound 404.html\n", 4,
     "NotFound"},
    {"sites/default",
     "[HOST]\n    DocumentRoot htdocs\n[ERROR_PAGES]\n    404 404.html\n    404 404.html\n", 5,
     "twice"},
    /* syntax */
    {"sites/default", "[HOST]\nDocumentRoot htdocs\n", 2, NULL},
};

static const struct bad_case bad_plugins[] = {
    {"plugins.load", "[PLUGINS]\n    Load skeleton\n    Lod other\n", 3, "Lod"},
    {"plugins.load", "# list\n[MODULES]\n    Load skeleton\n", 2, "[MODULES]"},
    {"plugins.load", "[PLUGINS]\n    Load skeleton\n    Load skeleton\n", 3, "twice"},
    {"plugins.load",
     "[PLUGINS]\n    Load lib/a.so\n    Load ./lib/../lib/b.so\n    Load lib/a.so\n", 4, "twice"},
    {"plugins.load", "[PLUGINS]\nLoad skeleton\n", 2, NULL},
};

static const struct bad_case bad_mime[] = {
    {"monkey.mime", "[MIMETYPES]\n    html text/html\n    css stylesheet\n", 3, "stylesheet"},
    {"monkey.mime", "[MIMETYPES]\n    html text/html\n[OTHER]\n", 3,
     "unknown section [OTHER] (expected [MIMETYPES])"},
    {"monkey.mime", "[MIMETYPES]\n    html text/html\n    css text/css\n    HTML text/plain\n", 4,
     "'html' is listed twice (first at line 2)"},
};

static unsigned run_bad_cases(const struct bad_case *cases, size_t n)
{
    unsigned failures = 0;

    for (size_t i = 0; i < n; i++) {
        struct confdir *d = confdir_new();
        write_file(d, cases[i].file, cases[i].text);
        if (!expect_load_error(d, NULL, 0, cases[i].file, cases[i].line, cases[i].needle)) {
            print_error("  case %zu of %s:\n%s\n", i, cases[i].file, cases[i].text);
            failures++;
        }
        confdir_free(d);
    }
    return failures;
}

static void test_bad_server_lines(void **state)
{
    (void) state;
    assert_int_equal(run_bad_cases(bad_server, sizeof(bad_server) / sizeof(bad_server[0])), 0);
}

static void test_bad_site_lines(void **state)
{
    (void) state;
    assert_int_equal(run_bad_cases(bad_sites, sizeof(bad_sites) / sizeof(bad_sites[0])), 0);
}

/*
 * Sections other than [HOST] and [ERROR_PAGES] belong to plugins: loading
 * keeps them, and mk_plugins_sites() refuses those no loaded plugin reads,
 * naming the file and the line.
 */
static void test_unclaimed_site_section(void **state)
{
    (void) state;
    struct confdir *d = confdir_new();
    struct mk_plugin_set none = {0};
    char err[1024] = "", prefix[PATH_MAX * 2];

    write_file(d, "sites/default", BASE_SITE "[REWRITE]\n    a b\n");
    struct mk_config *cfg = load(d, NULL, 0);
    assert_int_equal(mk_plugins_sites(&none, cfg, err, sizeof(err)), MK_ERR);
    snprintf(prefix, sizeof(prefix), "%s/sites/default:4: ", d->real);
    assert_memory_equal(err, prefix, strlen(prefix));
    assert_non_null(strstr(err, "[REWRITE]"));
    mk_config_unref(cfg);

    write_file(d, "sites/default", BASE_SITE "[ERROR_PAGES]\n    404 404.html\n");
    cfg = load(d, NULL, 0);
    assert_int_equal(mk_plugins_sites(&none, cfg, err, sizeof(err)), MK_OK);
    mk_config_unref(cfg);
    confdir_free(d);
}

static void test_bad_plugin_lines(void **state)
{
    (void) state;
    assert_int_equal(run_bad_cases(bad_plugins, sizeof(bad_plugins) / sizeof(bad_plugins[0])), 0);
}

static void test_bad_mime_lines(void **state)
{
    (void) state;
    assert_int_equal(run_bad_cases(bad_mime, sizeof(bad_mime) / sizeof(bad_mime[0])), 0);
}

/*
 * IndexFiles with a name that is not a plain file name. Kept out of the table
 * and run last: under the sanitizers a failure here ends the process.
 */
static void test_bad_index_files(void **state)
{
    static const struct bad_case cases[] = {
        {"monkey.conf", "[SERVER]\n    Listen 2001\n    IndexFiles index.html sub/index.html\n", 3,
         "'sub/index.html' is not a plain file name"},
        {"monkey.conf", "[SERVER]\n    IndexFiles ..\n", 2, "'..' is not a plain file name"},
        {"monkey.conf", "[SERVER]\n    IndexFiles . index.html\n", 2,
         "'.' is not a plain file name"},
    };
    (void) state;
    assert_int_equal(run_bad_cases(cases, sizeof(cases) / sizeof(cases[0])), 0);
}

/*
 * A name used by two sites is reported in the later file (in name order), at
 * the line of its ServerName.
 */
static void test_duplicate_name_across_sites(void **state)
{
    struct confdir *d = confdir_new();
    (void) state;

    write_file(d, "sites/other",
               "# another site\n[HOST]\n    ServerName example.org localhost\n"
               "    DocumentRoot htdocs\n");
    bool ok = expect_load_error(d, NULL, 0, "sites/other", 3, "localhost");
    confdir_free(d);
    assert_true(ok);
}

/* A name given twice in one site is reported at its line too. */
static void test_duplicate_name_in_one_site(void **state)
{
    struct confdir *d = confdir_new();
    (void) state;

    write_file(
        d, "sites/default",
        "[HOST]\n    ServerName a.com\n    ServerName b.com A.com\n    DocumentRoot htdocs\n");
    bool ok = expect_load_error(d, NULL, 0, "sites/default", 3, "a.com");
    confdir_free(d);
    assert_true(ok);
}

/* Directories that cannot be loaded at all. */
static void test_missing_pieces(void **state)
{
    char err[1024] = "";
    struct confdir *d;
    char path[PATH_MAX * 2];
    (void) state;

    assert_null(mk_config_load("/nonexistent/monkey-conf", NULL, 0, err, sizeof(err)));
    assert_non_null(strstr(err, "/nonexistent/monkey-conf"));

    d = confdir_new();
    snprintf(path, sizeof(path), "%s/monkey.conf", d->path);
    assert_int_equal(unlink(path), 0);
    err[0] = '\0';
    assert_null(mk_config_load(d->path, NULL, 0, err, sizeof(err)));
    assert_non_null(strstr(err, "monkey.conf"));
    confdir_free(d);

    d = confdir_new();
    write_file(d, "sites/default", "# no [HOST] section\n");
    err[0] = '\0';
    assert_null(mk_config_load(d->path, NULL, 0, err, sizeof(err)));
    assert_non_null(strstr(err, "HOST"));
    confdir_free(d);
}

/*
 * An empty sites/ directory: "no site defined". Run last: under the
 * sanitizers a failure here ends the process.
 */
static void test_empty_sites_dir(void **state)
{
    struct confdir *d = confdir_new();
    char path[PATH_MAX * 2], err[1024] = "", want[PATH_MAX * 2];
    (void) state;

    snprintf(path, sizeof(path), "%s/sites/default", d->path);
    assert_int_equal(unlink(path), 0);
    assert_null(mk_config_load(d->path, NULL, 0, err, sizeof(err)));
    snprintf(want, sizeof(want), "%s/sites: no site defined", d->real);
    assert_string_equal(err, want);
    confdir_free(d);
}

/* ---- overrides ------------------------------------------------------------- */

static void test_overrides(void **state)
{
    struct confdir *d = confdir_new();
    struct mk_config *cfg;
    (void) state;

    write_file(d, "monkey.conf",
               "[SERVER]\n"
               "    Listen 8080\n"
               "    Listen 127.0.0.1:8081\n"
               "    Timeout 20\n"
               "    KeepAliveTimeout 9\n");

    /* a Listen override replaces every Listen line */
    const struct mk_config_override one[] = {{"Listen", "9090"}};
    cfg = load(d, one, 1);
    assert_int_equal(cfg->n_listen, 1);
    assert_string_equal(cfg->listen[0].spec, "9090");
    assert_string_equal(cfg->listen[0].where, "command line:0");
    assert_int_equal(cfg->timeout_ms, 20000); /* other keys keep the file's value */
    mk_config_unref(cfg);

    const struct mk_config_override two[] = {
        {"listen", "127.0.0.1:9091"}, {"Timeout", "3"}, {"Workers", "2"}, {"Listen", "9092"}};
    cfg = load(d, two, 4);
    assert_int_equal(cfg->n_listen, 2);
    assert_string_equal(cfg->listen[0].spec, "127.0.0.1:9091");
    assert_string_equal(cfg->listen[1].spec, "9092");
    assert_int_equal(cfg->timeout_ms, 3000);
    assert_int_equal(cfg->workers, 2);
    assert_int_equal(cfg->keepalive_timeout_ms, 9000);
    mk_config_unref(cfg);

    /* without overrides the file is in force */
    cfg = load(d, NULL, 0);
    assert_int_equal(cfg->n_listen, 2);
    assert_string_equal(cfg->listen[0].spec, "8080");
    assert_string_equal(cfg->listen[1].spec, "127.0.0.1:8081");
    assert_int_equal(cfg->timeout_ms, 20000);
    mk_config_unref(cfg);
    confdir_free(d);
}

static void test_override_errors(void **state)
{
    struct confdir *d = confdir_new();
    char err[1024] = "";
    (void) state;

    const struct mk_config_override bad_value[] = {{"Timeout", "0"}};
    assert_null(mk_config_load(d->path, bad_value, 1, err, sizeof(err)));
    assert_true(strncmp(err, "command line:", 13) == 0);
    assert_non_null(strstr(err, "Timeout"));

    const struct mk_config_override bad_key[] = {{"Port", "80"}};
    err[0] = '\0';
    assert_null(mk_config_load(d->path, bad_key, 1, err, sizeof(err)));
    assert_true(strncmp(err, "command line:", 13) == 0);
    assert_non_null(strstr(err, "Port"));

    const struct mk_config_override bad_listen[] = {{"Listen", "70000"}};
    err[0] = '\0';
    assert_null(mk_config_load(d->path, bad_listen, 1, err, sizeof(err)));
    assert_true(strncmp(err, "command line:", 13) == 0);

    const struct mk_config_override dup_listen[] = {{"Listen", "9000"}, {"Listen", "*:9000"}};
    err[0] = '\0';
    assert_null(mk_config_load(d->path, dup_listen, 2, err, sizeof(err)));
    assert_non_null(strstr(err, "twice"));
    confdir_free(d);
}

/* ---- sites and virtual hosts --------------------------------------------- */

static void test_site_lookup(void **state)
{
    struct confdir *d = confdir_new();
    struct mk_config *cfg;
    struct mk_site *def, *ex, *wild, *first;
    (void) state;

    write_file(d, "sites/aaa", "[HOST]\n    ServerName first.test\n    DocumentRoot htdocs\n");
    write_file(d, "sites/example",
               "[HOST]\n    ServerName example.com www.Example.COM\n    DocumentRoot htdocs\n"
               "    Symlinks On\n    HideDotFiles Off\n");
    write_file(d, "sites/wild", "[HOST]\n    ServerName *.wild.org\n    DocumentRoot htdocs\n");
    /* ignored: hidden files, editor backups and directories */
    write_file(d, "sites/.hidden", "not a site\n");
    write_file(d, "sites/example~", "not a site\n");
    make_dir(d, "sites/subdir");
    cfg = load(d, NULL, 0);

    assert_int_equal(cfg->n_sites, 4);
    /* sorted by file name: aaa, default, example, wild */
    first = cfg->sites[0];
    def = cfg->sites[1];
    ex = cfg->sites[2];
    wild = cfg->sites[3];
    assert_ptr_equal(cfg->default_site, def); /* the file named "default", not the first */
    assert_string_equal(def->names[0], "localhost");
    assert_int_equal(ex->n_names, 2);
    assert_string_equal(ex->names[1], "www.example.com"); /* lowered */
    assert_true(ex->symlinks);
    assert_false(def->symlinks);
    assert_false(ex->hide_dotfiles);
    assert_true(def->hide_dotfiles);

#define LOOKUP(h) mk_conf_site_lookup(cfg, (h), strlen(h))
    assert_ptr_equal(LOOKUP("example.com"), ex);
    assert_ptr_equal(LOOKUP("EXAMPLE.com"), ex);
    assert_ptr_equal(LOOKUP("www.example.com"), ex);
    assert_ptr_equal(LOOKUP("WWW.EXAMPLE.COM"), ex);
    assert_ptr_equal(LOOKUP("example.com."), ex);
    assert_ptr_equal(LOOKUP("first.test"), first);
    assert_ptr_equal(LOOKUP("localhost"), def);
    assert_ptr_equal(LOOKUP("a.wild.org"), wild);
    assert_ptr_equal(LOOKUP("A.Wild.Org"), wild);
    assert_ptr_equal(LOOKUP("x.y.wild.org"), wild);
    assert_ptr_equal(LOOKUP("a.wild.org."), wild);
    assert_ptr_equal(LOOKUP("wild.org"), def); /* the wildcard needs a label */
    assert_ptr_equal(LOOKUP(".wild.org"), def);
    assert_ptr_equal(LOOKUP("awild.org"), def);
    assert_ptr_equal(LOOKUP("unknown.net"), def);
    assert_ptr_equal(LOOKUP("example.co"), def);
    assert_ptr_equal(LOOKUP("example.comm"), def);
    assert_ptr_equal(LOOKUP("xexample.com"), def);
    assert_ptr_equal(LOOKUP("."), def);
    assert_ptr_equal(LOOKUP(""), def);
    assert_ptr_equal(mk_conf_site_lookup(cfg, NULL, 0), def);
    /* the length is honoured */
    assert_ptr_equal(mk_conf_site_lookup(cfg, "example.comXYZ", 11), ex);
#undef LOOKUP

    mk_config_unref(cfg);
    confdir_free(d);
}

/* Without a file named "default" the first site in name order is the default. */
static void test_default_site_is_first_without_default_file(void **state)
{
    struct confdir *d = confdir_new();
    char path[PATH_MAX * 2];
    struct mk_config *cfg;
    (void) state;

    snprintf(path, sizeof(path), "%s/sites/default", d->path);
    assert_int_equal(unlink(path), 0);
    write_file(d, "sites/zeta", "[HOST]\n    ServerName zeta.test\n    DocumentRoot htdocs\n");
    write_file(d, "sites/beta", "[HOST]\n    ServerName beta.test\n    DocumentRoot htdocs\n");
    cfg = load(d, NULL, 0);
    assert_int_equal(cfg->n_sites, 2);
    assert_string_equal(cfg->default_site->names[0], "beta.test");
    assert_ptr_equal(mk_conf_site_lookup(cfg, "zeta.test", 9), cfg->sites[1]);
    assert_ptr_equal(mk_conf_site_lookup(cfg, "other", 5), cfg->default_site);
    mk_config_unref(cfg);
    confdir_free(d);
}

/* With one site every Host goes to it. */
static void test_single_site(void **state)
{
    struct confdir *d = confdir_new();
    struct mk_config *cfg;
    (void) state;

    cfg = load(d, NULL, 0);
    assert_ptr_equal(mk_conf_site_lookup(cfg, "anything.example", 16), cfg->default_site);
    assert_ptr_equal(mk_conf_site_lookup(cfg, "localhost", 9), cfg->default_site);
    mk_config_unref(cfg);
    confdir_free(d);
}

static void test_error_pages(void **state)
{
    struct confdir *d = confdir_new();
    struct mk_config *cfg;
    (void) state;

    write_file(d, "sites/default",
               "[HOST]\n    ServerName localhost\n    DocumentRoot htdocs\n"
               "[ERROR_PAGES]\n    404 404.html\n    500 /errors/500.html\n"
               "    503 errors/./../errors/500.html\n");
    cfg = load(d, NULL, 0);
    struct mk_site *vh = cfg->default_site;
    assert_int_equal(vh->n_error_pages, 3);
    assert_int_equal(vh->error_pages[0].status, 404);
    assert_string_equal(vh->error_pages[0].path, "/404.html");
    assert_int_equal(vh->error_pages[1].status, 500);
    assert_string_equal(vh->error_pages[1].path, "/errors/500.html");
    assert_int_equal(vh->error_pages[2].status, 503);
    assert_string_equal(vh->error_pages[2].path, "/errors/500.html");
    mk_config_unref(cfg);
    confdir_free(d);
}

/*
 * An error page must be what a request for it would open: with Symlinks Off
 * no symbolic link on the way, with Symlinks On none that leads out of the
 * document root. Each is refused at its line.
 */
static void test_error_page_symlinks(void **state)
{
    struct confdir *d = confdir_new();
    char path[PATH_MAX * 2];
    struct mk_config *cfg;
    bool ok = true;
    (void) state;

    snprintf(path, sizeof(path), "%s/htdocs/out.html", d->path);
    assert_int_equal(symlink("../outside.html", path), 0);
    snprintf(path, sizeof(path), "%s/htdocs/in.html", d->path);
    assert_int_equal(symlink("404.html", path), 0);
    snprintf(path, sizeof(path), "%s/htdocs/outdir", d->path);
    assert_int_equal(symlink("..", path), 0);

    write_file(d, "sites/default", BASE_SITE "[ERROR_PAGES]\n    404 404.html\n    500 out.html\n");
    ok &= expect_load_error(d, NULL, 0, "sites/default", 6, "'out.html' is or passes through");
    write_file(d, "sites/default", BASE_SITE "[ERROR_PAGES]\n    404 in.html\n");
    ok &= expect_load_error(d, NULL, 0, "sites/default", 5, "symbolic link (Symlinks Off)");
    write_file(d, "sites/default", BASE_SITE "[ERROR_PAGES]\n    404 outdir/outside.html\n");
    ok &= expect_load_error(d, NULL, 0, "sites/default", 5, "symbolic link");
    write_file(d, "sites/default",
               BASE_SITE "    Symlinks On\n[ERROR_PAGES]\n    404 in.html\n    500 out.html\n");
    ok &= expect_load_error(d, NULL, 0, "sites/default", 7, "leads out of the document root");
    write_file(d, "sites/default", BASE_SITE "    Symlinks On\n[ERROR_PAGES]\n    404 outdir/x\n");
    ok &= expect_load_error(d, NULL, 0, "sites/default", 6, "outdir/x");
    assert_true(ok);

    /* A link that stays inside is followed when the site follows links. */
    write_file(d, "sites/default", BASE_SITE "    Symlinks On\n[ERROR_PAGES]\n    404 in.html\n");
    cfg = load(d, NULL, 0);
    assert_string_equal(cfg->default_site->error_pages[0].path, "/in.html");
    mk_config_unref(cfg);
    confdir_free(d);
}

/* ---- the files a start writes (mk_config_check_files) ----------------------- */

/* Check the files of `d`'s configuration; the message, "" when they pass. */
static const char *check_files(const struct confdir *d, const char *conf, bool reload, char *err,
                               size_t errlen)
{
    struct mk_config *cfg, *running = NULL;

    write_file(d, "monkey.conf", conf);
    cfg = load(d, NULL, 0);
    if (reload) {
        running = load(d, NULL, 0);
    }
    err[0] = '\0';
    int rc = mk_config_check_files(cfg, running, err, errlen);
    assert_true(rc == MK_OK ? err[0] == '\0' : err[0] != '\0');
    mk_config_unref(running);
    mk_config_unref(cfg);
    return err;
}

/* The message is "<dir>/monkey.conf:LINE: " followed by something with `needle`. */
static void assert_files_error(const struct confdir *d, const char *err, int line,
                               const char *needle)
{
    char prefix[PATH_MAX * 2];

    snprintf(prefix, sizeof(prefix), "%s/monkey.conf:%d: ", d->real, line);
    if (strncmp(err, prefix, strlen(prefix)) != 0 || !strstr(err, needle)) {
        fail_msg("message '%s' lacks '%s' or '%s'", err, prefix, needle);
    }
}

static void test_check_files(void **state)
{
    struct confdir *d = confdir_new();
    char err[2048], text[PATH_MAX * 4];
    (void) state;

    make_dir(d, "logs");
    make_dir(d, "run");
    /* Writable places, and no files at all, pass. */
    assert_string_equal(check_files(d, BASE_CONF, false, err, sizeof(err)), "");
    assert_string_equal(check_files(d, BASE_CONF "    Log logs/error.log\n    PidFile run/m.pid\n",
                                    false, err, sizeof(err)),
                        "");
    /* A Log in a directory that does not exist, at its line. */
    check_files(d, BASE_CONF "    LogLevel info\n    Log missing/error.log\n", false, err,
                sizeof(err));
    assert_files_error(d, err, 4, "Log ");
    assert_non_null(strstr(err, "missing/error.log: directory "));
    assert_non_null(strstr(err, "No such file or directory"));
    /* A PidFile under something that is not a directory. */
    check_files(d, BASE_CONF "    PidFile sites/default/monkey.pid\n", false, err, sizeof(err));
    assert_files_error(d, err, 3, "PidFile ");
    assert_non_null(strstr(err, "is not a directory"));
    /* A Log or PidFile that names a directory. */
    check_files(d, BASE_CONF "    Log logs\n", false, err, sizeof(err));
    assert_files_error(d, err, 3, "Is a directory");
    /* On reload the Log in force is not checked again (the server may have
       given up the rights it opened it with), nor the PidFile (only a start
       writes it). */
    assert_string_equal(check_files(d, BASE_CONF "    Log missing/a.log\n    PidFile missing/p\n",
                                    true, err, sizeof(err)),
                        "");

    if (geteuid() != 0) {
        /* A directory this process may not write to. */
        assert_int_equal(chmod(d->path, 0555), 0);
        snprintf(text, sizeof(text), BASE_CONF "    PidFile %s/m.pid\n", d->path);
        check_files(d, text, false, err, sizeof(err));
        assert_int_equal(chmod(d->path, 0755), 0);
        assert_files_error(d, err, 3, "PidFile ");
        assert_non_null(strstr(err, "Permission denied"));
    }
    else if (getpwnam("nobody")) {
        /* Root with a User: the PidFile is written after switching to it. */
        assert_int_equal(chmod(d->path, 0755), 0);
        check_files(d, BASE_CONF "    User nobody\n    PidFile run/m.pid\n", false, err,
                    sizeof(err));
        /* run/ is root's, 0755: nobody may enter it but not create files. */
        assert_files_error(d, err, 4, "PidFile ");
        assert_non_null(strstr(err, "user nobody (User) cannot"));
        snprintf(text, sizeof(text), "%s/run", d->path);
        assert_int_equal(chmod(text, 0777), 0);
        /* Now only the directories above d may stand in the way. */
        bool reachable = true;
        for (char *p = d->real + 1; (p = strchr(p, '/')); p++) {
            struct stat st;
            *p = '\0';
            reachable &= stat(d->real, &st) == 0 && (st.st_mode & S_IXOTH);
            *p = '/';
        }
        check_files(d, BASE_CONF "    User nobody\n    PidFile run/m.pid\n", false, err,
                    sizeof(err));
        if (reachable) {
            assert_string_equal(err, "");
        }
        else {
            assert_files_error(d, err, 4, "cannot enter");
        }
        /* Written as root (no User, or a supervisor, which keeps root's
           identity), the PidFile's directory must be root's alone. */
        check_files(d, BASE_CONF "    PidFile run/m.pid\n", false, err, sizeof(err));
        assert_files_error(d, err, 3, "may be written by everyone, not only by root");
        assert_int_equal(chmod(text, 0775), 0);
        assert_int_equal(chown(text, 0, 65534), 0);
        check_files(d, BASE_CONF "    PidFile run/m.pid\n", false, err, sizeof(err));
        assert_files_error(d, err, 3, "may be written by its group, not only by root");
#ifdef MK_HAVE_SUPERVISOR
        check_files(d, BASE_CONF "    Supervisor On\n    User nobody\n    PidFile run/m.pid\n",
                    false, err, sizeof(err));
        assert_files_error(d, err, 5, "may be written by its group");
#endif
        assert_int_equal(chown(text, 65534, 0), 0);
        check_files(d, BASE_CONF "    PidFile run/m.pid\n", false, err, sizeof(err));
        assert_files_error(d, err, 3, "may be written by its owner, not only by root");
        /* The same file in a directory of root's is root's to write. */
        assert_int_equal(chown(text, 0, 0), 0);
        assert_int_equal(chmod(text, 0755), 0);
        assert_string_equal(
            check_files(d, BASE_CONF "    PidFile run/m.pid\n", false, err, sizeof(err)), "");
#ifdef MK_HAVE_SUPERVISOR
        assert_string_equal(check_files(d, BASE_CONF "    Supervisor On\n    PidFile run/m.pid\n",
                                        false, err, sizeof(err)),
                            "");
#endif
    }
    confdir_free(d);
}

/* An absolute DocumentRoot, and one relative to the configuration directory. */
static void test_document_roots(void **state)
{
    struct confdir *d = confdir_new();
    char text[PATH_MAX * 3], want[PATH_MAX * 2];
    struct mk_config *cfg;
    (void) state;

    make_dir(d, "www");
    snprintf(text, sizeof(text), "[HOST]\n    ServerName a.test\n    DocumentRoot %s/www\n",
             d->path);
    write_file(d, "sites/abs", text);
    write_file(d, "sites/rel", "[HOST]\n    ServerName b.test\n    DocumentRoot ./www/../www\n");
    cfg = load(d, NULL, 0);
    snprintf(want, sizeof(want), "%s/www", d->real);
    assert_string_equal(cfg->sites[0]->docroot, want);
    assert_string_equal(cfg->sites[2]->docroot, want);
    mk_config_unref(cfg);
    confdir_free(d);
}

/* ---- plugins.load and monkey.mime ------------------------------------------ */

static void test_plugins_load(void **state)
{
    struct confdir *d = confdir_new();
    struct mk_config *cfg;
    char want[PATH_MAX * 2];
    (void) state;

    write_file(d, "plugins.load",
               "# plugins\n[PLUGINS]\n"
               "    Load skeleton\n"
               "    Load lib/monkey-x.so\n"
               "    Load /opt/monkey/monkey-y.so\n"
               "    load other\n");
    cfg = load(d, NULL, 0);
    assert_int_equal(cfg->n_plugins, 4);
    assert_string_equal(cfg->plugins[0].spec, "skeleton");
    snprintf(want, sizeof(want), "%s/lib/monkey-x.so", d->real);
    assert_string_equal(cfg->plugins[1].spec, want);
    assert_string_equal(cfg->plugins[2].spec, "/opt/monkey/monkey-y.so");
    assert_string_equal(cfg->plugins[3].spec, "other");
    snprintf(want, sizeof(want), "%s/plugins.load:4", d->real);
    assert_string_equal(cfg->plugins[1].where, want);
    mk_config_unref(cfg);
    confdir_free(d);
}

static void test_mime_file(void **state)
{
    struct confdir *d = confdir_new();
    struct mk_config *cfg;
    struct mk_str t;
    (void) state;

    write_file(d, "monkey.mime", "[MIMETYPES]\n    html text/html\n    foo application/x-foo\n");
    write_file(d, "monkey.conf", "[SERVER]\n    DefaultMimeType text/plain\n");
    cfg = load(d, NULL, 0);
    t = mk_mime_lookup(cfg->mime, "/a.FOO", 6);
    assert_int_equal(t.len, strlen("application/x-foo"));
    assert_memory_equal(t.p, "application/x-foo", t.len);
    t = mk_mime_lookup(cfg->mime, "/a.css", 6); /* the file replaces the built-in table */
    assert_int_equal(t.len, strlen("text/plain"));
    assert_memory_equal(t.p, "text/plain", t.len);
    mk_config_unref(cfg);
    confdir_free(d);
}

/* The configuration shipped in conf/ is valid. */
static void test_shipped_configuration(void **state)
{
    char err[1024] = "";
    struct mk_config *cfg = mk_config_load(MK_SOURCE_DIR "/conf", NULL, 0, err, sizeof(err));
    (void) state;

    if (!cfg) {
        fail_msg("%s", err);
    }
    assert_true(cfg->n_sites >= 1);
    assert_non_null(cfg->default_site);
    mk_config_unref(cfg);
}

/* ---- -o and references --------------------------------------------------- */

static void test_config_for_dir(void **state)
{
    struct confdir *d = confdir_new();
    char dir[PATH_MAX * 2], err[1024] = "";
    struct mk_config *cfg;
    (void) state;

    snprintf(dir, sizeof(dir), "%s/htdocs", d->path);
    cfg = mk_config_for_dir(dir, NULL, 0, err, sizeof(err));
    if (!cfg) {
        fail_msg("%s", err);
    }
    assert_null(cfg->confdir);
    assert_int_equal(cfg->n_sites, 1);
    assert_ptr_equal(cfg->default_site, cfg->sites[0]);
    snprintf(dir, sizeof(dir), "%s/htdocs", d->real);
    assert_string_equal(cfg->default_site->docroot, dir);
    assert_string_equal(cfg->default_site->file, "built-in");
    assert_true(cfg->default_site->docroot_fd >= 0);
    assert_true(cfg->default_site->hide_dotfiles);
    assert_int_equal(cfg->n_listen, 1);
    assert_string_equal(cfg->listen[0].spec, "2001");
    assert_int_equal(cfg->timeout_ms, 15000);
    assert_int_equal(cfg->n_plugins, 0);
    assert_non_null(cfg->mime);
    assert_ptr_equal(mk_conf_site_lookup(cfg, "any.host", 8), cfg->default_site);
    mk_config_unref(cfg);

    const struct mk_config_override ov[] = {{"Listen", "127.0.0.1:8080"}, {"HideVersion", "On"}};
    snprintf(dir, sizeof(dir), "%s/htdocs", d->path);
    cfg = mk_config_for_dir(dir, ov, 2, err, sizeof(err));
    assert_non_null(cfg);
    assert_int_equal(cfg->n_listen, 1);
    assert_string_equal(cfg->listen[0].spec, "127.0.0.1:8080");
    assert_string_equal(cfg->server_header, "Server: Monkey\r\n");
    mk_config_unref(cfg);

    const struct mk_config_override bad[] = {{"Workers", "-1"}};
    err[0] = '\0';
    assert_null(mk_config_for_dir(dir, bad, 1, err, sizeof(err)));
    assert_non_null(strstr(err, "Workers"));

    err[0] = '\0';
    snprintf(dir, sizeof(dir), "%s/no-such-dir", d->path);
    assert_null(mk_config_for_dir(dir, NULL, 0, err, sizeof(err)));
    assert_non_null(strstr(err, "no-such-dir"));

    err[0] = '\0';
    snprintf(dir, sizeof(dir), "%s/outside.html", d->path);
    assert_null(mk_config_for_dir(dir, NULL, 0, err, sizeof(err)));
    assert_non_null(strstr(err, "outside.html"));
    confdir_free(d);
}

static void test_references(void **state)
{
    struct confdir *d = confdir_new();
    struct mk_config *cfg = load(d, NULL, 0);
    (void) state;

    assert_int_equal(atomic_load(&cfg->refs), 1);
    assert_ptr_equal(mk_config_ref(cfg), cfg);
    assert_int_equal(atomic_load(&cfg->refs), 2);
    mk_config_unref(cfg);
    assert_int_equal(atomic_load(&cfg->refs), 1);
    assert_int_equal(cfg->timeout_ms, 15000); /* still alive */
    mk_config_unref(cfg);
    mk_config_unref(NULL);
    confdir_free(d);
}

/* ---- the configuration reference documents every key --------------------- */

static char *read_all(const char *path)
{
    FILE *f = fopen(path, "r");
    char *buf;
    long n;

    if (!f) {
        fail_msg("%s: %s", path, strerror(errno));
    }
    assert_int_equal(fseek(f, 0, SEEK_END), 0);
    n = ftell(f);
    assert_true(n > 0);
    rewind(f);
    buf = malloc((size_t) n + 1);
    assert_non_null(buf);
    assert_int_equal(fread(buf, 1, (size_t) n, f), (size_t) n);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

#ifdef MK_HAVE_COMPRESS
/* Compress and its companions: defaults, values, and the codings this build has. */
static void test_compress_site_keys(void **state)
{
    (void) state;
    struct confdir *d = confdir_new();
    struct mk_config *cfg = load(d, NULL, 0);
    const struct mk_compress_site *zs = &cfg->default_site->compress;

    assert_int_equal(zs->codings, 0); /* off by default */
    assert_int_equal(zs->min_size, 256);
    assert_int_equal(zs->max_size, 4u << 20);
    assert_int_equal(zs->level[MK_CODING_BR], 5);
    assert_int_equal(zs->level[MK_CODING_GZIP], 6);
    assert_int_equal(cfg->compress_cache, 16u << 20);
    mk_config_unref(cfg);

    unsigned built = mk_compress_built();
    write_file(d, "sites/default",
               BASE_SITE "    Compress On\n    CompressTypes Text/CSS application/*\n"
                         "    CompressMinSize 1K\n    CompressMaxSize 2M\n"
                         "    CompressBrotliLevel 11\n    CompressGzipLevel 1\n");
    write_file(d, "monkey.conf", BASE_CONF "    CompressCache 1G\n");
    if (built) {
        cfg = load(d, NULL, 0);
        zs = &cfg->default_site->compress;
        assert_int_equal(zs->codings, built);
        assert_int_equal(zs->n_types, 2);
        assert_string_equal(zs->types[0], "text/css");
        assert_string_equal(zs->types[1], "application/");
        assert_true(mk_static_compress_type(zs, "text/css; charset=utf-8", 23));
        assert_true(mk_static_compress_type(zs, "application/json", 16));
        assert_false(mk_static_compress_type(zs, "application/", 12));
        assert_false(mk_static_compress_type(zs, "text/html", 9));
        assert_false(mk_static_compress_type(zs, "text/cssx", 9));
        assert_int_equal(zs->min_size, 1024);
        assert_int_equal(zs->max_size, 2u << 20);
        assert_int_equal(zs->level[MK_CODING_BR], 11);
        assert_int_equal(zs->level[MK_CODING_GZIP], 1);
        assert_int_equal(cfg->compress_cache, 1u << 30);
        mk_config_unref(cfg);
    }
    else {
        assert_true(expect_load_error(d, NULL, 0, "sites/default", 4, "built without"));
    }
    /* each coding named: accepted when built, refused with the package to install when not */
    static const char *const codings[] = {"br", "gzip"};
    static const char *const packages[] = {"libbrotli-dev", "zlib1g-dev"};
    static const enum mk_coding bits[] = {MK_CODING_BR, MK_CODING_GZIP};
    for (int i = 0; i < 2; i++) {
        char site[256];
        snprintf(site, sizeof(site), BASE_SITE "    Compress %s\n", codings[i]);
        write_file(d, "sites/default", site);
        if (built & MK_CODING_BIT(bits[i])) {
            cfg = load(d, NULL, 0);
            assert_int_equal(cfg->default_site->compress.codings, MK_CODING_BIT(bits[i]));
            /* the default types */
            zs = &cfg->default_site->compress;
            assert_true(mk_static_compress_type(zs, "text/html; charset=utf-8", 24));
            assert_true(mk_static_compress_type(zs, "image/svg+xml", 13));
            assert_false(mk_static_compress_type(zs, "image/png", 9));
            mk_config_unref(cfg);
        }
        else {
            assert_true(expect_load_error(d, NULL, 0, "sites/default", 4, packages[i]));
        }
    }
    confdir_free(d);
}
#endif

/*
 * The keys of the parts this build compiled out (cmake/profile.cmake) are
 * refused with their file and line and the part's name, not as unknown
 * keys; a value that asks for nothing missing (Supervisor Off, Compress
 * Off, Balancing reuseport) is taken. Nothing to check in a build that has
 * every part.
 */
static void test_compiled_out_keys_are_refused(void **state)
{
    static const struct {
        const char *line, *needle;
    } refused[] = {
#ifndef MK_HAVE_SUPERVISOR
        {"Supervisor On", "Supervisor On: this server was built without the supervisor"},
        {"SupervisorCrashLimit 5", "SupervisorCrashLimit 5: this server was built without the "
                                   "supervisor"},
        {"SupervisorCrashWindow 60", "this server was built without the supervisor"},
#endif
#ifndef MK_HAVE_FAIR
        {"Balancing fair", "Balancing fair: this server was built without the fair balancing "
                           "mode"},
#endif
#ifndef MK_HAVE_H2
        {"Http2IdleTimeout 60", "Http2IdleTimeout 60: this server was built without HTTP/2"},
        {"MaxConcurrentStreams 100", "this server was built without HTTP/2"},
        {"Listen 2002 h2c", "h2c: this server was built without HTTP/2"},
#endif
#ifndef MK_HAVE_COMPRESS
        {"CompressCache 16M", "CompressCache 16M: this server was built without compression on "
                              "the fly"},
#endif
#ifndef MK_HAVE_REALIP
        {"RealIPFrom 10.0.0.0/8", "RealIPFrom 10.0.0.0/8: this server was built without the "
                                  "client's address behind a balancer"},
        {"RealIPHeader Forwarded", "RealIPHeader Forwarded: this server was built without the "
                                   "client's address behind a balancer"},
        {"Listen 2001 proxy_protocol", "proxy_protocol: this server was built without the "
                                       "client's address behind a balancer"},
#endif
#ifndef MK_HAVE_REQID
        {"RequestId On", "RequestId On: this server was built without request IDs and trace "
                         "context"},
        {"TraceContext Start", "TraceContext Start: this server was built without request IDs "
                               "and trace context"},
#endif
#ifndef MK_HAVE_METRICS
        {"MetricsBuckets 0.1 1", "MetricsBuckets 0.1 1: this server was built without the "
                                 "metrics"},
#endif
        {NULL, NULL},
    };
    static const char *const site_refused[] = {
#ifndef MK_HAVE_COMPRESS
        "Compress gzip",
        "CompressTypes text/html",
        "CompressGzipLevel 6",
#endif
        NULL,
    };
    static const char *const taken[] = {
#ifndef MK_HAVE_SUPERVISOR
        "Supervisor Off",      "Supervisor no",
#endif
#ifndef MK_HAVE_REQID
        "RequestId Off",       "RequestIdEcho Off",
#endif
        "Balancing reuseport", NULL,
    };
    char text[512];
    (void) state;

    for (size_t i = 0; refused[i].line; i++) {
        struct confdir *d = confdir_new();
        snprintf(text, sizeof(text), "[SERVER]\n    Listen 2001\n    %s\n", refused[i].line);
        write_file(d, "monkey.conf", text);
        assert_true(expect_load_error(d, NULL, 0, "monkey.conf", 3, refused[i].needle));
        confdir_free(d);
    }
    for (size_t i = 0; site_refused[i]; i++) {
        struct confdir *d = confdir_new();
        snprintf(text, sizeof(text), BASE_SITE "    %s\n", site_refused[i]);
        write_file(d, "sites/default", text);
        assert_true(expect_load_error(d, NULL, 0, "sites/default", 4,
                                      "this server was built without compression on the fly"));
        confdir_free(d);
    }
    for (size_t i = 0; taken[i]; i++) {
        struct confdir *d = confdir_new();
        snprintf(text, sizeof(text), "[SERVER]\n    %s\n", taken[i]);
        write_file(d, "monkey.conf", text);
        mk_config_unref(load(d, NULL, 0));
        confdir_free(d);
    }
    struct confdir *d = confdir_new();
    snprintf(text, sizeof(text), BASE_SITE "    Compress Off\n");
    write_file(d, "sites/default", text);
    mk_config_unref(load(d, NULL, 0));
    confdir_free(d);
#ifndef MK_HAVE_SUPERVISOR
    /* the same for a key given outside the files (mk_server_set, the command line) */
    d = confdir_new();
    struct mk_config_override ov = {"Supervisor", "On"};
    char err[1024] = "";
    assert_null(mk_config_load(d->path, &ov, 1, err, sizeof(err)));
    assert_string_equal(err, "command line:0: Supervisor On: this server was built without the "
                             "supervisor");
    confdir_free(d);
#endif
}

static void test_keys_are_documented(void **state)
{
    static const char *const sections[] = {
        "SERVER",
        "HOST",
        "PLUGINS",
#ifdef MK_HAVE_RULES
        "RULE",
#endif
    };
    char *doc = read_all(MK_SOURCE_DIR "/docs/configuration.md");
    char quoted[128];
    unsigned missing = 0;
    (void) state;

    for (size_t s = 0; s < sizeof(sections) / sizeof(sections[0]); s++) {
        size_t i = 0;
        const char *key;
        /* [SERVER]: the schema the parser fills the configuration with */
        const struct mk_conf_key *schema_keys =
            strcmp(sections[s], "SERVER") == 0 ? mk_config_schema()->keys : NULL;
        while ((key = schema_keys ? schema_keys[i].name : mk_config_key(sections[s], i))) {
            snprintf(quoted, sizeof(quoted), "`%s`", key);
            if (!strstr(doc, quoted)) {
                print_error("[%s] %s is not documented in docs/configuration.md\n", sections[s],
                            key);
                missing++;
            }
            i++;
        }
        assert_true(i > 0);
        /* and the section itself */
        snprintf(quoted, sizeof(quoted), "[%s]", sections[s]);
        assert_non_null(strstr(doc, quoted));
    }
    assert_int_equal(missing, 0);
    assert_null(mk_config_key("NOSUCH", 0));
    free(doc);
}

extern const struct mk_plugin *const mk_builtin_plugins[];

/* Every key a built-in plugin declares is documented in its README. */
static void test_plugin_keys_are_documented(void **state)
{
    char path[PATH_MAX], quoted[128];
    unsigned missing = 0, schemas = 0;
    (void) state;

    for (size_t i = 0; mk_builtin_plugins[i]; i++) {
        const struct mk_plugin *p = mk_builtin_plugins[i];
        if (!p->conf_schema) {
            continue;
        }
        schemas++;
        snprintf(path, sizeof(path), "%s/plugins/%s/README.md", MK_SOURCE_DIR, p->name);
        char *doc = read_all(path);
        for (const struct mk_conf_key *k = p->conf_schema->keys; k->name; k++) {
            snprintf(quoted, sizeof(quoted), "`%s`", k->name);
            if (!strstr(doc, quoted)) {
                print_error("%s: key %s is not documented\n", path, k->name);
                missing++;
            }
        }
        free(doc);
    }
    assert_true(schemas > 0); /* the skeleton declares its keys */
    assert_int_equal(missing, 0);
}

/* The key list is the one the parser accepts: each listed key is known. */
static void test_key_list_matches_parser(void **state)
{
    const char *key;
    size_t n = 0;
    (void) state;

    assert_string_equal(mk_config_key("server", 0), "Listen"); /* case-insensitive */
    assert_string_equal(mk_config_key("PLUGINS", 0), "Load");
    assert_null(mk_config_key("PLUGINS", 1));
    assert_string_equal(mk_config_key("HOST", 0), "ServerName");
    assert_string_equal(mk_config_key("HOST", 1), "DocumentRoot");
    assert_string_equal(mk_config_key("HOST", 2), "Symlinks");
    assert_string_equal(mk_config_key("HOST", 3), "HideDotFiles");
    assert_string_equal(mk_config_key("HOST", 4), "Fallback");
    assert_string_equal(mk_config_key("HOST", 5), "Precompressed");
    assert_string_equal(mk_config_key("HOST", 6), "CacheControl");
    assert_string_equal(mk_config_key("HOST", 7), "IndexFiles");
#ifdef MK_HAVE_COMPRESS
    assert_string_equal(mk_config_key("HOST", 8), "Compress");
    assert_string_equal(mk_config_key("HOST", 13), "CompressGzipLevel");
    assert_null(mk_config_key("HOST", 14));
#else
    assert_null(mk_config_key("HOST", 8));
#endif
    while ((key = mk_config_key("SERVER", n))) {
        /* an unknown key fails with "unknown key"; a known one fails otherwise or not at all */
        struct confdir *d = confdir_new();
        char text[256], err[1024] = "";
        snprintf(text, sizeof(text), "[SERVER]\n    %s 1\n", key);
        write_file(d, "monkey.conf", text);
        struct mk_config *cfg = mk_config_load(d->path, NULL, 0, err, sizeof(err));
        if (cfg) {
            mk_config_unref(cfg);
        }
        else if (strstr(err, "unknown key")) {
            fail_msg("%s is listed but not accepted: %s", key, err);
        }
        confdir_free(d);
        n++;
    }
    assert_true(n >= 20);
}

int main(void)
{
    /* The [HOST] keys of the static handler, as the server gives them at start. */
    mk_conf_site_keys(&mk_static_site_keys);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_plugin_keys_are_documented),
        cmocka_unit_test(test_empty_file),
        cmocka_unit_test(test_every_key),
        cmocka_unit_test(test_key_case_and_variants),
        cmocka_unit_test(test_sub_second_timeouts),
#ifdef MK_HAVE_METRICS
        cmocka_unit_test(test_metrics_buckets),
#endif
        cmocka_unit_test(test_line_limit_clamped),
#ifdef MK_HAVE_REALIP
        cmocka_unit_test(test_proxy_and_real_ip),
#endif
        cmocka_unit_test(test_bad_server_lines),
        cmocka_unit_test(test_bad_site_lines),
        cmocka_unit_test(test_unclaimed_site_section),
        cmocka_unit_test(test_bad_plugin_lines),
        cmocka_unit_test(test_bad_mime_lines),
        cmocka_unit_test(test_duplicate_name_across_sites),
        cmocka_unit_test(test_duplicate_name_in_one_site),
        cmocka_unit_test(test_missing_pieces),
        cmocka_unit_test(test_overrides),
        cmocka_unit_test(test_override_errors),
        cmocka_unit_test(test_site_lookup),
        cmocka_unit_test(test_default_site_is_first_without_default_file),
        cmocka_unit_test(test_single_site),
        cmocka_unit_test(test_error_pages),
#ifdef MK_HAVE_COMPRESS
        cmocka_unit_test(test_compress_site_keys),
#endif
        cmocka_unit_test(test_compiled_out_keys_are_refused),
        cmocka_unit_test(test_error_page_symlinks),
        cmocka_unit_test(test_check_files),
        cmocka_unit_test(test_document_roots),
        cmocka_unit_test(test_plugins_load),
        cmocka_unit_test(test_mime_file),
        cmocka_unit_test(test_shipped_configuration),
        cmocka_unit_test(test_config_for_dir),
        cmocka_unit_test(test_references),
        cmocka_unit_test(test_keys_are_documented),
        cmocka_unit_test(test_key_list_matches_parser),
        cmocka_unit_test(test_bad_index_files),
        cmocka_unit_test(test_empty_sites_dir),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
