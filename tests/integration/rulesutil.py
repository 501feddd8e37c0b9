"""What the tests of request rules share (http/test_rules.py,
http/test_rules_cors.py, http/test_rules_settings.py, http/test_ratelimit.py):
a server whose site has the [RULE] sections given, and `monkey -t` refusing
a site file at the line it names."""


def rules_server(make_server, rules, files=None, workers=1, h2=False, names=None, **server):
    """A server (not started) with `rules` after the default site's [HOST],
    `files` ({path: content}) in its document root, `workers` workers,
    `h2` an h2c listener, `names` the site's ServerName, and the other
    keywords as [SERVER] keys."""
    srv = make_server()
    if h2:
        srv.set(Listen=f"127.0.0.1:{srv.port} h2c")
    srv.set(Workers=workers, **server)
    if names:
        srv.site_conf["ServerName"] = names
    for path, content in (files or {}).items():
        srv.file(path, content)
    srv.site_extra = rules
    return srv


def check_refused(make_server, rules, line, words):
    """`monkey -t` refuses a site file with `rules` after its [HOST]: the
    error names the site file, `line` and holds `words`. Returns the error."""
    srv = make_server()
    srv.site_extra = rules
    err = srv.run_expect_failure(["-t"])
    assert f"sites/default:{line}:" in err and words in err, err
    return err
