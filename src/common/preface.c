/* preface.c - see preface.h. */
#include "preface.h"

#include <string.h>

#include "protocol.h"
#include "wire.h"

void preface_encode(uint8_t out[PREFACE_LEN], int transport, int kind)
{
    uint32_t magic = PREFACE_MAGIC;
    memcpy(out, &magic, 4);
    out[4] = (uint8_t)transport;
    out[5] = (uint8_t)kind;
    out[6] = SCUDA_PROTOCOL_VERSION;
    out[7] = 0;
}

int preface_decode(const uint8_t in[PREFACE_LEN], int *transport, int *kind)
{
    uint32_t magic;
    memcpy(&magic, in, 4);
    if (magic != PREFACE_MAGIC || in[4] > PREFACE_TLS || in[5] > PREFACE_JOIN || in[7]) return -1;
    *transport = in[4];
    *kind = in[5];
    return 0;
}

int preface_version(const uint8_t in[PREFACE_LEN]) { return in[6]; }

void preface_answer_encode(uint8_t out[PREFACE_LEN], int status)
{
    uint32_t magic = PREFACE_MAGIC;
    memcpy(out, &magic, 4);
    out[4] = (uint8_t)status;
    out[5] = out[6] = out[7] = 0;
}

int preface_answer_decode(const uint8_t in[PREFACE_LEN])
{
    uint32_t magic;
    memcpy(&magic, in, 4);
    if (magic == SCUDA_MAGIC) return -2;
    if (magic != PREFACE_MAGIC || in[4] > PREFACE_VERSION) return -1;
    return in[4];
}
