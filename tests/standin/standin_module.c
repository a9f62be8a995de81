/* SCUDA CPU stand-in driver: PTX images, modules, functions, libraries,
 * kernels.
 *
 * The stand-in reads PTX text (or an uncompressed PTX entry of a fatbin).
 * It understands the module-level structure only: .version, .target,
 * .entry declarations with their parameter lists and .maxntid/.reqntid,
 * and .global/.const variables with their initializers. Function bodies are
 * skipped: kernels "run" as built-in CPU implementations chosen by name
 * (standin_launch.c). Parameter offsets follow the CUDA ABI: each
 * parameter at the next multiple of its alignment (its .align, else the
 * size of its element type). */
#include "standin_internal.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <limits.h>
#include <string.h>

/* ------------------------------------------------------------------ */
/* lexer                                                               */

enum { TK_EOF = 0, TK_IDENT, TK_DIR, TK_NUM, TK_STR, TK_PUNCT };

typedef struct {
    int t;
    const char *s;
    size_t n;
    int line;
} si_tok;

typedef struct {
    const char *p, *end;
    int line;
    si_tok peeked;
    bool has_peek;
    char *err;
    size_t errlen;
    bool failed;
} si_lex;

static bool si_ident_start(int c)
{
    return isalpha(c) || c == '_' || c == '$' || c == '%';
}

static bool si_ident_char(int c)
{
    return isalnum(c) || c == '_' || c == '$';
}

static si_tok si_lex_raw(si_lex *L)
{
    si_tok t = {TK_EOF, NULL, 0, L->line};
    for (;;) {
        while (L->p < L->end && isspace((unsigned char)*L->p)) {
            if (*L->p == '\n')
                L->line++;
            L->p++;
        }
        if (L->p + 1 < L->end && L->p[0] == '/' && L->p[1] == '/') {
            while (L->p < L->end && *L->p != '\n')
                L->p++;
            continue;
        }
        if (L->p + 1 < L->end && L->p[0] == '/' && L->p[1] == '*') {
            L->p += 2;
            while (L->p + 1 < L->end && !(L->p[0] == '*' && L->p[1] == '/')) {
                if (*L->p == '\n')
                    L->line++;
                L->p++;
            }
            L->p = L->p + 1 < L->end ? L->p + 2 : L->end;
            continue;
        }
        break;
    }
    t.line = L->line;
    if (L->p >= L->end)
        return t;
    const char *b = L->p;
    unsigned char c = (unsigned char)*b;
    if (c == '.' && L->p + 1 < L->end && si_ident_start((unsigned char)L->p[1])) {
        L->p += 2;
        while (L->p < L->end && si_ident_char((unsigned char)*L->p))
            L->p++;
        t.t = TK_DIR;
    } else if (si_ident_start(c)) {
        L->p++;
        while (L->p < L->end && si_ident_char((unsigned char)*L->p))
            L->p++;
        t.t = TK_IDENT;
    } else if (isdigit(c)) {
        while (L->p < L->end && (isalnum((unsigned char)*L->p) || *L->p == '.' || *L->p == '_'))
            L->p++;
        t.t = TK_NUM;
    } else if (c == '"') {
        L->p++;
        while (L->p < L->end && *L->p != '"' && *L->p != '\n')
            L->p += (*L->p == '\\' && L->p + 1 < L->end) ? 2 : 1;
        if (L->p < L->end && *L->p == '"')
            L->p++;
        t.t = TK_STR;
    } else {
        L->p++;
        t.t = TK_PUNCT;
    }
    t.s = b;
    t.n = (size_t)(L->p - b);
    return t;
}

static si_tok si_next(si_lex *L)
{
    if (L->has_peek) {
        L->has_peek = false;
        return L->peeked;
    }
    return si_lex_raw(L);
}

static si_tok si_peek(si_lex *L)
{
    if (!L->has_peek) {
        L->peeked = si_lex_raw(L);
        L->has_peek = true;
    }
    return L->peeked;
}

static bool si_is(si_tok t, const char *s)
{
    return t.t != TK_EOF && t.n == strlen(s) && memcmp(t.s, s, t.n) == 0;
}

static bool si_fail(si_lex *L, int line, const char *msg, si_tok t)
{
    if (!L->failed) {
        L->failed = true;
        if (L->err && L->errlen)
            snprintf(L->err, L->errlen, "ptx line %d: %s near '%.*s'", line, msg,
                     (int)(t.n > 40 ? 40 : t.n), t.s ? t.s : "");
    }
    return false;
}

/* skips a balanced group; the opening token was just read */
static bool si_skip_group(si_lex *L, char open, char close)
{
    int depth = 1;
    for (;;) {
        si_tok t = si_next(L);
        if (t.t == TK_EOF)
            return si_fail(L, t.line, "unbalanced brackets", t);
        if (t.t == TK_PUNCT && t.s[0] == open)
            depth++;
        else if (t.t == TK_PUNCT && t.s[0] == close && --depth == 0)
            return true;
    }
}

static bool si_parse_uint(si_tok t, unsigned long long *out)
{
    if (t.t != TK_NUM || t.n >= 64)
        return false;
    char buf[64];
    memcpy(buf, t.s, t.n);
    buf[t.n] = '\0';
    size_t n = t.n;
    if (n && (buf[n - 1] == 'U' || buf[n - 1] == 'u'))
        buf[--n] = '\0';
    char *end = NULL;
    errno = 0;
    unsigned long long v;
    if (n > 2 && buf[0] == '0' && (buf[1] == 'b' || buf[1] == 'B'))
        v = strtoull(buf + 2, &end, 2);
    else
        v = strtoull(buf, &end, 0);
    if (errno || !end || *end)
        return false;
    *out = v;
    return true;
}

/* ------------------------------------------------------------------ */
/* types                                                               */

/* size in bytes of a PTX fundamental type directive; 0 if not a type */
static size_t si_type_size(si_tok t, bool *is_float)
{
    static const struct {
        const char *name;
        size_t size;
        bool fl;
    } types[] = {
        {".b8", 1, 0},     {".s8", 1, 0},     {".u8", 1, 0},     {".b16", 2, 0},
        {".s16", 2, 0},    {".u16", 2, 0},    {".f16", 2, 0},    {".bf16", 2, 0},
        {".b32", 4, 0},    {".s32", 4, 0},    {".u32", 4, 0},    {".f32", 4, 1},
        {".f16x2", 4, 0},  {".bf16x2", 4, 0}, {".b64", 8, 0},    {".s64", 8, 0},
        {".u64", 8, 0},    {".f64", 8, 1},    {".b128", 16, 0},  {".texref", 8, 0},
        {".samplerref", 8, 0}, {".surfref", 8, 0}, {".pred", 1, 0}, {".e4m3", 1, 0},
        {".e5m2", 1, 0},
    };
    for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
        if (si_is(t, types[i].name)) {
            if (is_float)
                *is_float = types[i].fl;
            return types[i].size;
        }
    return 0;
}

static size_t si_align_up(size_t x, size_t a)
{
    return a ? (x + a - 1) / a * a : x;
}

/* ------------------------------------------------------------------ */
/* image                                                               */

typedef struct {
    si_image *img;
    size_t cap_entries, cap_globals;
} si_builder;

static char *si_tokdup(si_tok t)
{
    char *s = si_xcalloc(t.n + 1, 1);
    memcpy(s, t.s, t.n);
    return s;
}

static bool si_name_taken(const si_image *img, si_tok name)
{
    for (size_t i = 0; i < img->n_entries; i++)
        if (si_is(name, img->entries[i].name))
            return true;
    for (size_t i = 0; i < img->n_globals; i++)
        if (si_is(name, img->globals[i].name))
            return true;
    return false;
}

