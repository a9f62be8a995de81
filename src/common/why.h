/* why.h - the one way a checking function says why it refused.
 *
 * Checks that can fail take a caller's buffer (why, whylen) for the
 * reason and return -1; the caller logs or forwards the text. Formatting
 * the reason and returning -1 in one call keeps each refusal one line:
 *     if (len < 16) return why_fail(why, whylen, "only %zu bytes", len);
 */
#ifndef SCUDA_WHY_H
#define SCUDA_WHY_H

#include <stddef.h>

/* Writes the formatted reason into why (cut to whylen, always
 * NUL-terminated) and returns -1. A NULL why or a zero whylen writes
 * nothing: a caller that does not want the reason passes (NULL, 0). */
int why_fail(char *why, size_t whylen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
