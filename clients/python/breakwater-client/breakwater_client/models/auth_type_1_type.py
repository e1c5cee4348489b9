from enum import StrEnum


class AuthType1Type(StrEnum):
    BEARER = "bearer"

    def __str__(self) -> str:
        return str(self.value)
