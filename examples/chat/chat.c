/*
 * chat: the WebSocket chat of the original Duda, on the websocket and
 * broadcaster packages. html/index.html is the page; /chat/ws?nick=NAME
 * is its WebSocket. Every browser joins the channel "chat"; what one sends
 * goes to all of them through the broadcaster, whichever worker serves
 * them, and everyone sees who is in the room, who joined and who left.
 *
 * The server sends JSON text messages:
 *   {"type":"here","seq":7,"members":[{"id":3,"nick":"alice"}]}
 *   {"type":"join","seq":8,"id":4,"nick":"bob"}
 *   {"type":"message","nick":"alice","text":"hello"}
 *   {"type":"leave","seq":9,"id":4,"nick":"bob"}
 * and takes plain text lines (up to 1,000 bytes) from the page.
 *
 * "here" is the first message of a connection: who was in the room just
 * before it joined, in the order they joined. Every join and leave has a sequence number, taken
 * with the roster's change under one lock; "here" carries the number of the last change it
 * includes, so the page skips a join or leave it already counted (one broadcast before the snapshot
 * may still reach it after). Members are told apart by the connection's id: two people may share a
 * nickname.
 */
#include <pthread.h>
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

/* A connection's user pointer: its nickname, and its place in the roster once open. */
struct chat_member {
    char nick[CHAT_NICK_MAX + 1];
    unsigned long id;
    int joined;
    struct chat_member *next;
};

/* Who is in the room, on every worker: changed under chat_lock, with chat_seq. */
static pthread_mutex_t chat_lock = PTHREAD_MUTEX_INITIALIZER;
static struct chat_member *chat_roster;
static unsigned long chat_seq;

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

/* Send {"type":"message","nick":NICK,"text":TEXT} to the channel. */
static void chat_say(const char *nick, const char *text, size_t text_len)
{
    char msg[CHAT_TEXT_MAX * 6 + 128];
    size_t n = (size_t) snprintf(msg, sizeof(msg),
                                 "{\"type\":\"message\",\"nick\":\"%s\",\"text\":\"", nick);

    n = chat_json_escape(msg, n, sizeof(msg) - 3, text, text_len);
    msg[n++] = '"';
    msg[n++] = '}';
    broadcaster->send(CHAT_CHANNEL, WEBSOCKET_TEXT, msg, n);
}

/* Send {"type":TYPE,"seq":SEQ,"id":ID,"nick":NICK} (a join or a leave) to the channel. */
static void chat_announce(const char *type, unsigned long seq, const struct chat_member *m)
{
    char msg[128 + CHAT_NICK_MAX];
    int n = snprintf(msg, sizeof(msg), "{\"type\":\"%s\",\"seq\":%lu,\"id\":%lu,\"nick\":\"%s\"}",
                     type, seq, m->id, m->nick);

    broadcaster->send(CHAT_CHANNEL, WEBSOCKET_TEXT, msg, (size_t) n);
}

/*
 * Under chat_lock: {"type":"here","seq":SEQ,"members":[...]}, the roster as
 * it is now (malloc'ed, its length in *len), or NULL when memory is short.
 */
static char *chat_here(size_t *len)
{
    size_t count = 0;

    for (struct chat_member *m = chat_roster; m; m = m->next) {
        count++;
    }
    size_t cap = 64 + count * (48 + CHAT_NICK_MAX);
    char *msg = malloc(cap);
    if (!msg) {
        return NULL;
    }
    size_t n =
        (size_t) snprintf(msg, cap, "{\"type\":\"here\",\"seq\":%lu,\"members\":[", chat_seq);
    for (struct chat_member *m = chat_roster; m; m = m->next) {
        n += (size_t) snprintf(msg + n, cap - n, "%s{\"id\":%lu,\"nick\":\"%s\"}",
                               m == chat_roster ? "" : ",", m->id, m->nick);
    }
    n += (size_t) snprintf(msg + n, cap - n, "]}");
    *len = n;
    return msg;
}

/*
 * Join the channel first, so that every change after the snapshot reaches
 * this connection; then, under the lock, take the snapshot and add it.
 * "here" is written before on_open returns, so it comes before any
 * broadcast (those run later on this worker).
 */
static void chat_open(websocket_t *ws)
{
    struct chat_member *me = websocket->user(ws);
    size_t len = 0;

    if (broadcaster->join(ws, CHAT_CHANNEL) != 0) {
        websocket->close(ws, 1011, "cannot join the room");
        return;
    }
    me->id = websocket->id(ws);
    pthread_mutex_lock(&chat_lock);
    char *here = chat_here(&len);
    if (!here) {
        pthread_mutex_unlock(&chat_lock);
        websocket->close(ws, 1011, "out of memory");
        return;
    }
    struct chat_member **tail = &chat_roster; /* in the order they joined */
    while (*tail) {
        tail = &(*tail)->next;
    }
    me->joined = 1;
    *tail = me;
    unsigned long seq = ++chat_seq;
    pthread_mutex_unlock(&chat_lock);
    websocket->send(ws, WEBSOCKET_TEXT, here, len);
    free(here);
    chat_announce("join", seq, me);
}

static void chat_message(websocket_t *ws, int type, const void *text, size_t len)
{
    struct chat_member *me = websocket->user(ws);

    if (type != WEBSOCKET_TEXT || len == 0) {
        return;
    }
    if (len > CHAT_TEXT_MAX) {
        websocket->close(ws, 1009, "a line is 1000 bytes at most");
        return;
    }
    chat_say(me->nick, text, len);
}

static void chat_close(websocket_t *ws, int code)
{
    struct chat_member *me = websocket->user(ws);

    (void) code;
    if (me->joined) {
        pthread_mutex_lock(&chat_lock);
        for (struct chat_member **p = &chat_roster; *p; p = &(*p)->next) {
            if (*p == me) {
                *p = me->next;
                break;
            }
        }
        unsigned long seq = ++chat_seq;
        pthread_mutex_unlock(&chat_lock);
        chat_announce("leave", seq, me);
    }
    free(me);
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
    struct chat_member *me = calloc(1, sizeof(*me));
    if (!me) {
        response->http_status(dr, 503);
        response->end(dr, NULL);
        return;
    }
    strcpy(me->nick, nick); /* checked: at most CHAT_NICK_MAX bytes */
    /* on_close always follows a handshake that succeeded, and frees `me`. */
    if (!websocket->handshake(dr, &chat_cb, &chat_settings, me)) {
        free(me);
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
