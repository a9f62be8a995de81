/* fuzz_decode.h - the table of message decoders that gen_decoders.py
 * writes for fuzz_decode.c. */
#ifndef SCUDA_FUZZ_DECODE_H
#define SCUDA_FUZZ_DECODE_H

#include <string.h>

#include "common/messages.gen.h"

struct fuzz_decoder {
    const char *name;
    /* Decodes r; on success re-encodes the message into `again`. 0 or -1. */
    int (*decode)(wire_reader *r, struct msg_arena *a, wire_buf *again);
    /* Decodes r (the re-encoding) and nothing else. */
    int (*redecode)(wire_reader *r, struct msg_arena *a);
};

extern const struct fuzz_decoder fuzz_decoders[];
extern const unsigned fuzz_decoder_count;

#endif
