from enum import StrEnum


class Quota(StrEnum):
    ACTIVE_KEYS = "active_keys"
    CHANNELS = "channels"
    DELIVERIES_PER_DAY = "deliveries_per_day"
    DELIVERIES_PER_SECOND = "deliveries_per_second"

    def __str__(self) -> str:
        return str(self.value)
