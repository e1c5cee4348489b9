from enum import StrEnum


class BackoffPolicyType0Kind(StrEnum):
    EXPONENTIAL = "exponential"

    def __str__(self) -> str:
        return str(self.value)
