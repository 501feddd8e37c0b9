/*
 * data_files: the service's folders.
 *
 *   GET /data_files/file/:name        a file of DataDir (sendfile)
 *   GET /data_files/range/:name       bytes 2 to 5 of it (sendfile_range)
 *   GET /data_files/greeting          [GREETING] Text of ConfDir/data_files.conf (fconf)
 *   GET /data_files/paths             DataDir and ConfDir
 * Every request is logged to LogDir/access.log by the logger thread.
 */
#include <string.h>

#include <duda/duda.h>

DUDA_REGISTER("Data, configuration and logs", "data_files");

static duda_logger_t *access_log;
static char greeting[128];

static int valid_name(const char *name)
{
    return name && *name && name[0] != '.' && !strchr(name, '/');
}

static void cb_file(duda_request_t *dr)
{
    const char *name = param->get(dr, "name");

    logger->print(access_log, "file %s", name);
    if (!valid_name(name) || response->sendfile(dr, name) != 0) {
        response->http_status(dr, 404);
    }
    response->end(dr, NULL);
}

static void cb_range(duda_request_t *dr)
{
    const char *name = param->get(dr, "name");

    logger->print(access_log, "range %s", name);
    if (!valid_name(name) || response->sendfile_range(dr, data->locate(dr, name), 2, 4) != 0) {
        response->http_status(dr, 404);
    }
    response->end(dr, NULL);
}

static void cb_greeting(duda_request_t *dr)
{
    logger->print(access_log, "greeting");
    response->http_content_type(dr, "text/plain");
    response->printf(dr, "%s\n", greeting);
    response->end(dr, NULL);
}

static void cb_paths(duda_request_t *dr)
{
    response->http_content_type(dr, "text/plain");
    response->printf(dr, "data %s\nconf %s\n", data->get_path(), conf->get_path());
    response->end(dr, NULL);
}

int duda_main(void)
{
    duda_fconf_t *f = fconf->read("data_files.conf");
    const char *text = f ? fconf->get(f, "GREETING", "Text") : NULL;

    if (!text) {
        return -1; /* the load fails: the server logs why */
    }
    strncpy(greeting, text, sizeof(greeting) - 1);
    fconf->free(f);
    access_log = logger->create("access.log");
    if (!access_log) {
        return -1;
    }
    router->map("/file/:name", DUDA_GET, cb_file);
    router->map("/range/:name", DUDA_GET, cb_range);
    router->map("/greeting", DUDA_GET, cb_greeting);
    router->map("/paths", DUDA_GET, cb_paths);
    return 0;
}
