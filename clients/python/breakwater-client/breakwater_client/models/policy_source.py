from enum import StrEnum


class PolicySource(StrEnum):
    CHANNEL = "channel"
    CONFIG = "config"
    TENANT = "tenant"

    def __str__(self) -> str:
        return str(self.value)