/* one .param declaration: tokens up to ',' or ')' */
static bool si_parse_param(si_lex *L, si_param *p, bool *end)
{
    si_tok t = si_next(L);
    if (!si_is(t, ".param") && !si_is(t, ".reg"))
        return si_fail(L, t.line, "expected .param", t);
    size_t elem = 0, align = 0, count = 1;
    bool ptr = false, have_name = false;
    for (;;) {
        t = si_next(L);
        if (t.t == TK_EOF)
            return si_fail(L, t.line, "unterminated parameter list", t);
        if (t.t == TK_PUNCT && (t.s[0] == ',' || t.s[0] == ')')) {
            *end = t.s[0] == ')';
            break;
        }
        if (t.t == TK_DIR) {
            size_t sz = si_type_size(t, NULL);
            if (sz) {
                elem = sz;
            } else if (si_is(t, ".align")) {
                unsigned long long a = 0;
                si_tok n = si_next(L);
                if (!si_parse_uint(n, &a) || a == 0 || (a & (a - 1)) || a > 4096)
                    return si_fail(L, n.line, "bad .align", n);
                if (!ptr)
                    align = (size_t)a;
            } else if (si_is(t, ".ptr")) {
                ptr = true;
            }
            /* state spaces after .ptr and other qualifiers are ignored */
            continue;
        }
        if (t.t == TK_IDENT && !have_name) {
            have_name = true;
            continue;
        }
        if (t.t == TK_PUNCT && t.s[0] == '[') {
            unsigned long long n = 0;
            si_tok nt = si_next(L);
            if (!si_parse_uint(nt, &n) || n == 0)
                return si_fail(L, nt.line, "bad parameter array size", nt);
            si_tok close = si_next(L);
            if (!(close.t == TK_PUNCT && close.s[0] == ']'))
                return si_fail(L, close.line, "expected ]", close);
            if (__builtin_mul_overflow(count, (size_t)n, &count) || count > SI_MAX_PARAM_BYTES)
                return si_fail(L, nt.line, "parameter too large", nt);
            continue;
        }
        return si_fail(L, t.line, "unexpected token in parameter", t);
    }
    if (!elem || !have_name)
        return si_fail(L, t.line, "incomplete parameter declaration", t);
    p->size = elem * count;
    p->align = align ? align : elem;
    return true;
}

static bool si_parse_entry(si_lex *L, si_builder *B, bool is_extern)
{
    si_tok name = si_next(L);
    if (name.t != TK_IDENT)
        return si_fail(L, name.line, "expected entry name", name);
    si_param params[512];
    size_t np = 0;
    si_tok t = si_peek(L);
    if (t.t == TK_PUNCT && t.s[0] == '(') {
        si_next(L);
        si_tok q = si_peek(L);
        if (q.t == TK_PUNCT && q.s[0] == ')') {
            si_next(L);
        } else {
            bool end = false;
            while (!end) {
                if (np == sizeof(params) / sizeof(params[0]))
                    return si_fail(L, q.line, "too many parameters", q);
                if (!si_parse_param(L, &params[np], &end))
                    return false;
                np++;
            }
        }
    }
    unsigned max_threads = 1024;
    bool body = false;
    for (;;) {
        t = si_next(L);
        if (t.t == TK_EOF)
            return si_fail(L, t.line, "unterminated .entry", t);
        if (t.t == TK_PUNCT && t.s[0] == ';')
            break;
        if (t.t == TK_PUNCT && t.s[0] == '{') {
            if (!si_skip_group(L, '{', '}'))
                return false;
            body = true;
            break;
        }
        if (si_is(t, ".maxntid") || si_is(t, ".reqntid")) {
            unsigned long long prod = 1, v = 0;
            for (int i = 0; i < 3; i++) {
                si_tok n = si_next(L);
                if (!si_parse_uint(n, &v) || v == 0 || v > 1024)
                    return si_fail(L, n.line, "bad thread count", n);
                prod *= v;
                si_tok comma = si_peek(L);
                if (!(comma.t == TK_PUNCT && comma.s[0] == ','))
                    break;
                si_next(L);
            }
            if (prod < max_threads)
                max_threads = (unsigned)prod;
        }
    }
    if (!body || is_extern)
        return true; /* a declaration, no kernel */
    si_image *img = B->img;
    if (si_name_taken(img, name))
        return si_fail(L, name.line, "duplicate symbol", name);
    if (img->n_entries == B->cap_entries) {
        B->cap_entries = B->cap_entries ? B->cap_entries * 2 : 8;
        si_entry *n = realloc(img->entries, B->cap_entries * sizeof(si_entry));
        if (!n)
            abort();
        img->entries = n;
    }
    si_entry *e = &img->entries[img->n_entries];
    memset(e, 0, sizeof(*e));
    e->name = si_tokdup(name);
    e->max_threads = max_threads;
    e->n_params = np;
    e->params = si_xcalloc(np ? np : 1, sizeof(si_param));
    size_t off = 0;
    for (size_t i = 0; i < np; i++) {
        off = si_align_up(off, params[i].align);
        e->params[i].offset = off;
        e->params[i].size = params[i].size;
        e->params[i].align = params[i].align;
        off += params[i].size;
    }
    e->param_bytes = off;
    img->n_entries++;
    if (off > SI_MAX_PARAM_BYTES)
        return si_fail(L, name.line, "kernel parameters exceed 32764 bytes", name);
    return true;
}

/* PTX literal -> integer bits or float value */

/* A PTX initializer's floating value stored into an integer: saturated
 * (and NaN as 0), since a value out of range has no defined conversion. */
static long long si_double_to_ll(double v)
{
    if (v != v)
        return 0;
    if (v >= 9223372036854775807.0)
        return LLONG_MAX;
    if (v <= -9223372036854775808.0)
        return LLONG_MIN;
    return (long long)v;
}
static bool si_parse_literal(si_tok t, bool neg, bool as_float, size_t size, unsigned char *out)
{
    char buf[80];
    if (t.n >= sizeof(buf))
        return false;
    memcpy(buf, t.s, t.n);
    buf[t.n] = '\0';
    double d = 0;
    unsigned long long u = 0;
    bool is_fp = false;
    if ((buf[1] == 'f' || buf[1] == 'F') && buf[0] == '0' && t.n == 10) {
        uint32_t bits = (uint32_t)strtoul(buf + 2, NULL, 16);
        float f;
        memcpy(&f, &bits, 4);
        d = f;
        is_fp = true;
    } else if ((buf[1] == 'd' || buf[1] == 'D') && buf[0] == '0' && t.n == 18) {
        uint64_t bits = strtoull(buf + 2, NULL, 16);
        memcpy(&d, &bits, 8);
        is_fp = true;
    } else if (!(buf[0] == '0' && (buf[1] == 'x' || buf[1] == 'X')) &&
               (strchr(buf, '.') || strchr(buf, 'e') || strchr(buf, 'E'))) {
        char *end = NULL;
        d = strtod(buf, &end);
        if (!end || *end)
            return false;
        is_fp = true;
    } else if (!si_parse_uint(t, &u)) {
        return false;
    }
    if (as_float) {
        if (!is_fp)
            d = (double)u;
        if (neg)
            d = -d;
        if (size == 4) {
            float f = (float)d;
            memcpy(out, &f, 4);
        } else if (size == 8) {
            memcpy(out, &d, 8);
        }
    } else {
        if (is_fp)
            u = (unsigned long long)si_double_to_ll(neg ? -d : d);
        else if (neg)
            u = 0ull - u;
        for (size_t i = 0; i < size && i < 8; i++)
            out[i] = (unsigned char)(u >> (8 * i));
    }
    return true;
}

