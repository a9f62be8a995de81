/* opset.c - see opset.h. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "opset.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "version.h"

/* The skew hook: test builds only (SCUDA_TEST_HOOKS, set with the test
 * suite in CMakeLists.txt; packages are built without it). The e2e skew
 * tests start a server or run a client that claims another op set, the
 * way an older or newer build would, without building a second SCUDA:
 *   SCUDA_TEST_OPSET=older     one driver op fewer (an older build)
 *   SCUDA_TEST_OPSET=newer     one driver op more (a newer build)
 *   SCUDA_TEST_OPSET=diverged  as many ops, another last one */
enum skew { SKEW_NONE, SKEW_OLDER, SKEW_NEWER, SKEW_DIVERGED };

static enum skew skew(void)
{
#ifdef SCUDA_TEST_HOOKS
    const char *s = getenv("SCUDA_TEST_OPSET");
    if (s && strcmp(s, "older") == 0) return SKEW_OLDER;
    if (s && strcmp(s, "newer") == 0) return SKEW_NEWER;
    if (s && strcmp(s, "diverged") == 0) return SKEW_DIVERGED;
#endif
    return SKEW_NONE;
}

/* A made-up op's mark on a digest, for the hook's newer and diverged
 * builds: any value the chain does not produce serves. */
#define SKEW_MARK 0x5343554441534b57ull

static unsigned driver_count(void)
{
    enum skew k = skew();
    return scuda_opset_driver_count - (k == SKEW_OLDER) + (k == SKEW_NEWER);
}

/* The digest of this build's first n driver ops (n <= driver_count()). */
static uint64_t driver_prefix(unsigned n)
{
    enum skew k = skew();
    if (n > scuda_opset_driver_count || (k == SKEW_DIVERGED && n == scuda_opset_driver_count))
        return scuda_opset_driver_prefix[n - 1] ^ SKEW_MARK;
    return scuda_opset_driver_prefix[n];
}

void opset_self(struct scuda_opset *o)
{
    memset(o, 0, sizeof *o);
    o->version = SCUDA_VERSION_PACKED;
    o->driver_ops = (uint16_t)driver_count();
    o->driver_digest = driver_prefix(o->driver_ops);
    o->nvml_ops = (uint16_t)scuda_opset_nvml_count;
    o->nvml_digest = scuda_opset_nvml_prefix[scuda_opset_nvml_count];
}

/* One registry: the client's (cn, cd) against the server's (sn, sd), with
 * `mine` giving this build's prefixes on side self_is. */
static enum opset_verdict judge_one(int self_is, unsigned cn, uint64_t cd, unsigned sn, uint64_t sd,
                                    uint64_t (*mine)(unsigned))
{
    if (self_is == 's') {
        if (cn > sn) return OPSET_SERVER_OLDER;
        return mine(cn) == cd ? OPSET_OK : OPSET_DIVERGED;
    }
    if (sn < cn) return mine(sn) == sd ? OPSET_SERVER_OLDER : OPSET_DIVERGED;
    if (sn == cn) return sd == cd ? OPSET_OK : OPSET_DIVERGED;
    return OPSET_UNKNOWN; /* the server has more: only it can check the prefix */
}

static uint64_t nvml_prefix(unsigned n) { return scuda_opset_nvml_prefix[n]; }

/* The graver of two verdicts. */
static enum opset_verdict worse(enum opset_verdict a, enum opset_verdict b)
{
    static const int rank[] = {[OPSET_OK] = 0, [OPSET_UNKNOWN] = 1, [OPSET_SERVER_OLDER] = 2, [OPSET_DIVERGED] = 3};
    return rank[a] >= rank[b] ? a : b;
}

enum opset_verdict opset_judge(int self_is, const struct scuda_opset *peer)
{
    struct scuda_opset self;
    opset_self(&self);
    const struct scuda_opset *c = self_is == 'c' ? &self : peer, *s = self_is == 'c' ? peer : &self;
    enum opset_verdict d = judge_one(self_is, c->driver_ops, c->driver_digest, s->driver_ops, s->driver_digest,
                                     driver_prefix);
    enum opset_verdict n = judge_one(self_is, c->nvml_ops, c->nvml_digest, s->nvml_ops, s->nvml_digest,
                                     nvml_prefix);
    return worse(d, n);
}

static void version_string(uint32_t v, char *out, size_t outlen)
{
    snprintf(out, outlen, "%u.%u.%u", (unsigned)(v >> 16), (unsigned)(v >> 8) & 0xffu, (unsigned)v & 0xffu);
}

void opset_describe(const struct scuda_opset *o, char *out, size_t outlen)
{
    char v[32];
    version_string(o->version, v, sizeof v);
    snprintf(out, outlen, "%s (ops %u+%u, %08x)", v, (unsigned)o->driver_ops, (unsigned)o->nvml_ops,
             (unsigned)((o->driver_digest ^ (o->nvml_digest >> 1)) >> 32));
}

void opset_refusal(enum opset_verdict v, const struct scuda_opset *client, const struct scuda_opset *server,
                   char *out, size_t outlen)
{
    char c[96], s[96], cv[32];
    opset_describe(client, c, sizeof c);
    opset_describe(server, s, sizeof s);
    version_string(client->version, cv, sizeof cv);
    if (v == OPSET_SERVER_OLDER)
        snprintf(out, outlen, "server SCUDA %s lacks calls that client SCUDA %s may make; upgrade the server to "
                              "SCUDA %s or later, or use a client as old as the server", s, c, cv);
    else
        snprintf(out, outlen, "client SCUDA %s and server SCUDA %s were built from different op registries; "
                              "install the same SCUDA release on both", c, s);
}
