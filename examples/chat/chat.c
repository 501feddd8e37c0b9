/*
 * chat: the WebSocket chat of the original Duda, on the websocket and
 * broadcaster packages. html/index.html is the page; /chat/ws?nick=NAME
 * is its WebSocket. Every browser joins the channel "chat"; what one sends
 * goes to all of them through the broadcaster, whichever worker serves
 * them, and everyone sees who joined and who left.
 *
 * The server sends JSON text messages:
 *   {"type":"join","nick":"alice"}
 *   {"type":"message","nick":"alice","text":"hello"}
 *   {"type":"leave","nick":"alice"}
 * and takes plain text lines (up to 1,000 bytes) from the page.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <duda/duda.h>
#include <duda/packages/broadcaster.h>
#include <duda/packages/websocket.h>

DUDA_REGISTER("WebSocket chat", "chat");

#define CHAT_CHANNEL "chat"
#define CHAT_NICK_MAX 24
#define CHAT_TEXT_MAX 1000

static const struct duda_websocket_api *websocket;
static const struct duda_broadcaster_api *broadcaster;

/* Letters, digits, space, '-', '_' and '.', 1 to 24 of them. */
static int chat_nick_ok(const char *nick)
{
    size_t n = nick ? strlen(nick) : 0;

    if (n == 0 || n > CHAT_NICK_MAX || nick[0] == ' ') {
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        char c = nick[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == ' ' || c == '-' || c == '_' || c == '.')) {
            return 0;
        }
    }
    return 1;
}

/* Append s (valid UTF-8) as a JSON string's content to out (bounded): the new length. */
static size_t chat_json_escape(char *out, size_t len, size_t cap, const char *s, size_t n)
{
    for (size_t i = 0; i < n && len + 7 < cap; i++) {
        unsigned char c = (unsigned char) s[i];
        if (c == '"' || c == '\\') {
            out[len++] = '\\';
            out[len++] = (char) c;
        }
        else if (c < 0x20) {
            len += (size_t) snprintf(out + len, cap - len, "\\u%04x", c);
        }
        else {
            out[len++] = (char) c;
        }
    }
    return len;
}

/* Send {"type":TYPE,"nick":NICK[,"text":TEXT]} to the channel. */
static void chat_announce(const char *type, const char *nick, const char *text, size_t text_len)
{
    char msg[CHAT_TEXT_MAX * 6 + 128];
    size_t n = (size_t) snprintf(msg, sizeof(msg), "{\"type\":\"%s\",\"nick\":\"%s\"", type, nick);

    if (text) {
        n += (size_t) snprintf(msg + n, sizeof(msg) - n, ",\"text\":\"");
        n = chat_json_escape(msg, n, sizeof(msg) - 3, text, text_len);
        msg[n++] = '"';
    }
    msg[n++] = '}';
    broadcaster->send(CHAT_CHANNEL, WEBSOCKET_TEXT, msg, n);
}

static void chat_open(websocket_t *ws)
{
    broadcaster->join(ws, CHAT_CHANNEL);
    chat_announce("join", websocket->user(ws), NULL, 0);
}

static void chat_message(websocket_t *ws, int type, const void *text, size_t len)
{
    if (type != WEBSOCKET_TEXT || len == 0) {
        return;
    }
    if (len > CHAT_TEXT_MAX) {
        websocket->close(ws, 1009, "a line is 1000 bytes at most");
        return;
    }
    chat_announce("message", websocket->user(ws), text, len);
}

static void chat_close(websocket_t *ws, int code)
{
    (void) code;
    if (websocket->worker(ws) >= 0) { /* it was open: it had joined */
        chat_announce("leave", websocket->user(ws), NULL, 0);
    }
    free(websocket->user(ws));
}

static const struct websocket_callbacks chat_cb = {
    .on_open = chat_open,
    .on_message = chat_message,
    .on_close = chat_close,
};

static const struct websocket_settings chat_settings = {
    .max_message = 4096,
    .max_frame = 4096,
    .idle_timeout_ms = 3600 * 1000,
};

static void cb_ws(duda_request_t *dr)
{
    const char *nick = qs->get(dr, "nick");

    if (!chat_nick_ok(nick)) {
        response->http_status(dr, 400);
        response->http_content_type(dr, "text/plain");
        response->printf(dr, "a nick is 1 to %d letters, digits, spaces, '-', '_' or '.'\n",
                         CHAT_NICK_MAX);
        response->end(dr, NULL);
        return;
    }
    char *mine = strdup(nick);
    if (!mine) {
        response->http_status(dr, 503);
        response->end(dr, NULL);
        return;
    }
    /* on_close always follows a handshake that succeeded, and frees `mine`. */
    if (!websocket->handshake(dr, &chat_cb, &chat_settings, mine)) {
        free(mine);
    }
}

int duda_main(void)
{
    duda_load_package(websocket, "websocket");
    duda_load_package(broadcaster, "broadcaster");
    if (!websocket || !broadcaster) {
        return -1;
    }
    router->map("/ws", DUDA_GET, cb_ws);
    return 0;
}
