from enum import StrEnum


class AdminChannelActionAction(StrEnum):
    CLOSE = "close"
    OPEN = "open"
    PAUSE = "pause"
    RESUME = "resume"

    def __str__(self) -> str:
        return str(self.value)
