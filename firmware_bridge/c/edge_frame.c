/* edge_frame.c: see edge_frame.h. Only memcpy/memset from libc. */
#include "edge_frame.h"

#include <string.h>

typedef char ef_float_is_32_bits[(sizeof(float) == 4) ? 1 : -1];

const char *ef_status_name(ef_status status) {
    switch (status) {
    case EF_OK: return "OK";
    case EF_ERR_TOO_LONG: return "TOO_LONG";
    case EF_ERR_COBS: return "COBS";
    case EF_ERR_TOO_SHORT: return "TOO_SHORT";
    case EF_ERR_CRC: return "CRC";
    case EF_ERR_VERSION: return "VERSION";
    case EF_ERR_FLAGS: return "FLAGS";
    case EF_ERR_TYPE: return "TYPE";
    case EF_ERR_LENGTH: return "LENGTH";
    case EF_ERR_PAYLOAD: return "PAYLOAD";
    case EF_ERR_BUFFER: return "BUFFER";
    }
    return "UNKNOWN";
}

/* ------------------------------------------------------------------ little-endian helpers */
void ef_put_u16(uint8_t *p, uint16_t v) {
    p[0] = (uint8_t)(v & 0xFFu);
    p[1] = (uint8_t)(v >> 8);
}

void ef_put_u32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)(v & 0xFFu);
    p[1] = (uint8_t)((v >> 8) & 0xFFu);
    p[2] = (uint8_t)((v >> 16) & 0xFFu);
    p[3] = (uint8_t)(v >> 24);
}

void ef_put_f32(uint8_t *p, float v) {
    uint32_t bits;
    memcpy(&bits, &v, sizeof bits);
    ef_put_u32(p, bits);
}

uint16_t ef_get_u16(const uint8_t *p) { return (uint16_t)(p[0] | ((uint16_t)p[1] << 8)); }

