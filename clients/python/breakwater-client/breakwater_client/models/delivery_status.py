from enum import StrEnum


class DeliveryStatus(StrEnum):
    CANCELLED = "cancelled"
    DEAD = "dead"
    DELIVERED = "delivered"
    DELIVERING = "delivering"
    FAILED = "failed"
    PAUSED = "paused"
    PENDING = "pending"

    def __str__(self) -> str:
        return str(self.value)
