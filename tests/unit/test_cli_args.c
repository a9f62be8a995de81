/* test_cli_args.c - the subcommands' option loop (src/cli/args.c):
 * flags and aliases, "--name VALUE" and "--name=VALUE", help, a missing
 * value and an unknown word, each with its exit code. */
#include <string.h>

#include "check.h"

#include "cli/cli.h"

static int usage_calls;
static void count_usage(FILE *f)
{
    (void)f;
    usage_calls++;
}

static const char *server, *json;
static int quick;

/* argv is a NULL-terminated list after the command's name. */
static int parse(char **argv)
{
    int argc = 0;
    while (argv[argc]) argc++;
    server = json = NULL;
    quick = 0;
    const struct cli_opt opts[] = {
        {"--quick", "-q", NULL, &quick}, {"--server", "-s", &server, NULL}, {"--json", NULL, &json, NULL}, {NULL}};
    return cli_parse_options(argc, argv, "scuda test", opts, count_usage);
}

int main(void)
{
    char *all[] = {"test", "--quick", "--server", "gpu:1", "--json=out.json", NULL};
    CHECK(parse(all) == -1);
    CHECK(quick == 1 && server && strcmp(server, "gpu:1") == 0 && json && strcmp(json, "out.json") == 0);

    char *aliases[] = {"test", "-q", "-s", "gpu:2", NULL};
    CHECK(parse(aliases) == -1 && quick == 1 && server && strcmp(server, "gpu:2") == 0 && json == NULL);

    char *none[] = {"test", NULL};
    CHECK(parse(none) == -1 && quick == 0 && server == NULL);

    /* Help wins where it stands, before a later bad word. */
    char *help[] = {"test", "--quick", "--help", "--bogus", NULL};
    CHECK(parse(help) == 0 && usage_calls == 1);

    char *unknown[] = {"test", "--server", "gpu:1", "--bogus", NULL};
    CHECK(parse(unknown) == CLI_USAGE && usage_calls == 1);

    char *missing[] = {"test", "--server", NULL};
    CHECK(parse(missing) == CLI_USAGE);
    char *empty[] = {"test", "--json=", NULL};
    CHECK(parse(empty) == CLI_USAGE);

    /* A flag takes no value: "--quick=1" is not it. */
    char *flag_value[] = {"test", "--quick=1", NULL};
    CHECK(parse(flag_value) == CLI_USAGE && quick == 0);

    printf("test_cli_args: %d checks, %d failed\n", checks, failures);
    return failures != 0;
}
