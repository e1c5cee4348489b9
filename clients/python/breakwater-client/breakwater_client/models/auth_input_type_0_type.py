from enum import StrEnum


class AuthInputType0Type(StrEnum):
    BASIC = "basic"

    def __str__(self) -> str:
        return str(self.value)
