"""Emulated MCU motor controller (same rules as the real firmware) and its joint-plant hook."""

from firmware_bridge.emulator.config import McuConfig
from firmware_bridge.emulator.mcu import McuEmulator
from firmware_bridge.emulator.plant import (
    JointPlant,
    JointSample,
    ServoPlant,
    ServoPlantConfig,
)

__all__ = [
    "JointPlant",
    "JointSample",
    "McuConfig",
    "McuEmulator",
    "ServoPlant",
    "ServoPlantConfig",
]
