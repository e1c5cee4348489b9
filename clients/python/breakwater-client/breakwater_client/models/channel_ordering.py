from enum import StrEnum


class ChannelOrdering(StrEnum):
    FIFO = "fifo"
    NONE = "none"

    def __str__(self) -> str:
        return str(self.value)
