/*
 * Test driver for edge_frame.c (host build only; uses stdio).
 *
 *   test_edge_frame --selftest          built-in checks (CRC check value, COBS, round trips)
 *   test_edge_frame --fuzz SEED COUNT   random and mutated frames through decoder + deframer
 *   test_edge_frame < commands          one command per line, one answer line each:
 *     D <hex>   decode one encoded frame (no delimiter) ->
 *               "OK ver type flags session seq t_us payload_hex ENC wire_hex [TYPED ...]" | "ERR NAME"
 *     S <hex>   push a byte stream through the deframer + decoder ->
 *               "S item item ..." with item = OK:<type>:<seq> | <ERROR NAME> (TOO_LONG on oversize)
 *     C <hex>   COBS-encode -> "C <hex>"
 *     R <hex>   CRC-16 -> "R <4 hex digits>"
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "edge_frame.h"

#define LINE_MAX_BYTES 8192

static int hexval(int c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static size_t parse_hex(const char *s, uint8_t *out, size_t cap) {
    size_t n = 0;
    while (s[0] && s[1] && hexval(s[0]) >= 0 && hexval(s[1]) >= 0 && n < cap) {
        out[n++] = (uint8_t)(hexval(s[0]) * 16 + hexval(s[1]));
        s += 2;
    }
    return n;
}

static void print_hex(const uint8_t *p, size_t n) {
    size_t i;
    for (i = 0; i < n; ++i) printf("%02x", p[i]);
}

static void print_floats(const float *v, size_t n) {
    size_t i;
    for (i = 0; i < n; ++i) {
        uint32_t bits;
        memcpy(&bits, &v[i], 4);
        printf(" %08lx", (unsigned long)bits);
    }
}

static void cmd_decode(const uint8_t *in, size_t n) {
    static ef_frame f;
    uint8_t wire[EF_MAX_WIRE_FRAME];
    uint8_t repacked[EF_MAX_PAYLOAD];
    size_t wire_len = 0, rp = 0;
    ef_status st = ef_frame_decode(in, n, &f);
    if (st != EF_OK) {
        printf("ERR %s\n", ef_status_name(st));
        return;
    }
    printf("OK %u %u %u %u %u %lu ", f.header.version, f.header.msg_type, f.header.flags,
           f.header.session_id, f.header.seq, (unsigned long)f.header.t_us);
    print_hex(f.payload, f.header.payload_len);
    if (ef_frame_encode(&f.header, f.payload, f.header.payload_len, wire, sizeof wire, &wire_len) != EF_OK) {
        printf(" ENC FAILED\n");
        return;
    }
    printf(" ENC ");
    print_hex(wire, wire_len);
    if (f.header.msg_type == EF_MSG_JOINT_COMMAND) {
        ef_joint_command jc;
        ef_joint_command_unpack(f.payload, f.header.payload_len, &jc);
        printf(" JC %u %lu", jc.n, (unsigned long)jc.deadline_us);
        print_floats(jc.q_rad, jc.n);
        print_floats(jc.qd_rad_s, jc.n);
        rp = ef_joint_command_pack(&jc, repacked, sizeof repacked);
    } else if (f.header.msg_type == EF_MSG_STATE) {
        ef_state s;
        ef_state_unpack(f.payload, f.header.payload_len, &s);
        printf(" ST %u %u %lu %u", s.n, s.mode, (unsigned long)s.fault_flags, s.last_cmd_seq);
        print_floats(s.q_rad, s.n);
        print_floats(s.qd_rad_s, s.n);
        print_floats(s.current_a, s.n);
        print_floats(s.temp_c, s.n);
        rp = ef_state_pack(&s, repacked, sizeof repacked);
    }
    if (rp) {
        printf(" REPACK ");
        print_hex(repacked, rp);
    }
    printf("\n");
}

static void cmd_stream(const uint8_t *in, size_t n) {
    static ef_deframer d;
    static ef_frame f;
    size_t i, len;
    const uint8_t *frame;
    ef_deframer_init(&d);
    printf("S");
    for (i = 0; i < n; ++i) {
        int ready = ef_deframer_push(&d, in[i], &frame, &len);
        if (d.last_oversize) printf(" TOO_LONG");
        if (ready) {
            ef_status st = ef_frame_decode(frame, len, &f);
            if (st == EF_OK) printf(" OK:%u:%u", f.header.msg_type, f.header.seq);
            else printf(" %s", ef_status_name(st));
        }
    }
    printf("\n");
}

static int failures = 0;
#define CHECK(cond) do { if (!(cond)) { printf("FAIL %s:%d %s\n", __FILE__, __LINE__, #cond); ++failures; } } while (0)

static int selftest(void) {
    const uint8_t check[] = "123456789";
    uint8_t raw[600], enc[700], dec[700], wire[EF_MAX_WIRE_FRAME];
    size_t i, n, m, len;
    static ef_frame f;
    ef_joint_command jc, jc2;
    ef_header h;
    CHECK(ef_crc16(check, 9) == 0x29B1u);
    for (n = 0; n < 600; n += 7) {
        for (i = 0; i < n; ++i) raw[i] = (uint8_t)((i * 37u + n) % 5u == 0 ? 0 : i * 13u + 1u);
        m = ef_cobs_encode(raw, n, enc, sizeof enc);
        CHECK(m > 0 && m <= n + n / 254 + 1);
        CHECK(memchr(enc, 0, m) == NULL);
        CHECK(ef_cobs_decode(enc, m, dec, sizeof dec, &len) == EF_OK && len == n && memcmp(raw, dec, n) == 0);
    }
    CHECK(ef_cobs_encode(raw, 10, enc, 5) == 0); /* too small */
    memset(&jc, 0, sizeof jc);
    jc.n = EF_MAX_JOINTS;
    jc.deadline_us = 0xFFFFFFF0u;
    for (i = 0; i < jc.n; ++i) {
        jc.q_rad[i] = 0.1f * (float)i;
        jc.qd_rad_s[i] = -0.5f;
    }
    n = ef_joint_command_pack(&jc, raw, sizeof raw);
    CHECK(n == 5 + 8 * EF_MAX_JOINTS);
    h.version = EF_PROTOCOL_VERSION;
    h.msg_type = EF_MSG_JOINT_COMMAND;
    h.flags = 0;
    h.session_id = 0xBEEF;
    h.seq = 0xFFFF;
    h.t_us = 123;
    h.payload_len = 0;
    CHECK(ef_frame_encode(&h, raw, n, wire, sizeof wire, &len) == EF_OK);
    CHECK(wire[len - 1] == 0 && memchr(wire, 0, len - 1) == NULL);
    CHECK(ef_frame_decode(wire, len - 1, &f) == EF_OK);
    CHECK(f.header.seq == 0xFFFF && f.header.session_id == 0xBEEF && f.header.payload_len == n);
    CHECK(ef_joint_command_unpack(f.payload, f.header.payload_len, &jc2) == EF_OK);
    CHECK(memcmp(jc.q_rad, jc2.q_rad, sizeof(float) * jc.n) == 0 && jc2.deadline_us == jc.deadline_us);
    CHECK(ef_frame_encode(&h, raw, EF_MAX_PAYLOAD + 1, wire, sizeof wire, &len) == EF_ERR_BUFFER);
    CHECK(ef_frame_encode(&h, raw, n, wire, 20, &len) == EF_ERR_BUFFER);
    wire[3] ^= 0x01;
    CHECK(ef_frame_decode(wire, len - 1, &f) != EF_OK);
    printf(failures ? "SELFTEST FAILED\n" : "SELFTEST OK\n");
    return failures ? 1 : 0;
}