/* .global / .const variable declaration(s) up to ';' */
static bool si_parse_var(si_lex *L, si_builder *B, bool is_extern)
{
    size_t elem = 0, align = 0, vec = 1;
    int ref_kind = 0;
    bool fl = false, managed = false;
    si_image *img = B->img;
    for (;;) {
        si_tok t = si_next(L);
        if (t.t == TK_EOF)
            return si_fail(L, t.line, "unterminated variable declaration", t);
        if (t.t == TK_PUNCT && t.s[0] == ';')
            return true;
        if (t.t == TK_PUNCT && t.s[0] == ',')
            continue;
        if (t.t == TK_DIR) {
            size_t sz = si_type_size(t, &fl);
            if (si_is(t, ".texref") || si_is(t, ".surfref")) /* its state lives in the module (standin_texture.c) */
                ref_kind = si_is(t, ".texref") ? 1 : 2;
            if (sz)
                elem = sz;
            else if (si_is(t, ".align")) {
                unsigned long long a = 0;
                si_tok n = si_next(L);
                if (!si_parse_uint(n, &a) || a == 0 || (a & (a - 1)))
                    return si_fail(L, n.line, "bad .align", n);
                align = (size_t)a;
            } else if (si_is(t, ".v2"))
                vec = 2;
            else if (si_is(t, ".v4"))
                vec = 4;
            else if (si_is(t, ".v8"))
                vec = 8;
            else if (si_is(t, ".attribute")) {
                si_tok o = si_next(L);
                if (!(o.t == TK_PUNCT && o.s[0] == '('))
                    return si_fail(L, o.line, "bad .attribute", o);
                if (si_is(si_peek(L), ".managed"))
                    managed = true;
                if (!si_skip_group(L, '(', ')'))
                    return si_fail(L, o.line, "bad .attribute", o);
            }
            continue;
        }
        if (t.t != TK_IDENT)
            return si_fail(L, t.line, "unexpected token in variable declaration", t);
        /* a declarator: name [dims] [= init] */
        si_tok name = t;
        if (!elem)
            return si_fail(L, t.line, "variable without a type", t);
        size_t count = 1;
        bool unsized = false;
        for (;;) {
            si_tok b = si_peek(L);
            if (!(b.t == TK_PUNCT && b.s[0] == '['))
                break;
            si_next(L);
            si_tok n = si_next(L);
            if (n.t == TK_PUNCT && n.s[0] == ']') {
                unsized = true;
                continue;
            }
            unsigned long long v = 0;
            if (!si_parse_uint(n, &v) || v == 0)
                return si_fail(L, n.line, "bad array size", n);
            si_tok close = si_next(L);
            if (!(close.t == TK_PUNCT && close.s[0] == ']'))
                return si_fail(L, close.line, "expected ]", close);
            if (__builtin_mul_overflow(count, (size_t)v, &count) || count > ((size_t)1 << 40))
                return si_fail(L, n.line, "array too large", n);
        }
        size_t esz = elem * vec;
        /* initializer values, flattened */
        unsigned char *init = NULL;
        size_t n_init = 0, cap_init = 0;
        si_tok eq = si_peek(L);
        if (eq.t == TK_PUNCT && eq.s[0] == '=') {
            si_next(L);
            int depth = 0;
            bool neg = false;
            for (;;) {
                si_tok v = si_peek(L);
                if (v.t == TK_EOF) {
                    free(init);
                    return si_fail(L, v.line, "unterminated initializer", v);
                }
                if (v.t == TK_PUNCT && depth == 0 && (v.s[0] == ';' || v.s[0] == ','))
                    break;
                si_next(L);
                if (v.t == TK_PUNCT && v.s[0] == '{')
                    depth++;
                else if (v.t == TK_PUNCT && v.s[0] == '}')
                    depth--;
                else if (v.t == TK_PUNCT && v.s[0] == '-')
                    neg = true;
                else if (v.t == TK_NUM || v.t == TK_IDENT) {
                    if (n_init == cap_init) {
                        cap_init = cap_init ? cap_init * 2 : 64;
                        unsigned char *ni = realloc(init, cap_init * elem);
                        if (!ni)
                            abort();
                        init = ni;
                    }
                    memset(init + n_init * elem, 0, elem);
                    /* a symbol's address (generic(x), x) is left as 0 */
                    if (v.t == TK_NUM &&
                        !si_parse_literal(v, neg, fl, elem, init + n_init * elem)) {
                        free(init);
                        return si_fail(L, v.line, "bad initializer", v);
                    }
                    if (v.t == TK_IDENT && si_is(v, "generic")) {
                        si_tok o = si_next(L);
                        if (!(o.t == TK_PUNCT && o.s[0] == '(') || !si_skip_group(L, '(', ')')) {
                            free(init);
                            return si_fail(L, o.line, "bad initializer", o);
                        }
                    }
                    n_init++;
                    neg = false;
                }
            }
        }
        if (unsized)
            count = n_init ? (n_init + vec - 1) / vec : 1;
        size_t size = 0;
        if (__builtin_mul_overflow(esz, count, &size)) {
            free(init);
            return si_fail(L, name.line, "variable too large", name);
        }
        if (is_extern) {
            free(init);
            continue;
        }
        if (si_name_taken(img, name)) {
            free(init);
            return si_fail(L, name.line, "duplicate symbol", name);
        }
        if (img->n_globals == B->cap_globals) {
            B->cap_globals = B->cap_globals ? B->cap_globals * 2 : 8;
            si_gvar *n = realloc(img->globals, B->cap_globals * sizeof(si_gvar));
            if (!n)
                abort();
            img->globals = n;
        }
        si_gvar *g = &img->globals[img->n_globals++];
        memset(g, 0, sizeof(*g));
        g->name = si_tokdup(name);
        g->ref_kind = ref_kind;
        g->managed = managed;
        g->size = size;
        g->align = align ? align : esz;
        if (n_init) {
            size_t bytes = n_init * elem;
            if (bytes > size)
                bytes = size;
            g->init = init;
            g->init_len = bytes;
        } else {
            free(init);
        }
    }
}

/* skips a .func declaration or definition */
static bool si_skip_func(si_lex *L)
{
    for (;;) {
        si_tok t = si_next(L);
        if (t.t == TK_EOF)
            return si_fail(L, t.line, "unterminated .func", t);
        if (t.t == TK_PUNCT && t.s[0] == '(') {
            if (!si_skip_group(L, '(', ')'))
                return false;
        } else if (t.t == TK_PUNCT && t.s[0] == ';') {
            return true;
        } else if (t.t == TK_PUNCT && t.s[0] == '{') {
            return si_skip_group(L, '{', '}');
        }
    }
}

/* skips the rest of a directive's line, and a { } block it opens */
static bool si_skip_directive(si_lex *L, int line)
{
    for (;;) {
        si_tok t = si_peek(L);
        if (t.t == TK_EOF || t.line != line)
            return true;
        si_next(L);
        if (t.t == TK_PUNCT && t.s[0] == '{')
            return si_skip_group(L, '{', '}');
        if (t.t == TK_PUNCT && t.s[0] == ';')
            return true;
    }
}

void si_image_unref(si_image *img)
{
    if (!img || --img->refs > 0)
        return;
    for (size_t i = 0; i < img->n_entries; i++) {
        free(img->entries[i].name);
        free(img->entries[i].params);
    }
    for (size_t i = 0; i < img->n_globals; i++) {
        free(img->globals[i].name);
        free(img->globals[i].init);
    }
    free(img->entries);
    free(img->globals);
    free(img);
}

static CUresult si_parse_ptx(const char *text, size_t len, si_image **out, char *err,
                             size_t errlen)
{
    si_lex L;
    memset(&L, 0, sizeof(L));
    L.p = text;
    L.end = text + len;
    L.line = 1;
    L.err = err;
    L.errlen = errlen;
    si_builder B;
    memset(&B, 0, sizeof(B));
    B.img = si_xcalloc(1, sizeof(si_image));
    B.img->refs = 1;
    bool have_version = false, is_extern = false;
    for (;;) {
        si_tok t = si_next(&L);
        if (t.t == TK_EOF || L.failed)
            break;
        if (t.t == TK_PUNCT && t.s[0] == ';')
            continue;
        if (t.t == TK_PUNCT && t.s[0] == '{') {
            si_skip_group(&L, '{', '}');
            continue;
        }
        if (t.t != TK_DIR) {
            si_fail(&L, t.line, "unexpected token", t);
            break;
        }
        if (!have_version && !si_is(t, ".version")) {
            si_fail(&L, t.line, "missing .version directive", t);
            break;
        }
        if (si_is(t, ".version")) {
            si_tok v = si_next(&L);
            unsigned maj = 0, min = 0;
            char buf[16];
            if (v.t != TK_NUM || v.n >= sizeof(buf)) {
                si_fail(&L, v.line, "bad .version", v);
                break;
            }
            memcpy(buf, v.s, v.n);
            buf[v.n] = '\0';
            if (sscanf(buf, "%u.%u", &maj, &min) != 2) {
                si_fail(&L, v.line, "bad .version", v);
                break;
            }
            if (maj > 9 || (maj == 9 && min > 0)) {
                si_fail(&L, v.line, "unsupported PTX version", v);
                if (err && errlen)
                    snprintf(err, errlen, "ptx line %d: PTX ISA %u.%u is newer than 9.0",
                             v.line, maj, min);
                si_image_unref(B.img);
                return CUDA_ERROR_UNSUPPORTED_PTX_VERSION;
            }
            have_version = true;
            B.img->ptx_version = (int)(maj * 10 + min);
        } else if (si_is(t, ".target")) {
            si_tok v = si_next(&L);
            if (v.t == TK_IDENT && v.n > 3 && memcmp(v.s, "sm_", 3) == 0)
                B.img->target_sm = atoi(v.s + 3);
            si_skip_directive(&L, t.line);
        } else if (si_is(t, ".visible") || si_is(t, ".weak") || si_is(t, ".common")) {
            continue;
        } else if (si_is(t, ".extern")) {
            is_extern = true;
            continue;
        } else if (si_is(t, ".entry")) {
            si_parse_entry(&L, &B, is_extern);
        } else if (si_is(t, ".func")) {
            si_skip_func(&L);
        } else if (si_is(t, ".global") || si_is(t, ".const")) {
            si_parse_var(&L, &B, is_extern);
        } else if (si_is(t, ".shared") || si_is(t, ".local") || si_is(t, ".alias")) {
            for (;;) {
                si_tok x = si_next(&L);
                if (x.t == TK_EOF || (x.t == TK_PUNCT && x.s[0] == ';'))
                    break;
            }
        } else {
            si_skip_directive(&L, t.line);
        }
        is_extern = false;
    }
    if (!L.failed && !have_version) {
        L.failed = true;
        if (err && errlen)
            snprintf(err, errlen, "ptx: missing .version directive");
    }
    if (L.failed) {
        si_image_unref(B.img);
        return CUDA_ERROR_INVALID_PTX;
    }
    *out = B.img;
    return CUDA_SUCCESS;
}

