/* test_config.c - server address resolution order, host:port parsing, and
 * saving the host file. HOME points at a temporary directory throughout. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "common/config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int failures;

static void check(const char *what, int ok)
{
    printf("%s %s\n", ok ? "ok  " : "FAIL", what);
    if (!ok) failures++;
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (f == NULL) {
        perror(path);
        exit(2);
    }
    fputs(text, f);
    fclose(f);
}

/* ---- parse_hostport ---- */

static void good(const char *in, const char *want_host, int want_port)
{
    char host[256] = "unset", what[512];
    int port = -7;
    int rc = scuda_parse_hostport(in, host, sizeof host, &port);
    snprintf(what, sizeof what, "parse \"%s\" -> host \"%s\" port %d", in, want_host, want_port);
    check(what, rc == 0 && strcmp(host, want_host) == 0 && port == want_port);
}

static void bad(const char *in)
{
    char host[256], what[512];
    int port;
    snprintf(what, sizeof what, "parse \"%s\" is rejected", in);
    check(what, scuda_parse_hostport(in, host, sizeof host, &port) == -1);
}

static void test_parse(void)
{
    good("gpubox:9000", "gpubox", 9000);
    good("10.0.0.5:14833", "10.0.0.5", 14833);
    good("[::1]:80", "::1", 80);
    good("[fe80::1%eth0]:1", "fe80::1%eth0", 1);
    good("[2001:db8::2]", "2001:db8::2", 14833);
    good("gpubox", "gpubox", 14833);
    good("0.0.0.0:0", "0.0.0.0", 0);
    good("h:65535", "h", 65535);
    good("h:00080", "h", 80);

    bad("");
    bad(":80");
    bad("h:");
    bad("h:65536");
    bad("h:99999999999999999999");
    bad("h:-1");
    bad("h:+1");
    bad("h:80x");
    bad("h:8 0");
    bad("h :80");
    bad("[::1");
    bad("[]:80");
    bad("[::1]80");
    bad("[::1]:");
    bad("[gpubox]:80");
    bad("::1:80");
    bad("::1");
    bad("a,b:80");
    bad("http://h:80");

    check("parse NULL is rejected", scuda_parse_hostport(NULL, NULL, 0, NULL) == -1);
    check("parse with NULL outputs only validates", scuda_parse_hostport("h:1", NULL, 0, NULL) == 0);
    char small[4];
    check("host longer than the buffer is rejected", scuda_parse_hostport("gpubox:1", small, sizeof small, NULL) == -1);
    check("host that exactly fits is accepted", scuda_parse_hostport("abc:1", small, sizeof small, NULL) == 0);
}

/* ---- resolution order, save, reload ---- */

static void expect(const char *what, const char *cli, int want_rc, const char *want_addr, const char *want_src)
{
    char out[256] = "", msg[512];
    const char *src = "unset";
    int rc = scuda_resolve_server(cli, out, sizeof out, &src);
    int ok = rc == want_rc;
    if (ok && want_rc == 0) ok = strcmp(out, want_addr) == 0 && src != NULL && strcmp(src, want_src) == 0;
    if (ok && want_rc == -1) ok = src == NULL;
    snprintf(msg, sizeof msg, "%s (rc %d, \"%s\" from %s)", what, rc, out, src ? src : "(none)");
    check(msg, ok);
}

