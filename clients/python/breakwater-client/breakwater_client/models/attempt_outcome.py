from enum import StrEnum


class AttemptOutcome(StrEnum):
    PERMANENT = "permanent"
    SUCCESS = "success"
    TRANSIENT = "transient"

    def __str__(self) -> str:
        return str(self.value)
