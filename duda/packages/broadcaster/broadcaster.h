/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * <duda/packages/broadcaster.h>: channels of WebSocket connections across
 * every worker. See duda/packages/broadcaster/README.md.
 *
 *     duda_load_package(websocket, "websocket");
 *     duda_load_package(broadcaster, "broadcaster");
 *     ...
 *     on_open:    broadcaster->join(ws, "lobby");
 *     on_message: broadcaster->send("lobby", type, data, len);
 *
 * Each worker keeps the members of its own connections and writes only to
 * them: send() hands the message to every worker through worker->call()
 * (the server's worker messaging), never writing a socket of another
 * worker. Messages of one sender reach every member in the order they
 * were sent. A member that does not read is dropped by the websocket
 * package once its send queue overflows (close 1008, logged), and leaves
 * its channels as it closes.
 */
#ifndef DUDA_PACKAGES_BROADCASTER_H
#define DUDA_PACKAGES_BROADCASTER_H

#include <duda/duda.h>
#include <duda/packages/websocket.h>

#define BROADCASTER_CHANNEL_MAX 64 /* bytes of a channel's name */

struct duda_broadcaster_api {
    size_t size;
    /*
     * On ws's worker (in its callbacks): ws receives the messages of
     * `channel` until leave() or its close. 0; -1 for a name that is empty
     * or too long, or memory short. Joining twice is one membership.
     */
    int (*join)(websocket_t *ws, const char *channel);
    /* On ws's worker: 0, or -1 when ws was not a member. */
    int (*leave)(websocket_t *ws, const char *channel);
    /*
     * From a callback on any worker: send a message (copied) to every
     * member of `channel` on every worker, the sender included.
     * 0, or -1 (bad arguments, memory short).
     */
    int (*send)(const char *channel, int type, const void *data, size_t len);
    int (*send_text)(const char *channel, const char *text);
    /* Members of `channel` on the calling worker. */
    size_t (*members_here)(const char *channel);
    /* Deliveries refused on this worker (a member closing, or dropped as a slow reader). */
    unsigned long (*dropped_here)(void);
};

#endif