uint32_t ef_get_u32(const uint8_t *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

float ef_get_f32(const uint8_t *p) {
    uint32_t bits = ef_get_u32(p);
    float v;
    memcpy(&v, &bits, sizeof v);
    return v;
}

/* ------------------------------------------------------------------ CRC-16/CCITT-FALSE */
uint16_t ef_crc16(const uint8_t *data, size_t len) {
    /* Bitwise on purpose: 16 shifts per byte is cheap at 255 B, saves 512 B of flash, and is an
     * independent implementation from the table-driven Python one. */
    uint16_t crc = 0xFFFFu;
    size_t i;
    int bit;
    for (i = 0; i < len; ++i) {
        crc ^= (uint16_t)((uint16_t)data[i] << 8);
        for (bit = 0; bit < 8; ++bit) {
            uint32_t shifted = (uint32_t)crc << 1;
            crc = (uint16_t)(((crc & 0x8000u) ? (shifted ^ 0x1021u) : shifted) & 0xFFFFu);
        }
    }
    return crc;
}

/* ------------------------------------------------------------------ COBS */
size_t ef_cobs_encode(const uint8_t *in, size_t len, uint8_t *out, size_t cap) {
    size_t code_at = 0, o = 1, i;
    uint8_t code = 1;
    if (cap < 1) return 0;
    for (i = 0; i < len; ++i) {
        if (in[i] == 0) {
            out[code_at] = code;
            if (o >= cap) return 0;
            code_at = o++;
            code = 1;
            continue;
        }
        if (o >= cap) return 0;
        out[o++] = in[i];
        if (++code == 0xFFu) {
            out[code_at] = code;
            if (o >= cap) return 0;
            code_at = o++;
            code = 1;
        }
    }
    out[code_at] = code;
    return o;
}

ef_status ef_cobs_decode(const uint8_t *in, size_t len, uint8_t *out, size_t cap, size_t *out_len) {
    size_t i = 0, o = 0, k;
    if (len == 0) return EF_ERR_COBS;
    while (i < len) {
        uint8_t code = in[i];
        size_t end;
        if (code == 0) return EF_ERR_COBS;
        end = i + code;
        if (end > len) return EF_ERR_COBS;
        for (k = i + 1; k < end; ++k) {
            if (in[k] == 0) return EF_ERR_COBS;
            if (o >= cap) return EF_ERR_TOO_LONG;
            out[o++] = in[k];
        }
        i = end;
        if (code != 0xFFu && i < len) {
            if (o >= cap) return EF_ERR_TOO_LONG;
            out[o++] = 0;
        }
    }
    *out_len = o;
    return EF_OK;
}

/* ------------------------------------------------------------------ frames */
static ef_status arrays_check(const uint8_t *p, size_t len, size_t head, size_t n_arrays) {
    size_t n;
    if (len < head) return EF_ERR_PAYLOAD;
    n = p[0];
    if (n < 1 || n > EF_MAX_JOINTS) return EF_ERR_PAYLOAD;
    return (len == head + 4u * n * n_arrays) ? EF_OK : EF_ERR_PAYLOAD;
}

static ef_status exact(size_t len, size_t want) { return len == want ? EF_OK : EF_ERR_PAYLOAD; }

ef_status ef_payload_check(uint8_t msg_type, const uint8_t *p, size_t len) {
    switch (msg_type) {
    case EF_MSG_HELLO: return exact(len, 6);
    case EF_MSG_CAPABILITIES:
        if (len != 19 || p[1] < 1 || p[1] > EF_MAX_JOINTS) return EF_ERR_PAYLOAD;
        return EF_OK;
    case EF_MSG_JOINT_COMMAND: return arrays_check(p, len, 5, 2);
    case EF_MSG_STATE:
        if (arrays_check(p, len, 8, 4) != EF_OK || p[1] > EF_MODE_MAX) return EF_ERR_PAYLOAD;
        return EF_OK;
    case EF_MSG_HEARTBEAT: return (len == 7 && p[6] <= EF_MODE_MAX) ? EF_OK : EF_ERR_PAYLOAD;
    case EF_MSG_ESTOP: return exact(len, 1);
    case EF_MSG_CLEAR_FAULT: return exact(len, 4);
    case EF_MSG_ARM:
    case EF_MSG_DISARM: return exact(len, 0);
    case EF_MSG_LIMITS_CONFIG: return arrays_check(p, len, 1, 4);
    case EF_MSG_ACK: return exact(len, 3);
    case EF_MSG_NACK: return (len == 4 && p[3] <= EF_ERROR_CODE_MAX) ? EF_OK : EF_ERR_PAYLOAD;
    case EF_MSG_ERROR: return (len == 9 && p[0] <= EF_ERROR_CODE_MAX) ? EF_OK : EF_ERR_PAYLOAD;
    default: return EF_ERR_TYPE;
    }
}

static int known_type(uint8_t t) {
    switch (t) {
    case EF_MSG_HELLO: case EF_MSG_CAPABILITIES: case EF_MSG_JOINT_COMMAND: case EF_MSG_STATE:
    case EF_MSG_HEARTBEAT: case EF_MSG_ESTOP: case EF_MSG_CLEAR_FAULT: case EF_MSG_ARM:
    case EF_MSG_DISARM: case EF_MSG_LIMITS_CONFIG: case EF_MSG_ACK: case EF_MSG_NACK:
    case EF_MSG_ERROR: return 1;
    default: return 0;
    }
}

ef_status ef_frame_encode(const ef_header *h, const uint8_t *payload, size_t len, uint8_t *out,
                          size_t cap, size_t *out_len) {
    uint8_t raw[EF_MAX_RAW_FRAME];
    size_t n, enc;
    if (len > EF_MAX_PAYLOAD || (len > 0 && payload == NULL)) return EF_ERR_BUFFER;
    raw[0] = h->version;
    raw[1] = h->msg_type;
    raw[2] = h->flags;
    ef_put_u16(&raw[3], h->session_id);
    ef_put_u16(&raw[5], h->seq);
    ef_put_u32(&raw[7], h->t_us);
    ef_put_u16(&raw[11], (uint16_t)len);
    if (len > 0) memcpy(&raw[EF_HEADER_SIZE], payload, len);
    n = EF_HEADER_SIZE + len;
    ef_put_u16(&raw[n], ef_crc16(raw, n));
    n += EF_CRC_SIZE;
    if (cap < 1) return EF_ERR_BUFFER;
    enc = ef_cobs_encode(raw, n, out, cap - 1u);
    if (enc == 0) return EF_ERR_BUFFER;
    out[enc] = 0x00;
    *out_len = enc + 1u;
    return EF_OK;
}

ef_status ef_frame_decode(const uint8_t *enc, size_t len, ef_frame *out) {
    ef_header *h = &out->header;
    size_t n, actual;
    ef_status st;
    if (len > EF_MAX_ENCODED_FRAME) return EF_ERR_TOO_LONG;
    /* A valid COBS block of <= 257 B decodes to <= 256 B; one more than EF_MAX_RAW_FRAME is
     * possible and must reach the LENGTH check like in Python, so decode into raw + spare. */
    {
        uint8_t tmp[EF_MAX_ENCODED_FRAME];
        st = ef_cobs_decode(enc, len, tmp, sizeof tmp, &n);
        if (st != EF_OK) return EF_ERR_COBS;
        if (n < EF_HEADER_SIZE + EF_CRC_SIZE) return EF_ERR_TOO_SHORT;
        if (ef_crc16(tmp, n - EF_CRC_SIZE) != ef_get_u16(&tmp[n - EF_CRC_SIZE])) return EF_ERR_CRC;
        h->version = tmp[0];
        h->msg_type = tmp[1];
        h->flags = tmp[2];
        h->session_id = ef_get_u16(&tmp[3]);
        h->seq = ef_get_u16(&tmp[5]);
        h->t_us = ef_get_u32(&tmp[7]);
        h->payload_len = ef_get_u16(&tmp[11]);
        if (h->version != EF_PROTOCOL_VERSION) return EF_ERR_VERSION;
        if (h->flags & EF_FLAGS_RESERVED_MASK) return EF_ERR_FLAGS;
        if (!known_type(h->msg_type)) return EF_ERR_TYPE;
        actual = n - EF_HEADER_SIZE - EF_CRC_SIZE;
        if (h->payload_len != actual || actual > EF_MAX_PAYLOAD) return EF_ERR_LENGTH;
        memcpy(out->raw, tmp, n);
    }
    out->raw_len = n;
    out->payload = &out->raw[EF_HEADER_SIZE];
    return ef_payload_check(h->msg_type, out->payload, actual);
}

/* ------------------------------------------------------------------ deframer */
void ef_deframer_init(ef_deframer *d) { memset(d, 0, sizeof *d); }

int ef_deframer_push(ef_deframer *d, uint8_t byte, const uint8_t **frame, size_t *len) {
    d->last_oversize = 0;
    if (byte == 0x00) {
        if (d->discarding) {
            d->discarding = 0;
            return 0;
        }
        if (d->len == 0) return 0; /* idle fill */
        *frame = d->buf;
        *len = d->len;
        d->len = 0;
        return 1;
    }
    if (d->discarding) return 0;
    if (d->len >= EF_MAX_ENCODED_FRAME) {
        d->oversize++;
        d->last_oversize = 1;
        d->discarding = 1;
        d->len = 0;
        return 0;
    }
    d->buf[d->len++] = byte;
    return 0;
}

/* ------------------------------------------------------------------ typed payloads */
ef_status ef_joint_command_unpack(const uint8_t *p, size_t len, ef_joint_command *out) {
    size_t i, n;
    if (arrays_check(p, len, 5, 2) != EF_OK) return EF_ERR_PAYLOAD;
    n = p[0];
    out->n = (uint8_t)n;
    out->deadline_us = ef_get_u32(&p[1]);
    for (i = 0; i < n; ++i) {
        out->q_rad[i] = ef_get_f32(&p[5 + 4 * i]);
        out->qd_rad_s[i] = ef_get_f32(&p[5 + 4 * (n + i)]);
    }
    return EF_OK;
}

size_t ef_joint_command_pack(const ef_joint_command *m, uint8_t *out, size_t cap) {
    size_t i, n = m->n, need = 5 + 8 * (size_t)m->n;
    if (n < 1 || n > EF_MAX_JOINTS || cap < need) return 0;
    out[0] = m->n;
    ef_put_u32(&out[1], m->deadline_us);
    for (i = 0; i < n; ++i) {
        ef_put_f32(&out[5 + 4 * i], m->q_rad[i]);
        ef_put_f32(&out[5 + 4 * (n + i)], m->qd_rad_s[i]);
    }
    return need;
}

ef_status ef_state_unpack(const uint8_t *p, size_t len, ef_state *out) {
    size_t i, n;
    if (ef_payload_check(EF_MSG_STATE, p, len) != EF_OK) return EF_ERR_PAYLOAD;
    n = p[0];
    out->n = (uint8_t)n;
    out->mode = p[1];
    out->fault_flags = ef_get_u32(&p[2]);
    out->last_cmd_seq = ef_get_u16(&p[6]);
    for (i = 0; i < n; ++i) {
        out->q_rad[i] = ef_get_f32(&p[8 + 4 * i]);
        out->qd_rad_s[i] = ef_get_f32(&p[8 + 4 * (n + i)]);
        out->current_a[i] = ef_get_f32(&p[8 + 4 * (2 * n + i)]);
        out->temp_c[i] = ef_get_f32(&p[8 + 4 * (3 * n + i)]);
    }
    return EF_OK;
}

size_t ef_state_pack(const ef_state *m, uint8_t *out, size_t cap) {
    size_t i, n = m->n, need = 8 + 16 * (size_t)m->n;
    if (n < 1 || n > EF_MAX_JOINTS || m->mode > EF_MODE_MAX || cap < need) return 0;
    out[0] = m->n;
    out[1] = m->mode;
    ef_put_u32(&out[2], m->fault_flags);
    ef_put_u16(&out[6], m->last_cmd_seq);
    for (i = 0; i < n; ++i) {
        ef_put_f32(&out[8 + 4 * i], m->q_rad[i]);
        ef_put_f32(&out[8 + 4 * (n + i)], m->qd_rad_s[i]);
        ef_put_f32(&out[8 + 4 * (2 * n + i)], m->current_a[i]);
        ef_put_f32(&out[8 + 4 * (3 * n + i)], m->temp_c[i]);
    }
    return need;
}
