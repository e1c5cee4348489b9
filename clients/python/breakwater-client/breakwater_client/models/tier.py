from enum import StrEnum


class Tier(StrEnum):
    BULK = "bulk"
    DEFAULT = "default"
    HIGH = "high"

    def __str__(self) -> str:
        return str(self.value)