#define SI_FATBIN_WRAPPER_MAGIC 0x466243b1u
#define SI_FATBIN_MAGIC 0xBA55ED50u
#define SI_FATBIN_KIND_PTX 1
#define SI_FATBIN_COMPRESSED 0xA000u /* 0x2000: LZ4 (CUDA 11), 0x8000: ZSTD */

/* 1: a fatbin with an uncompressed PTX entry (*ptx, *len set),
 * 0: a fatbin without one (or cudart's wrapper), -1: not a fatbin */
static int si_fatbin_ptx(const unsigned char *img, const char **ptx, size_t *len)
{
    uint32_t magic;
    memcpy(&magic, img, 4);
    if (magic == SI_FATBIN_WRAPPER_MAGIC)
        return 0; /* cudart's __fatBinC_Wrapper_t: the driver wants the fatbin itself */
    if (magic != SI_FATBIN_MAGIC)
        return -1;
    uint16_t hsize;
    uint64_t fsize;
    memcpy(&hsize, img + 6, 2);
    memcpy(&fsize, img + 8, 8);
    if (hsize < 16 || fsize > ((uint64_t)1 << 34))
        return 0;
    const unsigned char *p = img + hsize, *end = p + fsize;
    while ((size_t)(end - p) >= 64) {
        uint16_t kind;
        uint32_t ehs, csize;
        uint64_t padded, flags;
        memcpy(&kind, p, 2);
        memcpy(&ehs, p + 4, 4);
        memcpy(&padded, p + 8, 8);
        memcpy(&csize, p + 16, 4);
        memcpy(&flags, p + 40, 8);
        if (ehs < 64 || ehs > (size_t)(end - p) || padded > (uint64_t)(end - p - ehs))
            return 0;
        const unsigned char *payload = p + ehs;
        if (kind == SI_FATBIN_KIND_PTX && !(flags & SI_FATBIN_COMPRESSED) && csize == 0) {
            *ptx = (const char *)payload;
            *len = strnlen((const char *)payload, (size_t)padded);
            return 1;
        }
        p = payload + padded;
    }
    return 0;
}

CUresult si_image_parse(const void *image, si_image **out, char *err, size_t errlen)
{
    if (err && errlen)
        err[0] = '\0';
    if (!image)
        return CUDA_ERROR_INVALID_VALUE;
    const unsigned char *b = image;
    if (b[0] == 0x7f && b[1] == 'E' && b[2] == 'L' && b[3] == 'F') {
        if (err && errlen)
            snprintf(err, errlen, "standin: cubin (ELF) images are not supported, only PTX");
        return CUDA_ERROR_INVALID_IMAGE;
    }
    const char *ptx = NULL;
    size_t len = 0;
    int fb = si_fatbin_ptx(b, &ptx, &len);
    if (fb == 0) {
        if (err && errlen)
            snprintf(err, errlen, "standin: fatbin without an uncompressed PTX entry");
        return CUDA_ERROR_INVALID_IMAGE;
    }
    if (fb < 0) {
        ptx = (const char *)b;
        len = strlen(ptx);
    }
    /* text? (first non-blank byte printable ASCII) */
    size_t i = 0;
    while (i < len && isspace((unsigned char)ptx[i]))
        i++;
    if (i == len || (unsigned char)ptx[i] >= 0x80 || !isprint((unsigned char)ptx[i])) {
        if (err && errlen)
            snprintf(err, errlen, "standin: image is neither PTX text nor a fatbin");
        return CUDA_ERROR_INVALID_IMAGE;
    }
    return si_parse_ptx(ptx, len, out, err, errlen);
}

/* ------------------------------------------------------------------ */
/* modules                                                             */

void si_func_default_attrs(si_func_attrs *a)
{
    memset(a, 0, sizeof(*a));
    a->max_dyn_shmem = SI_DEFAULT_MAX_DYN_SHMEM;
    a->carveout = -1;
    a->cache_config = CU_FUNC_CACHE_PREFER_NONE;
}

CUresult si_module_create(si_ctx *c, si_image *img, si_library *lib, si_module **out)
{
    si_module *m = si_xcalloc(1, sizeof(*m));
    m->id = si_next_id();
    m->ctx = c;
    m->image = img;
    img->refs++;
    m->library = lib;
    m->funcs = si_xcalloc(img->n_entries ? img->n_entries : 1, sizeof(si_func));
    m->globals = si_xcalloc(img->n_globals ? img->n_globals : 1, sizeof(si_alloc *));
    for (size_t i = 0; i < img->n_globals; i++) {
        si_gvar *g = &img->globals[i];
        CUresult rc = si_dev_alloc(c, g->size, SI_AK_GLOBAL, m, &m->globals[i]);
        if (rc) {
            for (size_t j = 0; j < i; j++)
                si_alloc_release(m->globals[j]);
            free(m->globals);
            free(m->funcs);
            si_image_unref(img);
            free(m);
            return rc;
        }
        if (g->init_len)
            memcpy((void *)m->globals[i]->base, g->init, g->init_len);
    }
    for (size_t i = 0; i < img->n_entries; i++) {
        si_func *f = &m->funcs[i];
        f->id = si_next_id();
        f->module = m;
        f->entry = &img->entries[i];
        if (lib && lib->kernels[i].attrs_set)
            f->attrs = lib->kernels[i].attrs;
        else
            si_func_default_attrs(&f->attrs);
        si_hset_add(&si_g.funcs, f);
    }
    m->next_all = si_g.module_list;
    si_g.module_list = m;
    si_hset_add(&si_g.modules, m);
    *out = m;
    return CUDA_SUCCESS;
}

void si_module_destroy(si_module *m)
{
    for (si_module **pp = &si_g.module_list; *pp; pp = &(*pp)->next_all)
        if (*pp == m) {
            *pp = m->next_all;
            break;
        }
    si_hset_del(&si_g.modules, m);
    si_module_refs_free(m);
    for (size_t i = 0; i < m->image->n_entries; i++)
        si_hset_del(&si_g.funcs, &m->funcs[i]);
    for (size_t i = 0; i < m->image->n_globals; i++)
        if (m->globals[i])
            si_alloc_release(m->globals[i]);
    si_image_unref(m->image);
    free(m->funcs);
    free(m->globals);
    free(m);
}

void si_destroy_ctx_modules(si_ctx *c)
{
    si_module *m = si_g.module_list;
    while (m) {
        si_module *next = m->next_all;
        if (m->ctx == c)
            si_module_destroy(m);
        m = next;
    }
}

/* JIT options: CU_JIT_WALL_TIME and the log buffers are answered */
static CUresult si_jit_check(unsigned n, const CUjit_option *opts, void **vals)
{
    if (n && (!opts || !vals))
        return CUDA_ERROR_INVALID_VALUE;
    for (unsigned i = 0; i < n; i++)
        if ((unsigned)opts[i] >= CU_JIT_NUM_OPTIONS)
            return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}

