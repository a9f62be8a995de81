/* args.c - the small option parser the subcommands share.
 *
 * Hand-rolled rather than getopt_long: each subcommand has a few long
 * options, `scuda run` must stop at the first word of CMD so that CMD's own
 * options are left alone, and our errors should name the subcommand and
 * point at its --help, which getopt's messages do not. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "cli.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cli_is_help(const char *arg)
{
    return strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0 || strcmp(arg, "help") == 0;
}

static int missing_value(const char *cmd, const char *name)
{
    fprintf(stderr, "%s: %s needs a value. Run '%s --help' for usage.\n", cmd, name, cmd);
    return -1;
}

int cli_option(int argc, char **argv, int *i, const char *cmd, const char *name, const char *alias,
               const char **value)
{
    const char *arg = argv[*i];
    size_t n = strlen(name);

    if (strncmp(arg, name, n) == 0 && arg[n] == '=') {
        *value = arg + n + 1;
    } else if (strcmp(arg, name) == 0 || (alias != NULL && strcmp(arg, alias) == 0)) {
        if (*i + 1 >= argc) return missing_value(cmd, name);
        *value = argv[++*i];
    } else {
        return 0;
    }
    if ((*value)[0] == '\0') return missing_value(cmd, name);
    return 1;
}

int cli_unknown_option(const char *cmd, const char *arg)
{
    fprintf(stderr, "%s: unknown option '%s'. Run '%s --help' for usage.\n", cmd, arg, cmd);
    return CLI_USAGE;
}

/* 1 when argv[*i] is o (a flag set, or an option's value taken), 0 when
 * it is not, -1 after printing why its value is missing. */
static int match(int argc, char **argv, int *i, const char *cmd, const struct cli_opt *o)
{
    if (!o->flag) return cli_option(argc, argv, i, cmd, o->name, o->alias, o->value);
    if (strcmp(argv[*i], o->name) != 0 && (o->alias == NULL || strcmp(argv[*i], o->alias) != 0)) return 0;
    *o->flag = 1;
    return 1;
}

int cli_parse_options(int argc, char **argv, const char *cmd, const struct cli_opt *opts, void (*usage)(FILE *))
{
    for (int i = 1; i < argc; i++) {
        if (cli_is_help(argv[i])) {
            usage(stdout);
            return 0;
        }
        int r = 0;
        for (const struct cli_opt *o = opts; r == 0 && o->name; o++) r = match(argc, argv, &i, cmd, o);
        if (r < 0) return CLI_USAGE;
        if (r == 0) return cli_unknown_option(cmd, argv[i]);
    }
    return -1;
}

int cli_parse_long(const char *s, long min, long max, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < min || v > max) return -1;
    *out = v;
    return 0;
}

/* "123", "512K", "40G", "1TiB", "8MB": powers of 1024. */
int cli_parse_bytes(const char *s, uint64_t *out)
{
    if (!isdigit((unsigned char)s[0])) return -1;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno != 0) return -1;

    static const char units[] = "KMGT";
    const char *u = *end != '\0' ? strchr(units, toupper((unsigned char)*end)) : NULL;
    unsigned shift = 0;
    if (u != NULL) {
        shift = 10u * (unsigned)(u - units + 1);
        end++;
        if (*end == 'i' || *end == 'I') end++;
    }
    if (*end == 'B' || *end == 'b') end++;
    if (*end != '\0') return -1;
    if (shift > 0 && v > (UINT64_MAX >> shift)) return -1;
    *out = (uint64_t)v << shift;
    return 0;
}
