/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * protocol.c: one request line of a control client, "COMMAND [text|json]",
 * and its reply: "OK" and a document or what an action did, or "ERR
 * reason" on one line (README.md describes the protocol). The socket
 * thread.
 */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include "control.h"

struct control_command {
    const char *name;
    int (*doc)(struct mk_json *b, bool json, char *err, size_t errlen);
    int cmd;          /* MK_CMD_* for actions, 0 for documents */
    const char *done; /* what an action did, for the reply */
};

static const struct control_command control_commands[] = {
    {"status", control_doc_status, 0, NULL},
    {"workers", control_doc_workers, 0, NULL},
    {"sites", control_doc_sites, 0, NULL},
    {"plugins", control_doc_plugins, 0, NULL},
    {"config", control_doc_config, 0, NULL},
    {"reload", NULL, MK_CMD_RELOAD, "configuration reloaded"},
    {"reopen", NULL, MK_CMD_REOPEN_LOGS, "log files reopened"},
    {"stop", NULL, MK_CMD_STOP, "server stopped"},
};

/* Replace control characters of an error line so the reply stays one line. */
static void control_one_line(char *s)
{
    for (; *s; s++) {
        if ((unsigned char) *s < 0x20 || *s == 0x7f) {
            *s = ' ';
        }
    }
}

/* The reply "ERR reason" (with a JSON body when asked for JSON). */
void control_reply_error(struct mk_json *b, const char *command, bool json, const char *reason)
{
    char line[1024];

    snprintf(line, sizeof(line), "%s", reason);
    control_one_line(line);
    control_buf_free(b);
    control_buf_printf(b, "ERR %s\n", line);
    if (json) {
        control_buf_str(b, "{\"ok\":false,\"command\":");
        control_buf_json(b, command);
        control_buf_str(b, ",\"error\":");
        control_buf_json(b, line);
        control_buf_str(b, "}\n");
    }
}

/* Who is at the other end of fd, for the log. */
static void control_peer(int fd, char *out, size_t len)
{
    struct ucred cred;
    socklen_t clen = sizeof(cred);

    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &clen) == 0) {
        snprintf(out, len, "uid %u, pid %ld", (unsigned) cred.uid, (long) cred.pid);
    }
    else {
        snprintf(out, len, "an unknown peer");
    }
}

/* Run an action through control_api->command(); it waits for the controlling thread. */
static void control_run_action(struct control_client *cl, const struct control_command *c,
                               bool json)
{
    char err[512] = "", peer[64], reason[640];

    control_peer(cl->fd, peer, sizeof(peer));
    control_api->log(MK_PLUGIN_LOG_INFO, "control: %s requested by %s", c->name, peer);
    if (control_api->command(c->cmd, err, sizeof(err)) != MK_OK) {
        snprintf(reason, sizeof(reason), "%s refused: %s", c->name,
                 err[0] ? err : "no reason given");
        control_reply_error(&cl->reply, c->name, json, reason);
        return;
    }
    control_buf_str(&cl->reply, "OK\n");
    if (json) {
        control_buf_str(&cl->reply, "{\"ok\":true,\"command\":");
        control_buf_json(&cl->reply, c->name);
        control_buf_str(&cl->reply, ",\"message\":");
        control_buf_json(&cl->reply, c->done);
        control_buf_str(&cl->reply, "}\n");
    }
    else {
        control_buf_printf(&cl->reply, "%s\n", c->done);
    }
    cl->hold = c->cmd == MK_CMD_STOP;
}

/*
 * A plugin's command (its control_name is the line's first word, ABI
 * 3.20): the words after it, less the format word at the end, go to its
 * control hook, whose text is the reply. False when no plugin has the name.
 */
