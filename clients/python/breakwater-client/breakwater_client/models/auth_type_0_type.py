from enum import StrEnum


class AuthType0Type(StrEnum):
    BASIC = "basic"

    def __str__(self) -> str:
        return str(self.value)
