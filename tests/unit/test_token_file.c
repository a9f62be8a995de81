/* test_token_file.c - the token file's format (token_file.h): named and
 * bare tokens, comments, every malformed line refused with its number;
 * and hello_find_user, which names the user whose token made a proof. */
#include "common/auth.h"
#include "common/hello.h"
#include "common/token_file.h"

#include <stdio.h>
#include <string.h>

static int failures;

static void check(const char *what, int ok)
{
    printf("%s %s\n", ok ? "ok  " : "FAIL", what);
    if (!ok) failures++;
}

static int parses(const char *text, struct token_set *set, char *err, size_t errlen)
{
    return token_set_parse(text, strlen(text), set, err, errlen);
}

/* A malformed text is refused, and the error names `line`. */
static void refused(const char *what, const char *text, const char *want)
{
    struct token_set set;
    char err[256] = "";
    int rc = parses(text, &set, err, sizeof err);
    check(what, rc == -1 && strstr(err, want) != NULL && set.count == 0);
    if (rc != -1 || !strstr(err, want)) printf("     error: \"%s\", want \"%s\"\n", err, want);
}

static void test_formats(void)
{
    struct token_set set;
    char err[256];
    check("a bare token is user default",
          parses("s3cret\n", &set, err, sizeof err) == 0 && set.count == 1 &&
              strcmp(set.entries[0].name, "default") == 0 && strcmp(set.entries[0].token, "s3cret") == 0);
    token_set_free(&set);
    check("a bare token without a newline",
          parses("  s3cret  ", &set, err, sizeof err) == 0 && strcmp(set.entries[0].token, "s3cret") == 0);
    token_set_free(&set);
    const char *named = "# users\n\nalice tokA\r\n  bob\ttokB   \n# the end\n";
    int rc = parses(named, &set, err, sizeof err);
    check("names, comments, blank lines, CRLF, tabs", rc == 0 && set.count == 2);
    check("find alice", rc == 0 && strcmp(token_set_find(&set, "alice")->token, "tokA") == 0);
    check("find bob", rc == 0 && strcmp(token_set_find(&set, "bob")->token, "tokB") == 0);
    check("find nobody", token_set_find(&set, "carol") == NULL);
    token_set_free(&set);
    check("free empties the set", set.count == 0 && set.entries == NULL);
}

static void test_malformed(void)
{
    refused("three fields", "alice tokA\nbob tok B\n", "line 2");
    refused("a bad name", "al/ice tokA\n", "line 1");
    refused("a duplicate name", "alice a1\nbob b1\nalice a2\n", "line 3");
    refused("a duplicate bare token user", "tok1\ntok2\n", "line 2");
    refused("one token for two users", "alice same\nbob same\n", "line 2");
    refused("a control byte", "alice to\x01k\n", "line 1");
    refused("only comments", "# nothing\n\n", "no token");
    refused("empty", "", "no token");
    char big[TOKEN_MAX_LEN + 16];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    refused("a token over 4096 bytes", big, "line 1");
    char nul[] = "alice tokA\nbob t\0k\n";
    struct token_set set;
    char err[128];
    check("a NUL byte", token_set_parse(nul, sizeof nul - 1, &set, err, sizeof err) == -1 && strstr(err, "line 2"));
}

static void test_find_user(void)
{
    struct token_set set;
    char err[128];
    parses("alice tokA\nbob tokB\ncarol tokC\n", &set, err, sizeof err);
    uint8_t nonce[16] = {1, 2, 3};
    struct client_hello ch = {0};
    auth_proof("tokB", nonce, ch.proof);
    check("bob's proof names bob", hello_find_user(&ch, &set, nonce) == 1);
    auth_proof("tokC", nonce, ch.proof);
    check("carol's proof names carol", hello_find_user(&ch, &set, nonce) == 2);
    auth_proof("tokD", nonce, ch.proof);
    check("an unknown token names nobody", hello_find_user(&ch, &set, nonce) == -1);
    uint8_t other[16] = {9};
    auth_proof("tokA", other, ch.proof);
    check("a proof over another nonce names nobody", hello_find_user(&ch, &set, nonce) == -1);
    memset(ch.proof, 0, sizeof ch.proof);
    check("no proof, tokens needed: nobody", hello_find_user(&ch, &set, nonce) == -1);
    check("no proof, no tokens: admitted", hello_find_user(&ch, NULL, nonce) == 0);
    auth_proof("tokA", nonce, ch.proof);
    check("a proof, no tokens: refused", hello_find_user(&ch, NULL, nonce) == -1);
    token_set_free(&set);
}

int main(void)
{
    test_formats();
    test_malformed();
    test_find_user();
    if (failures) {
        printf("%d failure(s)\n", failures);
        return 1;
    }
    printf("all passed\n");
    return 0;
}
