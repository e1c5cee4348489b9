from enum import StrEnum


class Scope(StrEnum):
    MANAGE = "manage"
    READ = "read"

    def __str__(self) -> str:
        return str(self.value)
