from enum import StrEnum


class AuthInputType1Type(StrEnum):
    BEARER = "bearer"

    def __str__(self) -> str:
        return str(self.value)