static void si_jit_answer(unsigned n, const CUjit_option *opts, void **vals, const char *err)
{
    size_t info_size = 0, err_size = 0;
    for (unsigned i = 0; i < n; i++) {
        if (opts[i] == CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES)
            info_size = (size_t)(uintptr_t)vals[i];
        if (opts[i] == CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES)
            err_size = (size_t)(uintptr_t)vals[i];
    }
    size_t info_used = 0, err_used = 0;
    for (unsigned i = 0; i < n; i++) {
        if (opts[i] == CU_JIT_WALL_TIME) {
            float f = 0.0f;
            memcpy(&vals[i], &f, sizeof(f));
        } else if (opts[i] == CU_JIT_INFO_LOG_BUFFER && vals[i] && info_size) {
            ((char *)vals[i])[0] = '\0';
        } else if (opts[i] == CU_JIT_ERROR_LOG_BUFFER && vals[i] && err_size) {
            snprintf((char *)vals[i], err_size, "%s", err ? err : "");
            err_used = strlen((char *)vals[i]);
        }
    }
    for (unsigned i = 0; i < n; i++) {
        if (opts[i] == CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES)
            vals[i] = (void *)(uintptr_t)info_used;
        if (opts[i] == CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES)
            vals[i] = (void *)(uintptr_t)err_used;
    }
}

