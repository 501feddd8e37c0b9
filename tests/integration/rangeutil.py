"""What the multipart/byteranges tests share: a strict reader of such a body
(RFC 9110 section 14.6, as the server frames it), and a check of the same
body with Python's email parser, the way a client that does not count
bytes reads it."""

import email.parser
import email.policy
import re

BOUNDARY = re.compile(r"multipart/byteranges; boundary=([0-9a-f]{24})\Z")
CONTENT_RANGE = re.compile(r"bytes (\d+)-(\d+)/(\d+)\Z")


def boundary_of(content_type):
    m = BOUNDARY.match(content_type or "")
    assert m, content_type
    return m.group(1)


def read_parts(content_type, body):
    """The parts of a multipart/byteranges body, read by the byte counts of
    their Content-Range: [(headers, first, last, size, bytes)]. Asserts the
    framing: "--B" first, each part's bytes followed by CRLF "--B", a
    closing "--B--" CRLF that ends the body, no boundary in a part head."""
    b = boundary_of(content_type).encode()
    parts = []
    pos = 0
    delim = b"--" + b
    assert body.startswith(delim + b"\r\n"), body[:80]
    pos = len(delim) + 2
    while True:
        end = body.index(b"\r\n\r\n", pos)
        head = body[pos:end]
        assert b not in head, head
        headers = {}
        for line in head.decode("latin-1").split("\r\n"):
            name, value = line.split(":", 1)
            assert name.lower() not in headers, head
            headers[name.lower()] = value.strip()
        m = CONTENT_RANGE.match(headers["content-range"])
        assert m, headers
        first, last, size = (int(g) for g in m.groups())
        assert first <= last < size
        pos = end + 4
        data = body[pos:pos + last - first + 1]
        assert len(data) == last - first + 1
        parts.append((headers, first, last, size, data))
        pos += len(data)
        assert body[pos:pos + 2 + len(delim)] == b"\r\n" + delim, body[pos:pos + 60]
        pos += 2 + len(delim)
        if body[pos:pos + 2] == b"--":
            assert body[pos:] == b"--\r\n", body[pos:]
            return parts
        assert body[pos:pos + 2] == b"\r\n"
        pos += 2


def email_parts(content_type, body):
    """The same body through Python's email parser: [(Content-Range, bytes)]."""
    msg = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
        b"Content-Type: " + content_type.encode() + b"\r\n\r\n" + body)
    assert msg.is_multipart() and not msg.defects, msg.defects
    return [(p["Content-Range"], p.get_payload(decode=True)) for p in msg.iter_parts()]


def check_parts(content_type, body, data, ranges, part_type):
    """The body holds, in order, the parts of `data` for `ranges` ([(first,
    last)], inclusive), each with Content-Type part_type (None: none)."""
    parts = read_parts(content_type, body)
    assert [(f, l) for _, f, l, _, _ in parts] == ranges
    for headers, first, last, size, got in parts:
        assert size == len(data)
        assert got == data[first:last + 1]
        assert headers.get("content-type") == part_type
        assert set(headers) <= {"content-type", "content-range"}
    return parts
