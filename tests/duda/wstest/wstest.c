/*
 * The websocket and broadcaster packages' test service
 * (tests/integration/duda/test_duda_websocket.py):
 *
 *   /wstest/echo    echoes every message (default limits: 1 MiB)
 *   /wstest/echoz   the same with permessage-deflate accepted
 *   /wstest/big     echo with deflate and 64 MiB limits (the Autobahn TestSuite's target)
 *   /wstest/cmd     text "close CODE" closes with CODE; "ping" pings the client
 *                   (close timeout 300 ms, idle timeout 10 s)
 *   /wstest/idle    the same with an idle timeout of 600 ms
 *   /wstest/room    members of channel "room": every message goes to all of them
 *   /wstest/flood   members of channel "flood" (every message to all)
 *   /wstest/slow    a member of "flood" with a 128 KiB send queue
 *   /wstest/shout   not a member: its messages go to "flood"
 *   /wstest/leaver  the same as slow, and its on_error leaves "flood" (during the delivery
 *                   that dropped it)
 *   /wstest/info    "version V protocol P" (request->version, request->protocol: "-" for
 *                   none); 200, or 400 for an extended CONNECT (this route opens no tunnel)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <duda/duda.h>
#include <duda/packages/broadcaster.h>
#include <duda/packages/websocket.h>

DUDA_REGISTER("WebSocket tests", "wstest");

static const struct duda_websocket_api *websocket;
static const struct duda_broadcaster_api *broadcaster;

static void echo_message(websocket_t *ws, int type, const void *msg, size_t len)
{
    websocket->send(ws, type, msg, len);
}

static const struct websocket_callbacks echo_cb = {.on_message = echo_message};
static const struct websocket_settings echoz_settings = {.deflate = 1};

static const struct websocket_settings big_settings = {
    .deflate = 1,
    .max_frame = 64u << 20,
    .max_message = 64u << 20,
    .send_queue = 128u << 20,
};

static void cb_big(duda_request_t *dr)
{
    websocket->handshake(dr, &echo_cb, &big_settings, NULL);
}

static void cb_echo(duda_request_t *dr)
{
    websocket->handshake(dr, &echo_cb, NULL, NULL);
}

static void cb_echoz(duda_request_t *dr)
{
    websocket->handshake(dr, &echo_cb, &echoz_settings, NULL);
}

static void cmd_message(websocket_t *ws, int type, const void *msg, size_t len)
{
    char text[64];
    int code;

    if (type != WEBSOCKET_TEXT || len >= sizeof(text)) {
        return;
    }
    memcpy(text, msg, len);
    text[len] = '\0';
    if (sscanf(text, "close %d", &code) == 1) {
        websocket->close(ws, code, "asked to");
    }
    else if (strcmp(text, "ping") == 0) {
        websocket->ping(ws, "are you there", 13);
    }
}

static void cmd_pong(websocket_t *ws, const void *msg, size_t len)
{
    char text[160];
    snprintf(text, sizeof(text), "pong: %.*s", (int) len, (const char *) msg);
    websocket->send_text(ws, text);
}

static const struct websocket_callbacks cmd_cb = {.on_message = cmd_message, .on_pong = cmd_pong};

static const struct websocket_settings cmd_settings = {.idle_timeout_ms = 10000,
                                                       .close_timeout_ms = 300};
static const struct websocket_settings idle_settings = {.idle_timeout_ms = 600};

static void cb_cmd(duda_request_t *dr)
{
    websocket->handshake(dr, &cmd_cb, &cmd_settings, NULL);
}

static void cb_idle(duda_request_t *dr)
{
    websocket->handshake(dr, &cmd_cb, &idle_settings, NULL);
}

static void room_open(websocket_t *ws)
{
    broadcaster->join(ws, websocket->user(ws));
}

static void room_message(websocket_t *ws, int type, const void *msg, size_t len)
{
    broadcaster->send(websocket->user(ws), type, msg, len);
}

static const struct websocket_callbacks room_cb = {.on_open = room_open,
                                                   .on_message = room_message};
static const struct websocket_settings slow_settings = {.send_queue = 128 << 10};

static void cb_room(duda_request_t *dr)
{
    websocket->handshake(dr, &room_cb, NULL, "room");
}

static void cb_flood(duda_request_t *dr)
{
    websocket->handshake(dr, &room_cb, NULL, "flood");
}

static void cb_slow(duda_request_t *dr)
{
    websocket->handshake(dr, &room_cb, &slow_settings, "flood");
}

static const struct websocket_callbacks shout_cb = {.on_message = room_message};

static void leaver_error(websocket_t *ws, int code, const char *reason)
{
    (void) code;
    (void) reason;
    broadcaster->leave(ws, websocket->user(ws));
}

static const struct websocket_callbacks leaver_cb = {
    .on_open = room_open, .on_message = room_message, .on_error = leaver_error};

static void cb_leaver(duda_request_t *dr)
{
    websocket->handshake(dr, &leaver_cb, &slow_settings, "flood");
}

static void cb_shout(duda_request_t *dr)
{
    websocket->handshake(dr, &shout_cb, NULL, "flood");
}

static void cb_info(duda_request_t *dr)
{
    const char *protocol = request->protocol(dr);

    response->http_status(dr, protocol ? 400 : 200);
    response->printf(dr, "version %d protocol %s\n", request->version(dr),
                     protocol ? protocol : "-");
    response->end(dr, NULL);
}

int duda_main(void)
{
    duda_load_package(websocket, "websocket");
    duda_load_package(broadcaster, "broadcaster");
    if (!websocket || !broadcaster) {
        return -1;
    }
    router->map("/echo", DUDA_GET, cb_echo);
    router->map("/echoz", DUDA_GET, cb_echoz);
    router->map("/big", DUDA_GET, cb_big);
    router->map("/cmd", DUDA_GET, cb_cmd);
    router->map("/idle", DUDA_GET, cb_idle);
    router->map("/room", DUDA_GET, cb_room);
    router->map("/flood", DUDA_GET, cb_flood);
    router->map("/slow", DUDA_GET, cb_slow);
    router->map("/shout", DUDA_GET, cb_shout);
    router->map("/leaver", DUDA_GET, cb_leaver);
    router->map("/info", DUDA_GET, cb_info);
    return 0;
}