static void test_resolve(const char *home)
{
    char path[4096], file[4096], err[512];
    snprintf(file, sizeof file, "%s/.config/scuda/host", home);

    setenv("HOME", home, 1);
    unsetenv("SCUDA_SERVER");

    check("host file path is $HOME/.config/scuda/host",
          scuda_host_file_path(path, sizeof path) == 0 && strcmp(path, file) == 0);

    expect("nothing configured", NULL, -1, NULL, NULL);
    expect("empty --server counts as not given", "", -1, NULL, NULL);

    check("save gpubox:9000", scuda_save_server("gpubox:9000", err, sizeof err) == 0);
    struct stat st;
    check("host file exists with mode 0600", stat(file, &st) == 0 && (st.st_mode & 0777) == 0600);
    snprintf(path, sizeof path, "%s/.config/scuda", home);
    check("directory created with mode 0700", stat(path, &st) == 0 && (st.st_mode & 0777) == 0700);
    expect("file is used when nothing else is set", NULL, 0, "gpubox:9000", file);

    check("save again replaces the address", scuda_save_server("[::1]:7", err, sizeof err) == 0);
    expect("reload after second save", NULL, 0, "[::1]:7", file);

    write_file(file, "\n# comment\n   other:1  \nignored:2\n");
    expect("first non-blank, non-comment line, trimmed", NULL, 0, "other:1", file);

    setenv("SCUDA_SERVER", "", 1);
    expect("empty SCUDA_SERVER falls through to the file", NULL, 0, "other:1", file);
    setenv("SCUDA_SERVER", " envhost:5 , second:6", 1);
    expect("SCUDA_SERVER beats the file, first entry", NULL, 0, "envhost:5", "SCUDA_SERVER");
    check("a list of two servers counts 2", scuda_server_list_len(" envhost:5 , second:6") == 2);
    check("empty list entries do not count", scuda_server_list_len("a:1,, ,b:2,") == 2);
    check("one entry counts 1, none 0", scuda_server_list_len("a:1") == 1 && scuda_server_list_len("") == 0);
    {
        /* every entry of a list, by index, as a client of several servers reads them */
        const char *list = " a:1 ,, ,[::1]:2,b ,";
        char e[64], tiny[3], small[4];
        check("entry 0 of a list", scuda_server_list_entry(list, 0, e, sizeof e) == 0 && strcmp(e, "a:1") == 0);
        check("entry 1 skips empty entries", scuda_server_list_entry(list, 1, e, sizeof e) == 0 &&
                                                 strcmp(e, "[::1]:2") == 0);
        check("entry 2 is trimmed", scuda_server_list_entry(list, 2, e, sizeof e) == 0 && strcmp(e, "b") == 0);
        check("entries match the count", scuda_server_list_len(list) == 3);
        check("no entry 3, none below 0", scuda_server_list_entry(list, 3, e, sizeof e) == -1 &&
                                              scuda_server_list_entry(list, -1, e, sizeof e) == -1);
        check("an entry too long is -2", scuda_server_list_entry(list, 1, tiny, sizeof tiny) == -2);
        check("a long entry still counts", scuda_server_list_entry("longname:1,b:2", 1, small, sizeof small) == 0 &&
                                               strcmp(small, "b:2") == 0);
        check("an empty or NULL list has none", scuda_server_list_entry("", 0, e, sizeof e) == -1 &&
                                                    scuda_server_list_entry(NULL, 0, e, sizeof e) == -1);
    }
    setenv("SCUDA_SERVER", ",,second:6", 1);
    expect("SCUDA_SERVER skips empty entries", NULL, 0, "second:6", "SCUDA_SERVER");
    expect("--server beats SCUDA_SERVER", "cli:4", 0, "cli:4", "--server");

    char tiny[4];
    const char *src = NULL;
    check("value too long for the buffer gives -2 and a source",
          scuda_resolve_server("longhost:1", tiny, sizeof tiny, &src) == -2 && src && !strcmp(src, "--server"));
    check("source may be NULL", scuda_resolve_server("cli:4", tiny + 0, 0, NULL) == -2);

    unsetenv("SCUDA_SERVER");
    unlink(file);
    expect("removed file: nothing configured", NULL, -1, NULL, NULL);

    /* Bad input and failures name their cause. */
    err[0] = '\0';
    check("save rejects a malformed address",
          scuda_save_server("nope:", err, sizeof err) == -1 && strstr(err, "nope:") != NULL);
    printf("     message: %s\n", err);
    check("save rejects port 0", scuda_save_server("h:0", err, sizeof err) == -1 && strstr(err, "port 0"));
    printf("     message: %s\n", err);

    snprintf(path, sizeof path, "%s/plainfile", home);
    write_file(path, "x");
    setenv("HOME", path, 1); /* HOME is a file: mkdir must fail */
    check("save into an unusable HOME fails and names the directory",
          scuda_save_server("h:1", err, sizeof err) == -1 && strstr(err, path) != NULL);
    printf("     message: %s\n", err);
    unlink(path);
    setenv("HOME", home, 1);
}

