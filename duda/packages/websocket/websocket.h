/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * <duda/packages/websocket.h>: WebSocket (RFC 6455) for Duda services, with
 * permessage-deflate (RFC 7692). See duda/packages/websocket/README.md.
 *
 *     #include <duda/packages/websocket.h>
 *     static const struct duda_websocket_api *websocket;
 *
 *     static void on_message(websocket_t *ws, int type, const void *data, size_t len)
 *     {
 *         websocket->send(ws, type, data, len);          echo
 *     }
 *     static const struct websocket_callbacks echo_cb = {.on_message = on_message};
 *
 *     static void cb_ws(duda_request_t *dr)
 *     {
 *         websocket->handshake(dr, &echo_cb, NULL, NULL);
 *     }
 *
 *     int duda_main(void)
 *     {
 *         duda_load_package(websocket, "websocket");
 *         router->map("/ws", DUDA_GET, cb_ws);
 *         return websocket ? 0 : -1;
 *     }
 *
 * Threads: a websocket_t belongs to the worker that accepted it. Its
 * callbacks run there, and every call on it must be made there too;
 * another thread hands a worker data with worker->call() (the broadcaster
 * package does this for channels).
 */
#ifndef DUDA_PACKAGES_WEBSOCKET_H
#define DUDA_PACKAGES_WEBSOCKET_H

#include <duda/duda.h>

typedef struct websocket websocket_t;

/* Message types (the frame opcodes). */
#define WEBSOCKET_TEXT 1
#define WEBSOCKET_BINARY 2

/* Every callback is optional. They run on the connection's worker. */
struct websocket_callbacks {
    /* The 101 went out: the connection is open (send, join channels). */
    void (*on_open)(websocket_t *ws);
    /* A whole message (fragments reassembled, inflated); text is valid UTF-8. */
    void (*on_message)(websocket_t *ws, int type, const void *data, size_t len);
    /* A ping (the pong is sent for you) or a pong arrived. */
    void (*on_ping)(websocket_t *ws, const void *data, size_t len);
    void (*on_pong)(websocket_t *ws, const void *data, size_t len);
    /*
     * The connection failed: `code` is the close code sent to the client
     * (1002 protocol error, 1007 invalid UTF-8, 1008 send queue overflow,
     * 1009 too big, 1011 internal) and `reason` says why. on_close follows.
     */
    void (*on_error)(websocket_t *ws, int code, const char *reason);
    /*
     * Last call, once: the connection is gone (`ws` is freed after it).
     * `code` is the client's close code, 1005 when it sent none, 1006 when
     * the connection ended without a close frame (a timeout, a drop).
     */
    void (*on_close)(websocket_t *ws, int code);
};

/* Limits and options of a route's connections (NULL or 0 fields: the defaults). */
struct websocket_settings {
    size_t max_frame;          /* payload bytes of one frame: 1 MiB; past it 1009 */
    size_t max_message;        /* bytes of a whole (inflated) message: 1 MiB; past it 1009 */
    size_t send_queue;         /* bytes waiting past the socket's 64 KiB: 1 MiB; past it 1008 */
    unsigned idle_timeout_ms;  /* without a byte read or written: 60000 */
    unsigned close_timeout_ms; /* for the client's close frame after ours: 5000 */
    int deflate;               /* 1: accept permessage-deflate offers; 0 (default): never */
};

struct duda_websocket_api {
    size_t size;
    /*
     * In a route's callback (GET): answer the opening handshake. A valid
     * request (Upgrade: websocket, Connection: Upgrade, Sec-WebSocket-Version
     * 13, a Sec-WebSocket-Key) is answered 101 and its connection becomes a
     * websocket_t, opened by on_open; the response is ended either way.
     * Otherwise the answer is 400 (426 with Sec-WebSocket-Version: 13 for
     * another version) and NULL is returned. `user` is the connection's
     * pointer (websocket->user).
     */
    websocket_t *(*handshake)(duda_request_t *dr, const struct websocket_callbacks *cb,
                              const struct websocket_settings *settings, void *user);
    /*
     * Send a message (copied): DUDA_OK; DUDA_AGAIN queued (the client reads
     * slowly); DUDA_ERR not sent: closing, or the queue passed send_queue
     * bytes and the connection was dropped (1008, logged, on_error).
     */
    int (*send)(websocket_t *ws, int type, const void *data, size_t len);
    int (*send_text)(websocket_t *ws, const char *text);
    int (*ping)(websocket_t *ws, const void *data, size_t len); /* len <= 125 */
    /* Start the closing handshake (code 1000..4999, reason <= 123 bytes); on_close follows. */
    int (*close)(websocket_t *ws, int code, const char *reason);
    void *(*user)(websocket_t *ws);
    void (*set_user)(websocket_t *ws, void *user);
    /* The worker that owns ws, a number unique in the process, the client's address. */
    int (*worker)(websocket_t *ws);
    unsigned long (*id)(websocket_t *ws);
    const char *(*remote_addr)(websocket_t *ws);
    /* Bytes waiting to go out beyond the socket's own queue. */
    size_t (*queued)(websocket_t *ws);
    /* Whether permessage-deflate was negotiated. */
    int (*deflated)(websocket_t *ws);
    /*
     * For packages built on this one (the broadcaster): fn(ws, arg) runs
     * just before on_close (at most 4 per connection). 0 or -1.
     */
    int (*on_close_hook)(websocket_t *ws, void (*fn)(websocket_t *ws, void *arg), void *arg);
};

#endif
