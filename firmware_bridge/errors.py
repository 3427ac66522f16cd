"""Errors raised by the host client. All derive from ``BridgeError``."""

from __future__ import annotations

from firmware_bridge.wire_constants import ErrorCode, MsgType


class BridgeError(Exception):
    """Base of the client's errors."""


class LinkDown(BridgeError):
    """The port failed (device unplugged, pty closed). The MCU's watchdog will stop the arm."""


class LinkTimeout(BridgeError):
    """No answer within the configured retries."""


class HandshakeError(BridgeError):
    """Version mismatch or wrong device: the link must not be used to move anything."""


class NotReady(BridgeError):
    """No handshake yet."""


class SessionChanged(BridgeError):
    """The MCU rebooted (new session id): handshake and arm again, from a fresh plan."""


class CommandRejected(BridgeError):
    """The MCU answered NACK."""

    def __init__(self, msg_type: MsgType, code: ErrorCode) -> None:
        super().__init__(f"MCU rejected {msg_type.name}: {code.name}")
        self.msg_type = msg_type
        self.code = code