static CUresult si_module_load(CUmodule *module, const void *image, unsigned n,
                               CUjit_option *opts, void **vals)
{
    si_ctx *c = NULL;
    CUresult rc = si_get_ctx(&c);
    if (rc)
        return rc;
    if (!module || !image)
        return CUDA_ERROR_INVALID_VALUE;
    rc = si_jit_check(n, opts, vals);
    if (rc)
        return rc;
    char err[256];
    si_image *img = NULL;
    rc = si_image_parse(image, &img, err, sizeof(err));
    if (n)
        si_jit_answer(n, opts, vals, rc ? err : NULL);
    if (rc)
        return rc;
    si_module *m = NULL;
    rc = si_module_create(c, img, NULL, &m);
    si_image_unref(img);
    if (rc)
        return rc;
    si_flush_printf(c);
    *module = (CUmodule)m;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuModuleLoadData(CUmodule *module, const void *image)
{
    si_enter();
    CUresult rc = si_module_load(module, image, 0, NULL, NULL);
    si_leave();
    return rc;
}

CUresult CUDAAPI cuModuleLoadDataEx(CUmodule *module, const void *image, unsigned int numOptions,
                                    CUjit_option *options, void **optionValues)
{
    si_enter();
    CUresult rc = si_module_load(module, image, numOptions, options, optionValues);
    si_leave();
    return rc;
}

CUresult CUDAAPI cuModuleLoadFatBinary(CUmodule *module, const void *fatCubin)
{
    si_enter();
    CUresult rc = si_module_load(module, fatCubin, 0, NULL, NULL);
    si_leave();
    return rc;
}

/* reads a whole file, NUL-terminated */
static CUresult si_read_file(const char *path, char **out)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return CUDA_ERROR_FILE_NOT_FOUND;
    size_t cap = 1 << 16, len = 0;
    char *buf = si_xcalloc(cap, 1);
    for (;;) {
        if (len + 1 >= cap) {
            cap *= 2;
            char *n = realloc(buf, cap);
            if (!n)
                abort();
            buf = n;
        }
        size_t got = fread(buf + len, 1, cap - len - 1, f);
        if (got == 0)
            break;
        len += got;
    }
    bool bad = ferror(f);
    fclose(f);
    if (bad) {
        free(buf);
        return CUDA_ERROR_FILE_NOT_FOUND;
    }
    buf[len] = '\0';
    *out = buf;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuModuleLoad(CUmodule *module, const char *fname)
{
    si_enter();
    si_ctx *c = NULL;
    CUresult rc = si_get_ctx(&c);
    if (!rc && (!module || !fname))
        rc = CUDA_ERROR_INVALID_VALUE;
    char *text = NULL;
    if (!rc)
        rc = si_read_file(fname, &text);
    if (!rc)
        rc = si_module_load(module, text, 0, NULL, NULL);
    free(text);
    si_leave();
    return rc;
}

CUresult CUDAAPI cuModuleUnload(CUmodule hmod)
{
    si_enter();
    CUresult rc = si_check_init();
    si_module *m = (si_module *)hmod;
    if (!rc && !si_hset_has(&si_g.modules, m))
        rc = CUDA_ERROR_INVALID_HANDLE;
    if (!rc && m->library)
        rc = CUDA_ERROR_NOT_PERMITTED; /* owned by its library */
    if (!rc && si_g.sticky)
        rc = si_g.sticky;
    if (!rc && si_in_callback)
        rc = CUDA_ERROR_NOT_PERMITTED;
    if (!rc) {
        uint64_t id = m->id;
        si_ctx *c = m->ctx;
        si_dev_wait_idle(c->dev);
        if (si_hset_has(&si_g.modules, m) && m->id == id)
            si_module_destroy(m);
        si_flush_printf(c);
    }
    si_leave();
    return rc;
}

static si_func *si_module_func(si_module *m, const char *name)
{
    for (size_t i = 0; i < m->image->n_entries; i++)
        if (strcmp(m->image->entries[i].name, name) == 0)
            return &m->funcs[i];
    return NULL;
}

CUresult CUDAAPI cuModuleGetFunction(CUfunction *hfunc, CUmodule hmod, const char *name)
{
    si_enter();
    CUresult rc = si_check_init();
    si_module *m = (si_module *)hmod;
    if (!rc && (!hfunc || !name))
        rc = CUDA_ERROR_INVALID_VALUE;
    if (!rc && !si_hset_has(&si_g.modules, m))
        rc = CUDA_ERROR_INVALID_HANDLE;
    if (!rc) {
        si_func *f = si_module_func(m, name);
        if (!f)
            rc = CUDA_ERROR_NOT_FOUND;
        else
            *hfunc = (CUfunction)f;
    }
    si_leave();
    return rc;
}

/* managed_only: as cuLibraryGetManaged, which finds only __managed__
 * variables (.attribute(.managed)). */
static CUresult si_module_var(si_module *m, const char *name, CUdeviceptr *dptr, size_t *bytes, bool managed_only)
{
    for (size_t i = 0; i < m->image->n_globals; i++)
        if (strcmp(m->image->globals[i].name, name) == 0 && (!managed_only || m->image->globals[i].managed)) {
            if (dptr)
                *dptr = (CUdeviceptr)m->globals[i]->base;
            if (bytes)
                *bytes = m->image->globals[i].size;
            return CUDA_SUCCESS;
        }
    return CUDA_ERROR_NOT_FOUND;
}

CUresult si_module_global(si_module *m, const char *name, CUdeviceptr *dptr, size_t *bytes)
{
    return si_module_var(m, name, dptr, bytes, false);
}

CUresult CUDAAPI cuModuleGetGlobal_v2(CUdeviceptr *dptr, size_t *bytes, CUmodule hmod,
                                      const char *name)
{
    SI_V2_GUARD();
    si_enter();
    CUresult rc = si_check_init();
    si_module *m = (si_module *)hmod;
    if (!rc && !name)
        rc = CUDA_ERROR_INVALID_VALUE;
    if (!rc && !si_hset_has(&si_g.modules, m))
        rc = CUDA_ERROR_INVALID_HANDLE;
    if (!rc)
        rc = si_module_global(m, name, dptr, bytes);
    si_leave();
    return rc;
}

CUresult CUDAAPI cuModuleGetFunctionCount(unsigned int *count, CUmodule mod)
{
    si_enter();
    CUresult rc = si_check_init();
    si_module *m = (si_module *)mod;
    if (!rc && !count)
        rc = CUDA_ERROR_INVALID_VALUE;
    if (!rc && !si_hset_has(&si_g.modules, m))
        rc = CUDA_ERROR_INVALID_HANDLE;
    if (!rc)
        *count = (unsigned)m->image->n_entries;
    si_leave();
    return rc;
}

CUresult CUDAAPI cuModuleEnumerateFunctions(CUfunction *functions, unsigned int numFunctions,
                                            CUmodule mod)
{
    si_enter();
    CUresult rc = si_check_init();
    si_module *m = (si_module *)mod;
    if (!rc && !functions)
        rc = CUDA_ERROR_INVALID_VALUE;
    if (!rc && !si_hset_has(&si_g.modules, m))
        rc = CUDA_ERROR_INVALID_HANDLE;
    if (!rc)
        for (size_t i = 0; i < m->image->n_entries && i < numFunctions; i++)
            functions[i] = (CUfunction)&m->funcs[i];
    si_leave();
    return rc;
}

CUresult CUDAAPI cuModuleGetLoadingMode(CUmoduleLoadingMode *mode)
{
    CUresult rc = si_check_init();
    if (rc)
        return rc;
    if (!mode)
        return CUDA_ERROR_INVALID_VALUE;
    /* as the driver: lazy unless the environment asks for eager */
    const char *env = getenv("CUDA_MODULE_LOADING");
    *mode = env && strcmp(env, "EAGER") == 0 ? CU_MODULE_EAGER_LOADING : CU_MODULE_LAZY_LOADING;
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------------ */
/* functions                                                           */

static si_module *si_library_module(si_library *lib, si_ctx *c, CUresult *rc)
{
    for (si_module *m = si_g.module_list; m; m = m->next_all)
        if (m->library == lib && m->ctx == c)
            return m;
    si_module *m = NULL;
    *rc = si_module_create(c, lib->image, lib, &m);
    return *rc ? NULL : m;
}

CUresult si_resolve_func(CUfunction h, si_ctx *c, si_func **out)
{
    if (si_hset_has(&si_g.funcs, h)) {
        *out = (si_func *)h;
        return CUDA_SUCCESS;
    }
    si_kernel *k = (si_kernel *)h;
    if (!si_hset_has(&si_g.kernels, k))
        return CUDA_ERROR_INVALID_HANDLE;
    if (!c)
        return CUDA_ERROR_INVALID_CONTEXT;
    CUresult rc = CUDA_SUCCESS;
    si_module *m = si_library_module(k->library, c, &rc);
    if (!m)
        return rc;
    *out = &m->funcs[k->index];
    return CUDA_SUCCESS;
}

/* a function handle argument (a CUkernel is accepted as well) */
static CUresult si_func_arg(CUfunction h, si_func **out)
{
    CUresult rc = si_check_init();
    if (rc)
        return rc;
    return si_resolve_func(h, si_current(), out);
}

CUresult si_func_get_attr(const si_entry *e, const si_image *img, const si_func_attrs *a,
                          CUfunction_attribute attr, int *out)
{
    switch (attr) {
    case CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *out = (int)e->max_threads; break;
    case CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES: *out = 0; break;
    case CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES: *out = 0; break;
    case CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES: *out = 0; break;
    case CU_FUNC_ATTRIBUTE_NUM_REGS: *out = 16; break;
    case CU_FUNC_ATTRIBUTE_PTX_VERSION: *out = img->target_sm ? img->target_sm : 52; break;
    case CU_FUNC_ATTRIBUTE_BINARY_VERSION: *out = 90; break;
    case CU_FUNC_ATTRIBUTE_CACHE_MODE_CA: *out = 0; break;
    case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES: *out = a->max_dyn_shmem; break;
    case CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT: *out = a->carveout; break;
    case CU_FUNC_ATTRIBUTE_CLUSTER_SIZE_MUST_BE_SET: *out = 0; break;
    case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH: *out = a->cluster_w; break;
    case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT: *out = a->cluster_h; break;
    case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH: *out = a->cluster_d; break;
    case CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED: *out = a->non_portable_cluster; break;
    case CU_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE: *out = a->cluster_sched; break;
    default: return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}

CUresult si_func_set_attr(si_func_attrs *a, CUfunction_attribute attr, int v)
{
    switch (attr) {
    case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES:
        if (v < 0 || v > SI_MAX_DYN_SHMEM_OPTIN)
            return CUDA_ERROR_INVALID_VALUE;
        a->max_dyn_shmem = v;
        break;
    case CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT:
        if (v < -1 || v > 100)
            return CUDA_ERROR_INVALID_VALUE;
        a->carveout = v;
        break;
    case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH:
    case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT:
    case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH:
        if (v < 0 || v > 16)
            return CUDA_ERROR_INVALID_VALUE;
        if (attr == CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH)
            a->cluster_w = v;
        else if (attr == CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT)
            a->cluster_h = v;
        else
            a->cluster_d = v;
        break;
    case CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED:
        if (v != 0 && v != 1)
            return CUDA_ERROR_INVALID_VALUE;
        a->non_portable_cluster = v;
        break;
    case CU_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE:
        if (v < 0 || v > 2)
            return CUDA_ERROR_INVALID_VALUE;
        a->cluster_sched = v;
        break;
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuFuncGetAttribute(int *pi, CUfunction_attribute attrib, CUfunction hfunc)
{
    si_enter();
    si_func *f = NULL;
    CUresult rc = si_func_arg(hfunc, &f);
    if (!rc && !pi)
        rc = CUDA_ERROR_INVALID_VALUE;
    if (!rc)
        rc = si_func_get_attr(f->entry, f->module->image, &f->attrs, attrib, pi);
    si_leave();
    return rc;
}

CUresult CUDAAPI cuFuncSetAttribute(CUfunction hfunc, CUfunction_attribute attrib, int value)
{
    si_enter();
    si_func *f = NULL;
    CUresult rc = si_func_arg(hfunc, &f);
    if (!rc)
        rc = si_func_set_attr(&f->attrs, attrib, value);
    si_leave();
    return rc;
}

/* The pre-CUDA-4 binding of a texture reference to a function's launch:
 * only the default unit exists; the reference reads what its module binds
 * (as on the driver), so the stand-in checks and keeps nothing more. */
CUresult CUDAAPI cuParamSetTexRef(CUfunction hfunc, int texunit, CUtexref hTexRef)
{
    si_enter();
    si_func *f = NULL;
    CUresult rc = si_func_arg(hfunc, &f);
    if (!rc && texunit != CU_PARAM_TR_DEFAULT)
        rc = CUDA_ERROR_INVALID_VALUE;
    if (!rc && !si_texref_live(hTexRef))
        rc = CUDA_ERROR_INVALID_HANDLE;
    si_leave();
    return rc;
}

CUresult CUDAAPI cuFuncSetCacheConfig(CUfunction hfunc, CUfunc_cache config)
{
    si_enter();
    si_func *f = NULL;
    CUresult rc = si_func_arg(hfunc, &f);
    if (!rc && (unsigned)config > CU_FUNC_CACHE_PREFER_EQUAL)
        rc = CUDA_ERROR_INVALID_VALUE;
    if (!rc)
        f->attrs.cache_config = config;
    si_leave();
    return rc;
}

CUresult CUDAAPI cuFuncGetName(const char **name, CUfunction hfunc)
{
    si_enter();
    si_func *f = NULL;
    CUresult rc = si_func_arg(hfunc, &f);
    if (!rc && !name)
        rc = CUDA_ERROR_INVALID_VALUE;
    if (!rc)
        *name = f->entry->name;
    si_leave();
    return rc;
}

/* STANDIN_NO_PARAM_INFO=1 plays a driver that cannot report parameter
 * layouts (older than CUDA 12.4): both queries answer NOT_SUPPORTED. */
static CUresult si_param_info(const si_entry *e, size_t idx, size_t *off, size_t *size)
{
    const char *no_info = getenv("STANDIN_NO_PARAM_INFO");
    if (no_info && strcmp(no_info, "1") == 0)
        return CUDA_ERROR_NOT_SUPPORTED;
    if (!off || idx >= e->n_params)
        return CUDA_ERROR_INVALID_VALUE;
    *off = e->params[idx].offset;
    if (size)
        *size = e->params[idx].size;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuFuncGetParamInfo(CUfunction func, size_t paramIndex, size_t *paramOffset,
                                    size_t *paramSize)
{
    si_enter();
    si_func *f = NULL;
    CUresult rc = si_func_arg(func, &f);
    if (!rc)
        rc = si_param_info(f->entry, paramIndex, paramOffset, paramSize);
    si_leave();
    return rc;
}

CUresult CUDAAPI cuFuncGetModule(CUmodule *hmod, CUfunction hfunc)
{
    si_enter();
    si_func *f = NULL;
    CUresult rc = si_func_arg(hfunc, &f);
    if (!rc && !hmod)
        rc = CUDA_ERROR_INVALID_VALUE;
    if (!rc)
        *hmod = (CUmodule)f->module;
    si_leave();
    return rc;
}

CUresult CUDAAPI cuFuncIsLoaded(CUfunctionLoadingState *state, CUfunction function)
{
    si_enter();
    si_func *f = NULL;
    CUresult rc = si_func_arg(function, &f);
    if (!rc && !state)
        rc = CUDA_ERROR_INVALID_VALUE;
    if (!rc)
        *state = CU_FUNCTION_LOADING_STATE_LOADED;
    si_leave();
    return rc;
}

CUresult CUDAAPI cuFuncLoad(CUfunction function)
{
    si_enter();
    si_func *f = NULL;
    CUresult rc = si_func_arg(function, &f);
    si_leave();
    return rc;
}

/* ------------------------------------------------------------------ */
/* libraries and kernels                                               */

static CUresult si_library_load(CUlibrary *library, const void *code, unsigned nj,
                                CUjit_option *jo, void **jv, unsigned nl,
                                CUlibraryOption *lo, void **lv)
{
    CUresult rc = si_check_init();
    if (rc)
        return rc;
    if (!library || !code)
        return CUDA_ERROR_INVALID_VALUE;
    if (nl && (!lo || !lv))
        return CUDA_ERROR_INVALID_VALUE;
    for (unsigned i = 0; i < nl; i++)
        if ((unsigned)lo[i] >= CU_LIBRARY_NUM_OPTIONS)
            return CUDA_ERROR_INVALID_VALUE;
    rc = si_jit_check(nj, jo, jv);
    if (rc)
        return rc;
    char err[256];
    si_image *img = NULL;
    rc = si_image_parse(code, &img, err, sizeof(err));
    if (nj)
        si_jit_answer(nj, jo, jv, rc ? err : NULL);
    if (rc)
        return rc;
    si_library *lib = si_xcalloc(1, sizeof(*lib));
    lib->id = si_next_id();
    lib->image = img;
    lib->kernels = si_xcalloc(img->n_entries ? img->n_entries : 1, sizeof(si_kernel));
    for (size_t i = 0; i < img->n_entries; i++) {
        si_kernel *k = &lib->kernels[i];
        k->id = si_next_id();
        k->library = lib;
        k->index = i;
        si_func_default_attrs(&k->attrs);
        si_hset_add(&si_g.kernels, k);
    }
    lib->next_all = si_g.library_list;
    si_g.library_list = lib;
    si_hset_add(&si_g.libraries, lib);
    *library = (CUlibrary)lib;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuLibraryLoadData(CUlibrary *library, const void *code, CUjit_option *jitOptions,
                                   void **jitOptionsValues, unsigned int numJitOptions,
                                   CUlibraryOption *libraryOptions, void **libraryOptionValues,
                                   unsigned int numLibraryOptions)
{
    si_enter();
    CUresult rc = si_library_load(library, code, numJitOptions, jitOptions, jitOptionsValues,
                                  numLibraryOptions, libraryOptions, libraryOptionValues);
    si_leave();
    return rc;
}

CUresult CUDAAPI cuLibraryLoadFromFile(CUlibrary *library, const char *fileName,
                                       CUjit_option *jitOptions, void **jitOptionsValues,
                                       unsigned int numJitOptions, CUlibraryOption *libraryOptions,
                                       void **libraryOptionValues, unsigned int numLibraryOptions)
{
    si_enter();
    CUresult rc = si_check_init();
    if (!rc && (!library || !fileName))
        rc = CUDA_ERROR_INVALID_VALUE;
    char *text = NULL;
    if (!rc)
        rc = si_read_file(fileName, &text);
    if (!rc)
        rc = si_library_load(library, text, numJitOptions, jitOptions, jitOptionsValues,
                             numLibraryOptions, libraryOptions, libraryOptionValues);
    free(text);
    si_leave();
    return rc;
}

CUresult CUDAAPI cuLibraryUnload(CUlibrary library)
{
    si_enter();
    CUresult rc = si_check_init();
    si_library *lib = (si_library *)library;
    if (!rc && !si_hset_has(&si_g.libraries, lib))
        rc = CUDA_ERROR_INVALID_HANDLE;
    if (!rc && si_in_callback)
        rc = CUDA_ERROR_NOT_PERMITTED;
    if (!rc) {
        si_dev_wait_idle(-1);
        si_module *m = si_g.module_list;
        while (m) {
            si_module *next = m->next_all;
            if (m->library == lib)
                si_module_destroy(m);
            m = next;
        }
        for (si_library **pp = &si_g.library_list; *pp; pp = &(*pp)->next_all)
            if (*pp == lib) {
                *pp = lib->next_all;
                break;
            }
        si_hset_del(&si_g.libraries, lib);
        for (size_t i = 0; i < lib->image->n_entries; i++)
            si_hset_del(&si_g.kernels, &lib->kernels[i]);
        si_image_unref(lib->image);
        free(lib->kernels);
        free(lib);
    }
    si_leave();
    return rc;
}

static CUresult si_lib_arg(CUlibrary h, si_library **out)
{
    CUresult rc = si_check_init();
    if (rc)
        return rc;
    if (!si_hset_has(&si_g.libraries, h))
        return CUDA_ERROR_INVALID_HANDLE;
    *out = (si_library *)h;
    return CUDA_SUCCESS;
}

static CUresult si_kernel_arg(CUkernel h, si_kernel **out)
{
    CUresult rc = si_check_init();
    if (rc)
        return rc;
    if (!si_hset_has(&si_g.kernels, h))
        return CUDA_ERROR_INVALID_HANDLE;
    *out = (si_kernel *)h;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuLibraryGetKernel(CUkernel *pKernel, CUlibrary library, const char *name)
{
    si_enter();
    si_library *lib = NULL;
    CUresult rc = si_lib_arg(library, &lib);
    if (!rc && (!pKernel || !name))
        rc = CUDA_ERROR_INVALID_VALUE;
    if (!rc) {
        rc = CUDA_ERROR_NOT_FOUND;
        for (size_t i = 0; i < lib->image->n_entries; i++)
            if (strcmp(lib->image->entries[i].name, name) == 0) {
                *pKernel = (CUkernel)&lib->kernels[i];
                rc = CUDA_SUCCESS;
                break;
            }
    }
    si_leave();
    return rc;
}

CUresult CUDAAPI cuLibraryGetKernelCount(unsigned int *count, CUlibrary lib)
{
    si_enter();
    si_library *l = NULL;
    CUresult rc = si_lib_arg(lib, &l);
    if (!rc && !count)
        rc = CUDA_ERROR_INVALID_VALUE;
    if (!rc)
        *count = (unsigned)l->image->n_entries;
    si_leave();
    return rc;
}

CUresult CUDAAPI cuLibraryEnumerateKernels(CUkernel *kernels, unsigned int numKernels,
                                           CUlibrary lib)
{
    si_enter();
    si_library *l = NULL;
    CUresult rc = si_lib_arg(lib, &l);
    if (!rc && !kernels)
        rc = CUDA_ERROR_INVALID_VALUE;
    /* Driver 580 lists a library's kernels in the reverse of its modules'
     * order (the order of the .entry definitions): the same here. */
    size_t n = rc ? 0 : l->image->n_entries;
    for (size_t i = 0; i < n && i < numKernels; i++)
        kernels[i] = (CUkernel)&l->kernels[n - 1 - i];
    si_leave();
    return rc;
}

CUresult CUDAAPI cuLibraryGetModule(CUmodule *pMod, CUlibrary library)
{
    si_enter();
    si_library *lib = NULL;
    CUresult rc = si_lib_arg(library, &lib);
    si_ctx *c = NULL;
    if (!rc && !pMod)
        rc = CUDA_ERROR_INVALID_VALUE;
    if (!rc)
        rc = si_get_ctx(&c);
    if (!rc) {
        si_module *m = si_library_module(lib, c, &rc);
        if (m)
            *pMod = (CUmodule)m;
    }
    si_leave();
    return rc;
}

CUresult CUDAAPI cuLibraryGetGlobal(CUdeviceptr *dptr, size_t *bytes, CUlibrary library,
                                    const char *name)
{
    si_enter();
    si_library *lib = NULL;
    CUresult rc = si_lib_arg(library, &lib);
    si_ctx *c = NULL;
    if (!rc && !name)
        rc = CUDA_ERROR_INVALID_VALUE;
    if (!rc)
        rc = si_get_ctx(&c);
    if (!rc) {
        si_module *m = si_library_module(lib, c, &rc);
        if (m)
            rc = si_module_global(m, name, dptr, bytes);
    }
    si_leave();
    return rc;
}

/* The stand-in's managed variables are ordinary module globals: its
 * device memory is host memory already. */
CUresult CUDAAPI cuLibraryGetManaged(CUdeviceptr *dptr, size_t *bytes, CUlibrary library, const char *name)
{
    si_enter();
    si_library *lib = NULL;
    CUresult rc = si_lib_arg(library, &lib);
    si_ctx *c = NULL;
    if (!rc && !name)
        rc = CUDA_ERROR_INVALID_VALUE;
    if (!rc)
        rc = si_get_ctx(&c);
    if (!rc) {
        si_module *m = si_library_module(lib, c, &rc);
        if (m)
            rc = si_module_var(m, name, dptr, bytes, true);
    }
    si_leave();
    return rc;
}

CUresult CUDAAPI cuKernelGetFunction(CUfunction *pFunc, CUkernel kernel)
{
    si_enter();
    si_kernel *k = NULL;
    CUresult rc = si_kernel_arg(kernel, &k);
    si_ctx *c = NULL;
    if (!rc && !pFunc)
        rc = CUDA_ERROR_INVALID_VALUE;
    if (!rc)
        rc = si_get_ctx(&c);
    si_func *f = NULL;
    if (!rc)
        rc = si_resolve_func((CUfunction)k, c, &f);
    if (!rc)
        *pFunc = (CUfunction)f;
    si_leave();
    return rc;
}

CUresult CUDAAPI cuKernelGetLibrary(CUlibrary *pLib, CUkernel kernel)
{
    si_enter();
    si_kernel *k = NULL;
    CUresult rc = si_kernel_arg(kernel, &k);
    if (!rc && !pLib)
        rc = CUDA_ERROR_INVALID_VALUE;
    if (!rc)
        *pLib = (CUlibrary)k->library;
    si_leave();
    return rc;
}

CUresult CUDAAPI cuKernelGetName(const char **name, CUkernel hfunc)
{
    si_enter();
    si_kernel *k = NULL;
    CUresult rc = si_kernel_arg(hfunc, &k);
    if (!rc && !name)
        rc = CUDA_ERROR_INVALID_VALUE;
    if (!rc)
        *name = k->library->image->entries[k->index].name;
    si_leave();
    return rc;
}

CUresult CUDAAPI cuKernelGetParamInfo(CUkernel kernel, size_t paramIndex, size_t *paramOffset,
                                      size_t *paramSize)
{
    si_enter();
    si_kernel *k = NULL;
    CUresult rc = si_kernel_arg(kernel, &k);
    /* With a context current, driver 580 loads the library into it first,
     * placing its globals, as cuKernelGetFunction does (measured on an
     * H200); without one it answers from the image. */
    si_ctx *c = rc ? NULL : si_current();
    if (c)
        si_library_module(k->library, c, &rc);
    if (!rc)
        rc = si_param_info(&k->library->image->entries[k->index], paramIndex, paramOffset,
                           paramSize);
    si_leave();
    return rc;
}

CUresult CUDAAPI cuKernelGetAttribute(int *pi, CUfunction_attribute attrib, CUkernel kernel,
                                      CUdevice dev)
{
    si_enter();
    si_kernel *k = NULL;
    CUresult rc = si_kernel_arg(kernel, &k);
    if (!rc)
        rc = si_device_check(dev);
    if (!rc && !pi)
        rc = CUDA_ERROR_INVALID_VALUE;
    if (!rc)
        rc = si_func_get_attr(&k->library->image->entries[k->index], k->library->image, &k->attrs,
                              attrib, pi);
    si_leave();
    return rc;
}

CUresult CUDAAPI cuKernelSetAttribute(CUfunction_attribute attrib, int val, CUkernel kernel,
                                      CUdevice dev)
{
    si_enter();
    si_kernel *k = NULL;
    CUresult rc = si_kernel_arg(kernel, &k);
    if (!rc)
        rc = si_device_check(dev);
    if (!rc)
        rc = si_func_set_attr(&k->attrs, attrib, val);
    if (!rc) {
        k->attrs_set = true;
        /* functions already made from this kernel follow it */
        for (si_module *m = si_g.module_list; m; m = m->next_all)
            if (m->library == k->library && m->ctx->dev == dev)
                si_func_set_attr(&m->funcs[k->index].attrs, attrib, val);
    }
    si_leave();
    return rc;
}

CUresult CUDAAPI cuKernelSetCacheConfig(CUkernel kernel, CUfunc_cache config, CUdevice dev)
{
    si_enter();
    si_kernel *k = NULL;
    CUresult rc = si_kernel_arg(kernel, &k);
    if (!rc)
        rc = si_device_check(dev);
    if (!rc && (unsigned)config > CU_FUNC_CACHE_PREFER_EQUAL)
        rc = CUDA_ERROR_INVALID_VALUE;
    if (!rc) {
        k->attrs.cache_config = config;
        k->attrs_set = true;
    }
    si_leave();
    return rc;
}

/* The clusters of one configuration that fit at once, as a GPU of 132 SMs
 * would have it for a kernel that fills an SM: 132 / (the cluster's
 * blocks). The cluster is the configuration's attribute, else 1; a grid
 * that is not a whole number of clusters, or more than 8 blocks in one
 * without the function's consent (32 with it), is
 * CUDA_ERROR_INVALID_CLUSTER_SIZE. */
CUresult CUDAAPI cuOccupancyMaxActiveClusters(int *numClusters, CUfunction func, const CUlaunchConfig *config)
{
    si_enter();
    si_func *f = NULL;
    CUresult rc = si_func_arg(func, &f);
    if (!rc && (!numClusters || !config || (config->numAttrs && !config->attrs)))
        rc = CUDA_ERROR_INVALID_VALUE;
    unsigned dim[3] = {1, 1, 1};
    for (unsigned i = 0; !rc && i < config->numAttrs; i++) {
        if (config->attrs[i].id != CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION)
            continue;
        dim[0] = config->attrs[i].value.clusterDim.x;
        dim[1] = config->attrs[i].value.clusterDim.y;
        dim[2] = config->attrs[i].value.clusterDim.z;
    }
    unsigned long long blocks = (unsigned long long)dim[0] * dim[1] * dim[2];
    if (!rc && (blocks == 0 || config->gridDimX % dim[0] || config->gridDimY % dim[1] || config->gridDimZ % dim[2] ||
                (blocks > 8 && !f->attrs.non_portable_cluster) || blocks > 32))
        rc = CUDA_ERROR_INVALID_CLUSTER_SIZE;
    if (!rc)
        *numClusters = (int)(132 / blocks);
    si_leave();
    return rc;
}

/* The blocks of blockSize threads that fit on one SM at once, as an SM of
 * 2048 threads, 32 blocks and 228 KiB of shared memory would have it:
 * dynamicSMemSize only ever lowers the count. */
CUresult CUDAAPI cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(int *numBlocks, CUfunction func, int blockSize,
                                                                     size_t dynamicSMemSize, unsigned int flags)
{
    si_enter();
    si_func *f = NULL;
    CUresult rc = si_func_arg(func, &f);
    if (!rc && (!numBlocks || blockSize <= 0 || blockSize > 1024 || flags > 1)) rc = CUDA_ERROR_INVALID_VALUE;
    if (!rc) {
        size_t n = 2048 / (size_t)blockSize;
        if (n > 32) n = 32;
        if (dynamicSMemSize > 0 && 233472 / dynamicSMemSize < n) n = 233472 / dynamicSMemSize;
        *numBlocks = (int)n;
    }
    si_leave();
    return rc;
}

CUresult CUDAAPI cuOccupancyMaxActiveBlocksPerMultiprocessor(int *numBlocks, CUfunction func, int blockSize,
                                                             size_t dynamicSMemSize)
{
    return cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(numBlocks, func, blockSize, dynamicSMemSize, 0);
}