static void test_token(void)
{
    unsetenv("SCUDA_TOKEN");
    check("scuda_token: unset -> NULL", scuda_token() == NULL);
    setenv("SCUDA_TOKEN", "", 1);
    check("scuda_token: empty -> NULL", scuda_token() == NULL);
    setenv("SCUDA_TOKEN", "s3cret", 1);
    check("scuda_token: value", scuda_token() && strcmp(scuda_token(), "s3cret") == 0);
    unsetenv("SCUDA_TOKEN");
}

static void test_module_cache_dir(const char *home)
{
    char path[4096], want[4096];
    setenv("HOME", home, 1);
    unsetenv("XDG_CACHE_HOME");
    snprintf(want, sizeof want, "%s/.cache/scuda/modules", home);
    check("module cache: ~/.cache/scuda/modules by default",
          scuda_module_cache_default(path, sizeof path) == 0 && strcmp(path, want) == 0);
    setenv("XDG_CACHE_HOME", "/var/cache/me", 1);
    check("module cache: under an absolute XDG_CACHE_HOME",
          scuda_module_cache_default(path, sizeof path) == 0 && strcmp(path, "/var/cache/me/scuda/modules") == 0);
    setenv("XDG_CACHE_HOME", "relative", 1);
    check("module cache: a relative XDG_CACHE_HOME is ignored",
          scuda_module_cache_default(path, sizeof path) == 0 && strcmp(path, want) == 0);
    check("module cache: too long for the buffer gives -1", scuda_module_cache_default(path, 8) == -1);
    unsetenv("XDG_CACHE_HOME");
}

static void cleanup(const char *home)
{
    char p[4096];
    snprintf(p, sizeof p, "%s/.config/scuda/host", home);
    unlink(p);
    snprintf(p, sizeof p, "%s/.config/scuda", home);
    rmdir(p);
    snprintf(p, sizeof p, "%s/.config", home);
    rmdir(p);
    rmdir(home);
}

static void test_bulk_streams(void)
{
    static const struct {
        const char *value; /* NULL: unset */
        int want;
    } cases[] = {
        {NULL, SCUDA_BULK_STREAMS_DEFAULT}, {"", SCUDA_BULK_STREAMS_DEFAULT},
        {"0", 0}, {"1", 1}, {"8", 8}, {"16", 16}, {"016", 16},
        {"17", -1}, {"99999999999999999999", -1}, {"-1", -1}, {"4x", -1}, {" 4", -1}, {"four", -1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        if (cases[i].value) setenv("SCUDA_BULK_STREAMS", cases[i].value, 1);
        else unsetenv("SCUDA_BULK_STREAMS");
        int got = scuda_bulk_streams(0);
        char what[128];
        snprintf(what, sizeof what, "scuda_bulk_streams: %s -> %d (got %d)",
                 cases[i].value ? cases[i].value : "(unset)", cases[i].want, got);
        check(what, got == cases[i].want);
    }
    unsetenv("SCUDA_BULK_STREAMS");
    check("scuda_bulk_streams: TLS default", scuda_bulk_streams(1) == SCUDA_BULK_STREAMS_TLS_DEFAULT);
    setenv("SCUDA_BULK_STREAMS", "3", 1);
    check("scuda_bulk_streams: TLS, set", scuda_bulk_streams(1) == 3);
    unsetenv("SCUDA_BULK_STREAMS");
}

int main(void)
{
    char home[] = "/tmp/scuda-test-config-XXXXXX";
    if (mkdtemp(home) == NULL) {
        perror("mkdtemp");
        return 2;
    }
    test_parse();
    test_resolve(home);
    test_token();
    test_module_cache_dir(home);
    test_bulk_streams();
    cleanup(home);
    if (failures) {
        printf("test_config: %d FAILED\n", failures);
        return 1;
    }
    printf("test_config: all passed\n");
    return 0;
}
