/*
 * edge_frame: firmware-side codec of the edge wire protocol, version 1 (see ../PROTOCOL.md).
 *
 * C99, no allocation, no libc beyond memcpy/memset. Every buffer is caller-provided and
 * fixed-size; lengths are checked before anything is copied. The decoder returns the same
 * error for the same bytes as the Python decoder (checked against ../golden_vectors.json).
 *
 * Assumes IEEE-754 binary32 `float` (true on Cortex-M4F/M7 and every host we test on).
 */
#ifndef EDGE_FRAME_H
#define EDGE_FRAME_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define EF_PROTOCOL_VERSION 1u
#define EF_MAX_JOINTS 12u
#define EF_HEADER_SIZE 13u
#define EF_CRC_SIZE 2u
#define EF_MAX_PAYLOAD 240u
#define EF_MAX_RAW_FRAME (EF_HEADER_SIZE + EF_MAX_PAYLOAD + EF_CRC_SIZE) /* 255 */
#define EF_MAX_ENCODED_FRAME (EF_MAX_RAW_FRAME + EF_MAX_RAW_FRAME / 254u + 1u) /* 257 */
#define EF_MAX_WIRE_FRAME (EF_MAX_ENCODED_FRAME + 1u) /* + 0x00 delimiter */

enum ef_msg_type {
    EF_MSG_HELLO = 0x01,
    EF_MSG_CAPABILITIES = 0x02,
    EF_MSG_JOINT_COMMAND = 0x10,
    EF_MSG_STATE = 0x11,
    EF_MSG_HEARTBEAT = 0x20,
    EF_MSG_ESTOP = 0x30,
    EF_MSG_CLEAR_FAULT = 0x31,
    EF_MSG_ARM = 0x32,
    EF_MSG_DISARM = 0x33,
    EF_MSG_LIMITS_CONFIG = 0x40,
    EF_MSG_ACK = 0x50,
    EF_MSG_NACK = 0x51,
    EF_MSG_ERROR = 0x52
};

#define EF_FLAG_ACK_REQUEST 0x01u
#define EF_FLAG_FROM_MCU 0x02u
#define EF_FLAGS_RESERVED_MASK 0xFCu

enum ef_mode { EF_MODE_DISARMED = 0, EF_MODE_ARMED = 1, EF_MODE_STOPPING = 2, EF_MODE_FAULT = 3, EF_MODE_ESTOP = 4 };
#define EF_MODE_MAX 4u
#define EF_ERROR_CODE_MAX 17u /* highest ErrorCode value defined in protocol v1 */

/* Decoder/encoder status, in the order the decoder runs its checks. */
typedef enum {
    EF_OK = 0,
    EF_ERR_TOO_LONG,  /* encoded frame longer than EF_MAX_ENCODED_FRAME (before decoding) */
    EF_ERR_COBS,      /* invalid COBS */
    EF_ERR_TOO_SHORT, /* fewer bytes than header + CRC */
    EF_ERR_CRC,       /* CRC mismatch */
    EF_ERR_VERSION,   /* unsupported protocol version */
    EF_ERR_FLAGS,     /* reserved flag bits set */
    EF_ERR_TYPE,      /* unknown message type */
    EF_ERR_LENGTH,    /* payload_len disagrees with frame length, or > EF_MAX_PAYLOAD */
    EF_ERR_PAYLOAD,   /* payload malformed for its type */
    EF_ERR_BUFFER     /* encoder: caller's output buffer too small, or bad argument */
} ef_status;

const char *ef_status_name(ef_status status);

typedef struct {
    uint8_t version;
    uint8_t msg_type;
    uint8_t flags;
    uint16_t session_id;
    uint16_t seq;
    uint32_t t_us;
    uint16_t payload_len;
} ef_header;

/* A decoded frame; `payload` points into `raw`. */
typedef struct {
    ef_header header;
    const uint8_t *payload;
    uint8_t raw[EF_MAX_RAW_FRAME];
    size_t raw_len;
} ef_frame;

/* CRC-16/CCITT-FALSE: poly 0x1021, init 0xFFFF, no reflection, xorout 0, check("123456789")=0x29B1. */
uint16_t ef_crc16(const uint8_t *data, size_t len);

/* COBS without delimiter. encode returns the output length, 0 if `cap` is too small. */
size_t ef_cobs_encode(const uint8_t *in, size_t len, uint8_t *out, size_t cap);
ef_status ef_cobs_decode(const uint8_t *in, size_t len, uint8_t *out, size_t cap, size_t *out_len);

/* Header + payload -> COBS + 0x00 into `out`; payload_len in `h` is ignored (taken from `len`). */
ef_status ef_frame_encode(const ef_header *h, const uint8_t *payload, size_t len, uint8_t *out,
                          size_t cap, size_t *out_len);

/* One encoded frame (delimiter stripped) -> header + validated payload. */
ef_status ef_frame_decode(const uint8_t *enc, size_t len, ef_frame *out);

/* Payload-level check for a known type (ef_frame_decode already calls it). */
ef_status ef_payload_check(uint8_t msg_type, const uint8_t *payload, size_t len);

/* Streaming deframer: push bytes; returns 1 when a frame is complete (`*frame`, `*len` valid
 * until the next push), 0 otherwise. Runs longer than EF_MAX_ENCODED_FRAME are dropped up to the
 * next delimiter; `oversize` counts them and `last_oversize` is set on the byte that overflowed. */
typedef struct {
    uint8_t buf[EF_MAX_ENCODED_FRAME];
    size_t len;
    uint8_t discarding;
    uint8_t last_oversize;
    uint32_t oversize;
} ef_deframer;

void ef_deframer_init(ef_deframer *d);
int ef_deframer_push(ef_deframer *d, uint8_t byte, const uint8_t **frame, size_t *len);

/* Typed payloads the firmware uses on its hot path. */
typedef struct {
    uint8_t n;
    uint32_t deadline_us;
    float q_rad[EF_MAX_JOINTS];
    float qd_rad_s[EF_MAX_JOINTS];
} ef_joint_command;

typedef struct {
    uint8_t n;
    uint8_t mode;
    uint32_t fault_flags;
    uint16_t last_cmd_seq;
    float q_rad[EF_MAX_JOINTS];
    float qd_rad_s[EF_MAX_JOINTS];
    float current_a[EF_MAX_JOINTS];
    float temp_c[EF_MAX_JOINTS];
} ef_state;

ef_status ef_joint_command_unpack(const uint8_t *p, size_t len, ef_joint_command *out);
size_t ef_joint_command_pack(const ef_joint_command *m, uint8_t *out, size_t cap);
ef_status ef_state_unpack(const uint8_t *p, size_t len, ef_state *out);
size_t ef_state_pack(const ef_state *m, uint8_t *out, size_t cap);

/* Little-endian field helpers. */
void ef_put_u16(uint8_t *p, uint16_t v);
void ef_put_u32(uint8_t *p, uint32_t v);
void ef_put_f32(uint8_t *p, float v);
uint16_t ef_get_u16(const uint8_t *p);
uint32_t ef_get_u32(const uint8_t *p);
float ef_get_f32(const uint8_t *p);

#ifdef __cplusplus
}
#endif

#endif /* EDGE_FRAME_H */