static uint32_t rng_state;
static uint32_t rnd(void) { /* xorshift32 */
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 17;
    rng_state ^= rng_state << 5;
    return rng_state;
}

static int fuzz(uint32_t seed, unsigned long count) {
    static ef_frame f;
    static ef_deframer d;
    uint8_t buf[EF_MAX_ENCODED_FRAME + 64], payload[EF_MAX_PAYLOAD];
    unsigned long k, ok = 0;
    size_t len, i, flen;
    const uint8_t *frame;
    ef_header h;
    rng_state = seed ? seed : 1u;
    ef_deframer_init(&d);
    for (k = 0; k < count; ++k) {
        if (k % 2 == 0) { /* valid frame, then mutated */
            size_t plen = rnd() % (EF_MAX_PAYLOAD + 1);
            for (i = 0; i < plen; ++i) payload[i] = (uint8_t)rnd();
            h.version = 1; h.msg_type = (uint8_t)rnd(); h.flags = (uint8_t)(rnd() & 3u);
            h.session_id = (uint16_t)rnd(); h.seq = (uint16_t)rnd(); h.t_us = rnd(); h.payload_len = 0;
            if (ef_frame_encode(&h, payload, plen, buf, sizeof buf, &len) != EF_OK) return 2;
            len -= 1;
            for (i = 0; i < (rnd() % 4u); ++i) buf[rnd() % len] ^= (uint8_t)(1u << (rnd() % 8u));
        } else { /* random bytes */
            len = rnd() % sizeof buf;
            for (i = 0; i < len; ++i) buf[i] = (uint8_t)rnd();
        }
        if (ef_frame_decode(buf, len, &f) == EF_OK) ++ok;
        for (i = 0; i < len; ++i) (void)ef_deframer_push(&d, buf[i], &frame, &flen);
    }
    printf("FUZZ %lu frames, %lu decoded OK, %lu oversize\n", count, ok, (unsigned long)d.oversize);
    return 0;
}

int main(int argc, char **argv) {
    static char line[2 * LINE_MAX_BYTES + 16];
    static uint8_t bytes[LINE_MAX_BYTES];
    if (argc > 1 && strcmp(argv[1], "--selftest") == 0) return selftest();
    if (argc > 3 && strcmp(argv[1], "--fuzz") == 0)
        return fuzz((uint32_t)strtoul(argv[2], NULL, 10), strtoul(argv[3], NULL, 10));
    while (fgets(line, sizeof line, stdin)) {
        size_t n;
        if (line[0] == '\0' || line[0] == '\n') continue;
        n = parse_hex(line + 2, bytes, sizeof bytes);
        switch (line[0]) {
        case 'D': cmd_decode(bytes, n); break;
        case 'S': cmd_stream(bytes, n); break;
        case 'C': {
            static uint8_t enc[LINE_MAX_BYTES + LINE_MAX_BYTES / 254 + 2];
            size_t m = ef_cobs_encode(bytes, n, enc, sizeof enc);
            printf("C ");
            print_hex(enc, m);
            printf("\n");
            break;
        }
        case 'R': printf("R %04x\n", ef_crc16(bytes, n)); break;
        default: printf("? unknown command\n"); break;
        }
    }
    return 0;
}
