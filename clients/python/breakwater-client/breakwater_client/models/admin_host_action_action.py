from enum import StrEnum


class AdminHostActionAction(StrEnum):
    CLOSE = "close"
    OPEN = "open"

    def __str__(self) -> str:
        return str(self.value)