static bool control_plugin_command(struct control_client *cl, const char *word, bool json)
{
    unsigned n = control_api->plugin_count();
    char args[CONTROL_LINE_MAX], out[8192];

    for (unsigned i = 0; i < n; i++) {
        const struct mk_plugin *p = control_api->plugin_at(i);
        if (!p || p->abi_minor < 20 || !p->control_name || !p->control ||
            strcasecmp(p->control_name, word) != 0) {
            continue;
        }
        const char *rest = cl->line + strspn(cl->line, " \t");
        rest += strcspn(rest, " \t");
        rest += strspn(rest, " \t");
        snprintf(args, sizeof(args), "%s", rest);
        size_t len = strlen(args);
        for (size_t k = 0; k < len; k++) {
            args[k] = args[k] == '\t' ? ' ' : args[k];
        }
        while (len > 0 && args[len - 1] == ' ') {
            args[--len] = '\0';
        }
        char *last = strrchr(args, ' ');
        const char *fmt = last ? last + 1 : args;
        if (strcasecmp(fmt, "json") == 0 || strcasecmp(fmt, "text") == 0) {
            *(last ? last : args) = '\0';
        }
        out[0] = '\0';
        if (p->control(args, out, sizeof(out)) != MK_OK) {
            control_reply_error(&cl->reply, word, json, out[0] ? out : "refused");
            return true;
        }
        control_buf_str(&cl->reply, "OK\n");
        if (json) {
            control_buf_str(&cl->reply, "{\"ok\":true,\"command\":");
            control_buf_json(&cl->reply, word);
            control_buf_str(&cl->reply, ",\"message\":");
            control_buf_json(&cl->reply, out);
            control_buf_str(&cl->reply, "}\n");
        }
        else {
            control_buf_str(&cl->reply, out);
        }
        return true;
    }
    return false;
}

/* Build the reply to the request line held by cl (NUL-terminated, no LF). */
void control_answer(struct control_client *cl)
{
    char word[CONTROL_LINE_MAX], format[CONTROL_LINE_MAX], extra[CONTROL_LINE_MAX];
    char err[512] = "";
    int n = sscanf(cl->line, "%255s %255s %255s", word, format, extra);
    bool json = false;

    if (n < 1) {
        control_reply_error(&cl->reply, "", false, "empty request");
        return;
    }
    bool builtin = false;
    for (size_t i = 0; i < sizeof(control_commands) / sizeof(control_commands[0]); i++) {
        builtin = builtin || strcasecmp(word, control_commands[i].name) == 0;
    }
    size_t line_len = strlen(cl->line);
    if (!builtin &&
        control_plugin_command(cl, word,
                               line_len > 5 && strcasecmp(cl->line + line_len - 5, " json") == 0)) {
        return;
    }
    if (n == 3) {
        control_reply_error(&cl->reply, word, false, "too many words (COMMAND [text|json])");
        return;
    }
    if (n == 2) {
        if (strcasecmp(format, "json") == 0) {
            json = true;
        }
        else if (strcasecmp(format, "text") != 0) {
            control_reply_error(&cl->reply, word, false, "unknown format (text or json)");
            return;
        }
    }
    for (size_t i = 0; i < sizeof(control_commands) / sizeof(control_commands[0]); i++) {
        const struct control_command *c = &control_commands[i];
        if (strcasecmp(word, c->name) != 0) {
            continue;
        }
        if (c->cmd) {
            control_run_action(cl, c, json);
            return;
        }
        struct mk_json body = {0};
        if (c->doc(&body, json, err, sizeof(err)) != MK_OK) {
            control_buf_free(&body);
            control_reply_error(&cl->reply, c->name, json, err);
            return;
        }
        if (body.failed) {
            control_buf_free(&body);
            control_reply_error(&cl->reply, c->name, json, "reply too large or out of memory");
            return;
        }
        control_buf_str(&cl->reply, "OK\n");
        control_buf_add(&cl->reply, body.data ? body.data : "", body.len);
        control_buf_free(&body);
        return;
    }
    control_reply_error(&cl->reply, "", json,
                        "unknown command (status, workers, sites, plugins, config, reload, "
                        "reopen, stop, or a plugin's: acme)");
}
